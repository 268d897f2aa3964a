"""Write the tutorial's modules from the notebooks' saved cells, or check that they agree.

    python -m labqueue.tutorial.build           # rewrite labqueue/tutorial/*.py from the notebooks
    python -m labqueue.tutorial.build --check   # exit 1, naming the module, if any differs

Each module keeps its own header (the docstring at its top); everything after it is the
cells whose first line is `# <module>.py`, in the notebooks' order.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from .sections import MODULES, PACKAGE, Section, join, package_text, saved_cell, split

NOTEBOOKS = PACKAGE.parent.parent / "notebooks"


def code_cells(notebook: Path) -> list[str]:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    return ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]


def from_notebooks(folder: Path = NOTEBOOKS) -> dict[str, str]:
    """Each module's text as the notebooks in `folder` define it."""
    found: dict[str, list[Section]] = {m: [] for m in MODULES}
    for notebook in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        label = f"notebooks/{notebook.name}"
        for source in code_cells(notebook):
            if (saved := saved_cell(source)) is not None:
                module, body = saved
                found[module].append(Section(label, body))
    return {m: join(split(package_text(m))[0], sections) for m, sections in found.items()}


def differing(folder: Path = NOTEBOOKS) -> list[str]:
    """The modules whose package copy is not what the notebooks define."""
    return [m for m, text in from_notebooks(folder).items() if package_text(m) != text]


def main(argv: list[str]) -> int:
    if argv not in ([], ["--check"]):
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv == ["--check"]:
        stale = differing()
        for module in stale:
            print(f"labqueue/tutorial/{module}.py differs from its notebook cells:"
                  " run python -m labqueue.tutorial.build", file=sys.stderr)
        return 1 if stale else 0
    for module, text in from_notebooks().items():
        if package_text(module) != text:
            (PACKAGE / f"{module}.py").write_text(text, encoding="utf-8")
            print(f"wrote labqueue/tutorial/{module}.py")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
