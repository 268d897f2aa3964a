"""The course as a learner reads it: objectives on top that the end answers, a time that follows from
what the notebook holds, prose within its budget in sentences one can follow, every word of the
glossary defined where the course first uses it, no quotation read twice, and a place to ask."""

from __future__ import annotations

import json
import re
from itertools import pairwise
from pathlib import Path

import pytest

from labqueue.lab import reading

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]
GLOSSARY = ROOT / "docs" / "glossary.md"

# Notebooks allowed more prose than reading.WORD_BUDGET, with their own cap and the reason why it
# needs more ("notebook": (cap, "why")). A cap only comes down: shortening a notebook lowers it, and
# one within budget leaves the list. Every notebook is within budget today.
OVER_BUDGET: dict[str, tuple[int, str]] = {}


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    return "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]


def _markdown(nb: dict) -> list[str]:
    return [_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_prose_is_within_the_word_budget(path):
    words = reading.prose_words(_load(path))
    cap, why = OVER_BUDGET.get(path.stem, (reading.WORD_BUDGET, ""))
    assert words <= cap, f"{path.name}: {words} words of prose, over the budget of {cap}"
    if why:
        assert words > reading.WORD_BUDGET, f"{path.name} is within budget now: drop it from OVER_BUDGET"
        assert words == cap, f"{path.name} has {words} words now: lower its cap in OVER_BUDGET"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_sentence_runs_over_forty_words(path):
    long = reading.long_sentences(_load(path))
    assert not long, f"{path.name}: sentences over {reading.LONGEST_SENTENCE} words: {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_the_stated_time_follows_from_the_notebook(path):
    nb = _load(path)
    expected = reading.estimate(nb).line()
    assert reading.stated_line(nb) == expected, (
        f"{path.name} states {reading.stated_line(nb)!r}; from its words, code, exercises and run it takes "
        f"{expected!r} (python -m labqueue.lab.reading --write rewrites it)"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_objectives_on_top_and_one_summary_at_the_end(path):
    cells = _markdown(_load(path))
    top = cells[0]
    assert "\nYou will:\n" in top, f"{path.name}: no 'You will:' objectives under the title"
    points = re.findall(r"^- ", top.split("\nYou will:\n", 1)[1], re.M)
    assert 2 <= len(points) <= 4, f"{path.name}: {len(points)} objectives; two to four say what it is for"
    summaries = [c for c in cells if re.match(r"#+ (What you learned|Summary|Recap|In short)\b", c)]
    assert len(summaries) == 1 and summaries[0].startswith("## What you learned"), (
        f"{path.name}: one summary, 'What you learned', not {[s.splitlines()[0] for s in summaries]}"
    )


NOTEBOOK_LINK = re.compile(r"\[[^\]]*\]\([^)]*\.ipynb\)")


def _terms() -> list[tuple[str, str]]:
    return [
        (line[3:].strip(), line[3:].strip().lower().replace(" ", "-"))
        for line in GLOSSARY.read_text(encoding="utf-8").splitlines()
        if line.startswith("## ")
    ]


def _mentions(term: str) -> re.Pattern[str]:
    words = r"[\s-]+".join(re.escape(w) for w in re.split(r"[\s-]+", term))
    return re.compile(rf"(?<![\w`]){words}(s|es)?(?![\w`])", re.I)


@pytest.mark.parametrize("term, anchor", _terms(), ids=[t for t, _ in _terms()])
def test_each_glossary_word_is_linked_where_the_course_first_uses_it(term, anchor):
    """Read in order, the first cell that uses a word of the glossary links to its entry (the
    objectives under a title only preview the words; the text that teaches them links)."""
    mentions = _mentions(term)
    for path in NOTEBOOKS:
        for text in _markdown(_load(path))[1:]:
            # A link to a notebook names that notebook ("05 · Effect in the transaction"); it is not a use.
            if mentions.search(reading.prose(NOTEBOOK_LINK.sub(" ", text))):
                assert f"glossary.md#{anchor})" in text, (
                    f"{path.name} first uses {term!r} without a link to the glossary: {text[:120]!r}"
                )
                return


def test_every_glossary_link_names_an_entry():
    anchors = {a for _, a in _terms()}
    for path in NOTEBOOKS:
        for text in _markdown(_load(path)):
            for anchor in re.findall(r"glossary\.md#([\w-]+)\)", text):
                assert anchor in anchors, f"{path.name} links to glossary#{anchor}, which has no entry"


def test_no_quotation_is_read_twice():
    """A quoted source is quoted once in the course; later notebooks point back to it."""
    seen: dict[str, str] = {}
    for path in NOTEBOOKS:
        for text in _markdown(_load(path)):
            quoted = re.findall(r"^> (.{40,}?)$", text, re.M) + re.findall(
                r'"([^"]{40,}?)"', " ".join(text.split())
            )
            for quote in quoted:
                key = " ".join(quote.strip('"').split())[:60]
                assert key not in seen or seen[key] == path.name, (
                    f"{path.name} repeats a quotation from {seen.get(key)}: {key!r}"
                )
                seen.setdefault(key, path.name)


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


def test_the_workshop_agenda_gives_each_notebook_its_stated_time():
    """The teacher's clock runs on the notebooks' own times: each row's minutes are the stated
    times of the notebooks it names, and the next row starts when they are up."""
    tables = _agenda_rows()
    assert len(tables) >= 2, "an agenda for Part 1 and one for Part 2"
    named: set[Path] = set()
    for rows in tables:
        for row, following in pairwise(rows):
            clock, what, minutes = row[0], row[1], row[2]
            hours, mins = map(int, clock.split(":"))
            next_hours, next_mins = map(int, following[0].split(":"))
            took = int(minutes.removesuffix(" min"))
            assert (next_hours * 60 + next_mins) - (hours * 60 + mins) == took, row
            stems = [p for p in NOTEBOOKS if p.stem in reading.agenda_notebooks(what, IDS)]
            if stems:
                named |= set(stems)
                assert took == sum(_minutes(p) for p in stems), (
                    f"{what}: {took} min, stated {[_minutes(p) for p in stems]}"
                )
    assert named == set(NOTEBOOKS), f"the agendas leave out {sorted(p.stem for p in set(NOTEBOOKS) - named)}"


def _plan(title: str) -> list[list[str]]:
    """The rows of the agenda table under the heading that starts with `title`."""
    text = (ROOT / "docs" / "workshop.md").read_text(encoding="utf-8")
    section = text.split(f"\n### {title}", 1)[1].split("\n#", 1)[0]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in section.splitlines()]
    return [r for r in rows if len(r) > 2 and r[0][:1].isdigit()]


@pytest.mark.parametrize(("title", "low", "high"), [("One day", 330, 390), ("Half a day", 150, 210)])
def test_a_plan_adds_up_to_its_length_with_breaks_apart(title, low, high):
    rows = _plan(title)
    pauses = {"break", "lunch"}
    teaching = sum(int(r[2].removesuffix(" min")) for r in rows if r[2] and r[1] not in pauses)
    assert low <= teaching <= high, f"{title}: {teaching} minutes of teaching"
    if title == "One day":
        assert [r[1] for r in rows].count("lunch") == 1 and [r[1] for r in rows].count("break") >= 2


def test_the_agenda_is_as_the_reading_measure_writes_it():
    text = (ROOT / "docs" / "workshop.md").read_text(encoding="utf-8")
    minutes = {p.stem: _minutes(p) for p in NOTEBOOKS}
    assert reading.rewrite_agenda(text, minutes) == text, "run python -m labqueue.lab.reading --write"


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


def test_the_time_counts_each_break_it_and_panel():
    est = reading.Estimate(words=1500, code=150, exercises=1, run_s=20, break_its=1, panels=2)
    assert (est.hands_on, est.total) == (reading.MINUTES_PER_BREAK_IT + 2 * reading.MINUTES_PER_PANEL, 45)
    assert est.line() == (
        "*Time: about 45 minutes: 20 of reading the text and code, under a minute of running, "
        "10 for the exercise, and 11 for the break-it and the two panels.*"
    )
    panel = {"data": {"text/plain": reading.PANEL_TEXT}}
    progress = {"data": {"text/plain": "runs: 100% 21/21"}}
    nb = {
        "cells": [
            {"cell_type": "markdown", "source": "## Break it on purpose\n\nDelete the token."},
            {"cell_type": "code", "source": "panel()", "outputs": [panel]},
            {"cell_type": "code", "source": "run()", "outputs": [progress]},
        ]
    }
    assert (reading.break_its(nb), reading.panels(nb)) == (1, 1)


@pytest.mark.parametrize("path", reading.TOTALS_IN, ids=lambda p: p.name)
def test_the_totals_per_part_add_up_the_notebooks_times(path):
    said = [m.group(0) for m in reading.TOTALS.finditer(path.read_text(encoding="utf-8"))]
    phrase = reading.totals_phrase(reading.course_minutes())
    assert said == [phrase], f"{path.name}: {said}, not {phrase!r} (python -m labqueue.lab.reading --write)"
