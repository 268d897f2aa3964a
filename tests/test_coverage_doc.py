"""docs/coverage.md maps every fact of the reference tutorial to the notebook and section where a
learner meets it ("08 § Why the retire statement has its own index"), or the page of the package's
guide ("docs/package/howto/queues.md § Priorities and named queues"). Notebooks and pages are
rewritten; this holds each reference to a section the notebook or page has."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COVERAGE = ROOT / "docs" / "coverage.md"
# "08 § ...", "00 Introduction § ...", "README § ..." or "docs/NAME.md § ...": whose every
# following "§ ..." is
NOTEBOOK_REF = re.compile(r"(?<![\w/.-])(\d\d|README|docs/[\w/.-]+\.md)(?: [A-Z][a-z]+)? § ")
OPENING = "intro"  # the notebook's opening, before its first section


def flat(text: str) -> str:
    """Whitespace collapsed (a reference may wrap across lines), backticks dropped."""
    return " ".join(text.replace("`", "").split())


def headings(path: Path) -> set[str]:
    """A Markdown file's section headings (## and ###), flattened."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return {flat(line.lstrip("#")) for line in lines if line.startswith(("## ", "### "))}


def sections() -> dict[str, set[str]]:
    """Each notebook number's section headings (## and ###), the README's and each docs page's
    (by its path, docs/...), flattened."""
    found = {"README": headings(ROOT / "README.md")}
    for path in sorted((ROOT / "docs").rglob("*.md")):
        found[path.relative_to(ROOT).as_posix()] = headings(path)
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                for line in "".join(cell["source"]).splitlines():
                    if line.startswith(("## ", "### ")):
                        found.setdefault(path.name[:2], set()).add(flat(line.lstrip("#")))
    return found


def test_every_section_the_coverage_map_names_is_in_its_notebook():
    headings = sections()
    text = flat(COVERAGE.read_text(encoding="utf-8"))
    owners = [(m.end(), m[1]) for m in NOTEBOOK_REF.finditer(text)]
    stale = []
    for mark in re.finditer("§ ", text):
        before = [number for end, number in owners if end <= mark.end()]
        named = text[mark.end() :]
        if not before:
            stale.append(f"§ {named[:50]} (no notebook)")
        elif not (
            named.startswith(OPENING) or any(named.startswith(h) for h in headings.get(before[-1], ()))
        ):
            stale.append(f"{before[-1]} § {named[:50]}")
    assert len(owners) > 100 and stale == [], "\n".join(stale)
