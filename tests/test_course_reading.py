"""The course as a learner reads it: objectives on top that the end answers, a time that follows from
what the notebook holds, prose within its budget in sentences one can follow, every word of the
glossary defined where the course first uses it, no quotation read twice, and a place to ask."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from labqueue.lab import reading

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
GLOSSARY = ROOT / "docs" / "glossary.md"


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _markdown(nb: dict) -> list[str]:
    return [_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]


def _terms() -> list[tuple[str, str]]:
    return [
        (line[3:].strip(), line[3:].strip().lower().replace(" ", "-"))
        for line in GLOSSARY.read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    ]


def _mentions(term: str) -> re.Pattern[str]:
    words = r"[\s-]+".join(re.escape(w) for w in re.split(r"[\s-]+", term))
    return re.compile(rf"(?<![\w`]){words}(s|es)?(?![\w`])", re.I)


def test_every_glossary_link_names_an_entry():
    anchors = {a for _, a in _terms()}
    for path in NOTEBOOKS:
        for text in _markdown(_load(path)):
            for anchor in re.findall(r"glossary\.md#([\w-]+)\)", text):
                assert anchor in anchors, f"{path.name} links to glossary#{anchor}, which has no entry"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_says_where_to_ask(path):
    last = _markdown(_load(path))[-1]
    assert "](../docs/feedback.md)" in last, f"{path.name}: its last cell has no questions-or-feedback link"


def _minutes(path: Path) -> int:
    return reading.estimate(_load(path)).total


def _agenda_rows() -> list[list[str]]:
    """The rows of docs/workshop.md's agenda tables (those with a clock column), table by table."""
    tables, rows = [], None
    for line in (ROOT / "docs" / "workshop.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None
        if cells and cells[0] == "clock":
            rows = []
            tables.append(rows)
        elif cells is None:
            rows = None
        elif rows is not None and not set(cells[0]) <= {"-", " "}:
            rows.append(cells)
    return tables


def test_reading_counts_prose_not_code_and_finds_long_sentences():
    text = (
        "A short one. Then " + " ".join(["word"] * 44) + ".\n\n```python\nx = 1\n```\n[a link](https://x.y)"
    )
    nb = {"cells": [{"cell_type": "markdown", "source": text}, {"cell_type": "code", "source": "y = 2\n\n"}]}
    assert reading.prose_words(nb) == 3 + 45 + 2  # the code block and the link's target are not prose
    assert [len(s.split()) for s in reading.long_sentences(nb)] == [45]
    assert reading.code_lines(nb) == 2  # one line in the code cell, one in the block
    est = reading.Estimate(words=1500, code=150, exercises=2, run_s=20)
    assert (est.reading, est.exercise_minutes, est.running, est.total) == (20, 20, 1, 45)
    assert est.line().startswith("*Time: about 45 minutes: 20 of reading")


def test_the_agenda_clock_runs_on_the_notebooks_times():
    text = (
        "Intro.\n\n| clock | notebook | time | in the room |\n| --- | --- | --- | --- |\n"
        "| 9:00 | launch; 00 introduction | 5 min | open |\n| 0:00 | break | 10 min | |\n"
        "| 0:00 | 01 claim race, 17 PostgreSQL | | race |\n| 0:00 | end | | |\n\nAfter."
    )
    minutes = {"00_introduction": 25, "01_claim_race": 40, "17_postgresql": 30}
    rows = [line for line in reading.rewrite_agenda(text, minutes).splitlines() if line[:2] == "| "]
    assert rows[2:] == [
        "| 9:00 | launch; 00 introduction | 25 min | open |",  # a notebook row takes the notebook's time
        "| 9:25 | break | 10 min |  |",  # any other row keeps its own
        "| 9:35 | 01 claim race, 17 PostgreSQL | 70 min | race |",  # two notebooks, names in any case
        "| 10:45 | end |  |  |",
    ]
    assert reading.rewrite_agenda(reading.rewrite_agenda(text, minutes), minutes) == reading.rewrite_agenda(
        text, minutes
    )
