"""Part 2 of the course (13-17) as committed: what the text says about an output is what the
output shows, an output that states the schema matches today's schema, and every Check says
what it held."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PART2 = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.name >= "13")
BRIDGE = NOTEBOOKS / "13_your_queue_and_labqueue.ipynb"
NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _printed(cell: dict) -> str:
    return "".join(
        _text(out.get("text", "")) for out in cell.get("outputs", []) if out["output_type"] == "stream"
    )


def _schema_columns(tmp_path: Path) -> tuple[list[str], list[str]]:
    """The tutorial queue's columns, and the ones labqueue's table adds, from today's code."""
    from labqueue import JobQueue as Labqueue
    from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue

    yours = TutorialQueue(tmp_path / "yours.db")
    try:
        mine = [row[1] for row in yours.db.execute("PRAGMA table_info(jobs)")]
    finally:
        yours.db.close()
    with Labqueue(tmp_path / "labqueue.db", wake=False) as grown_up:
        theirs = [row[1] for row in grown_up.db.execute("PRAGMA table_info(jobs)")]
    return mine, [c for c in theirs if c not in mine]


def test_13s_committed_columns_are_todays_schema_and_the_text_names_them(tmp_path):
    cells = _cells(BRIDGE)
    (n,) = [
        i
        for i, c in enumerate(cells)
        if c["cell_type"] == "code" and "PRAGMA table_info" in _text(c["source"])
    ]
    printed = dict(line.split(":", 1) for line in _printed(cells[n]).strip().splitlines())
    yours, added = _schema_columns(tmp_path)
    shown_yours = [c.strip() for c in printed["your columns"].split(",")]
    shown_added = [c.strip() for c in printed["labqueue adds"].split(",")]
    assert shown_yours == yours, (
        f"13's committed output lists {shown_yours}; the tutorial's table has {yours}"
    )
    assert shown_added == added, (
        f"13's committed output says labqueue adds {shown_added}; today it adds {added}"
    )

    before, after = _text(cells[n - 1]["source"]), _text(cells[n + 1]["source"])
    for column in added:
        assert f"`{column}`" in after, f"13's text after the columns never names `{column}`"
    learned = next(_text(c["source"]) for c in cells if _text(c["source"]).startswith("## What you learned"))
    assert all(f"`{column}`" in learned for column in added), "What you learned lists other columns"
    for word in re.findall(r"\b(\w+) more\b", before + after):
        if word.lower() in NUMBER_WORDS:
            assert NUMBER_WORDS[word.lower()] == len(added), (
                f"13 says {word!r} more columns; it adds {len(added)}"
            )


@pytest.mark.parametrize("path", PART2, ids=lambda p: p.stem)
def test_every_part2_check_says_what_it_held(path):
    cells = _cells(path)
    heading = max(
        i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "## Check" in _text(c["source"])
    )
    check = next(c for c in cells[heading + 1 :] if c["cell_type"] == "code")
    assert _printed(check).strip(), f"{path.name}: the Check cell prints nothing: say what it held"
