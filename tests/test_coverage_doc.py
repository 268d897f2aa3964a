"""docs/coverage.md maps every fact of the reference tutorial to the notebook and section where a
learner meets it ("08 § Why the retire statement has its own index"). Notebooks are rewritten;
this holds each reference to a section the notebook has."""

from __future__ import annotations

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
COVERAGE = ROOT / "docs" / "coverage.md"
# "08 § ...", "00 Introduction § ..." or "README § ...": whose every following "§ ..." is
NOTEBOOK_REF = re.compile(r"\b(\d\d|README)(?: [A-Z][a-z]+)? § ")
OPENING = "intro"  # the notebook's opening, before its first section


def flat(text: str) -> str:
    """Whitespace collapsed (a reference may wrap across lines), backticks dropped."""
    return " ".join(text.replace("`", "").split())


def sections() -> dict[str, set[str]]:
    """Each notebook number's section headings (## and ###), and the README's, flattened."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    found = {"README": {flat(line.lstrip("#")) for line in readme if line.startswith(("## ", "### "))}}
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
