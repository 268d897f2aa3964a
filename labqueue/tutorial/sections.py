"""How the tutorial's modules are made of notebook cells, written once for the build (which
writes the package's copy from the notebooks) and the workspace (which keeps a learner's copy
in step with the cells they run).

A saved cell starts with one line naming its module, `# jobqueue.py`; the rest of the cell
is its body. In a module, each body follows a line `# Defined in notebooks/NN_slug.ipynb`,
so a module splits back into the cells it was made of.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

# The tutorial's modules, in the order a process loads them: each imports only earlier ones.
MODULES = ("race", "jobqueue", "keepalive", "worker")

PACKAGE = Path(__file__).resolve().parent
CELL_HEADER = re.compile(r"# (\w+)\.py[ \t]*(?:\n|$)")
MARK = re.compile(r"^# Defined in (notebooks/[\w.-]+\.ipynb)[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Section:
    """One saved cell's body, and the notebook that defines it."""

    notebook: str
    body: str

    @property
    def names(self) -> frozenset[str]:
        return defined_names(self.body)


def saved_cell(source: str) -> tuple[str, str] | None:
    """(module, body) for a cell whose first line is `# <module>.py` naming one of the
    tutorial's modules; None for any other cell."""
    match = CELL_HEADER.match(source)
    if match is None or match.group(1) not in MODULES:
        return None
    return match.group(1), source[match.end() :].strip("\n")


def defined_names(body: str) -> frozenset[str]:
    """The names a cell defines at its top level (functions, classes, assignments): what
    identifies it when a learner runs an edited copy. Empty when it does not parse."""
    try:
        tree = ast.parse(body)
    except SyntaxError:
        return frozenset()
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name))
    return frozenset(names)


def split(text: str) -> tuple[str, list[Section]]:
    """A module's text as (its header, its sections)."""
    marks = list(MARK.finditer(text))
    header = text[: marks[0].start()] if marks else text
    sections = []
    for mark, following in zip(marks, [*marks[1:], None], strict=True):
        end = following.start() if following else len(text)
        sections.append(Section(mark.group(1), text[mark.end() : end].strip("\n")))
    return header.rstrip("\n"), sections


def join(header: str, sections: list[Section]) -> str:
    """The inverse of split(): a header, then each section under its mark, two blank lines apart."""
    parts = [header.rstrip("\n"), *(f"# Defined in {s.notebook}\n{s.body}" for s in sections)]
    return "\n\n\n".join(parts) + "\n"


def replace(sections: list[Section], notebook: str, body: str) -> list[Section]:
    """The sections with `body` in place of the one that defines the most of the same names
    (keeping that one's notebook), or added at the end when it shares none."""
    names = defined_names(body)
    overlaps = [len(names & s.names) for s in sections]
    if not overlaps or max(overlaps) == 0:
        return [*sections, Section(notebook, body)]
    at = overlaps.index(max(overlaps))
    return [*sections[:at], Section(sections[at].notebook, body), *sections[at + 1 :]]


def package_text(module: str) -> str:
    """The package's copy of one of the tutorial's modules."""
    return (PACKAGE / f"{module}.py").read_text(encoding="utf-8")
