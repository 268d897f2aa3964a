"""A notebook as a learner reads it: its prose, its long sentences, and an honest time.

    python -m labqueue.lab.reading              # each notebook's words, sentences and time
    python -m labqueue.lab.reading --write      # rewrite each notebook's time line, the agenda and the
                                                # totals per part (notebook 00, README) to match

The time under each title comes from what the notebook holds, not from a guess: its prose at a
technical reading pace, the code it shows at a slower one, a fixed allowance per exercise, per
break-it and per panel, and its measured run (the committed execution's timestamps). A test holds
every notebook to it, so shorter prose shortens the stated time and longer prose lengthens it.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
AGENDA = ROOT / "docs" / "workshop.md"

# Technical prose read for the first time, and code read closely enough to follow it.
PROSE_WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 15
MINUTES_PER_EXERCISE = 10
# Breaking a saved cell on purpose, running what follows and going back; playing with a panel.
# Tried as a learner in JupyterLab: 03 and 12 (one of each) took about 32 and 34 minutes, 25 without them.
MINUTES_PER_BREAK_IT = 5
MINUTES_PER_PANEL = 3
BREAK_IT = re.compile(r"^#+ Break it on purpose", re.M)
PANEL_TEXT = "[Interactive panel: run this notebook in JupyterLab to use it]"  # execute.PANEL_TEXT
# The prose budget of one notebook; longer ones say why in tests/test_course_reading.py.
WORD_BUDGET = 1500
LONGEST_SENTENCE = 40  # words

FENCED = re.compile(r"```.*?```", re.S)
DETAILS_SUMMARY = re.compile(r"<summary>.*?</summary>", re.S)
TAG = re.compile(r"<[^>]+>")
LINK = re.compile(r"\[([^\]]*)\]\([^)]*\)")
# A checker call in an exercise cell: nb04.check_compare_and_swap(...)
CHECKER = re.compile(r"\bnb\d\d\.check_\w+\(")
TIME_LINE = re.compile(r"\*Time: [^*]*\*")
# A sentence ends at . ! or ? (a closing quote or bracket may follow) before a capital or a quote.
SENTENCE_END = re.compile(r"(?:(?<=[.!?])|(?<=[.!?][\"')]))\s+(?=[A-Z(*`\"'])")


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def prose(text: str) -> str:
    """The words of a markdown cell a learner reads: no code blocks, tags or link targets."""
    text = FENCED.sub(" ", text)
    text = DETAILS_SUMMARY.sub(" ", text)
    text = LINK.sub(r"\1", text)
    return TAG.sub(" ", text)


def markdown_cells(nb: dict) -> list[str]:
    return [_source(c) for c in nb["cells"] if c["cell_type"] == "markdown"]


def prose_words(nb: dict) -> int:
    return sum(len(prose(text).split()) for text in markdown_cells(nb))


def sentences(text: str) -> list[str]:
    """The sentences of one markdown cell's prose; list items, table rows and headings apart."""
    found = []
    for block in re.split(r"\n\s*\n|\n(?=\s*(?:[-*] |\d+\. |#|\|))", prose(text)):
        if block.lstrip().startswith("|"):
            continue  # a table row is not a sentence
        flat = " ".join(block.split())
        # A full stop ends a sentence unless it sits inside a number, a name (e.g.) or a path.
        found += [s for s in SENTENCE_END.split(flat) if s.strip()]
    return found


def long_sentences(nb: dict, longest: int = LONGEST_SENTENCE) -> list[str]:
    return [s for text in markdown_cells(nb) for s in sentences(text) if len(s.split()) > longest]


def code_lines(nb: dict) -> int:
    """Non-blank lines of code a learner reads: the code cells and the code blocks in the text."""
    cells = sum(
        1 for c in nb["cells"] if c["cell_type"] == "code" for line in _source(c).splitlines() if line.strip()
    )
    blocks = sum(len(b.splitlines()) - 2 for text in markdown_cells(nb) for b in FENCED.findall(text))
    return cells + blocks


def exercises(nb: dict) -> int:
    return sum(len(CHECKER.findall(_source(c))) for c in nb["cells"] if c["cell_type"] == "code")


def break_its(nb: dict) -> int:
    return sum(len(BREAK_IT.findall(text)) for text in markdown_cells(nb))


def panels(nb: dict) -> int:
    """The panels a learner can drive: widget outputs saved as panels (not progress bars)."""
    return sum(
        1
        for cell in nb["cells"]
        for out in cell.get("outputs", [])
        if "".join(out.get("data", {}).get("text/plain", "")) == PANEL_TEXT
    )


def run_seconds(nb: dict) -> float:
    """How long the committed run took, from its cells' execution timestamps."""
    stamps = []
    for cell in nb["cells"]:
        times = cell.get("metadata", {}).get("execution", {})
        stamps += [
            datetime.fromisoformat(v.rstrip("Z"))
            for k, v in times.items()
            if k.startswith(("iopub", "shell"))
        ]
    return (max(stamps) - min(stamps)).total_seconds() if stamps else 0.0


@dataclass(frozen=True)
class Estimate:
    """A notebook's time for a first-time learner, in whole minutes."""

    words: int
    code: int
    exercises: int
    run_s: float
    break_its: int = 0
    panels: int = 0

    @property
    def reading(self) -> int:
        return max(1, math.ceil(self.words / PROSE_WORDS_PER_MINUTE + self.code / CODE_LINES_PER_MINUTE))

    @property
    def exercise_minutes(self) -> int:
        return self.exercises * MINUTES_PER_EXERCISE

    @property
    def running(self) -> int:
        return math.ceil(self.run_s / 60)

    @property
    def hands_on(self) -> int:
        """Minutes for the break-its and the panels."""
        return self.break_its * MINUTES_PER_BREAK_IT + self.panels * MINUTES_PER_PANEL

    @property
    def total(self) -> int:
        """Reading, exercises, running, break-its and panels, rounded up to five minutes."""
        return 5 * math.ceil((self.reading + self.exercise_minutes + self.running + self.hands_on) / 5)

    def line(self) -> str:
        """The time line under the notebook's title."""
        run = "under a minute" if self.running <= 1 else f"about {self.running} minutes"
        parts = [f"{self.reading} of reading the text and code", f"{run} of running"]
        if self.exercises:
            what = "the exercise" if self.exercises == 1 else f"the {_count(self.exercises)} exercises"
            parts.append(f"{self.exercise_minutes} for {what}")
        tried = [_things(self.break_its, "break-it"), _things(self.panels, "panel")]
        if self.hands_on:
            parts.append(f"{self.hands_on} for {' and '.join(t for t in tried if t)}")
        return f"*Time: about {self.total} minutes: {', '.join(parts[:-1])}, and {parts[-1]}.*"


def _things(n: int, what: str) -> str:
    return "" if not n else f"the {what}" if n == 1 else f"the {_count(n)} {what}s"


def _count(n: int) -> str:
    return {2: "two", 3: "three", 4: "four"}.get(n, str(n))


def estimate(nb: dict) -> Estimate:
    return Estimate(
        prose_words(nb), code_lines(nb), exercises(nb), run_seconds(nb), break_its(nb), panels(nb)
    )


def stated_line(nb: dict) -> str | None:
    found = TIME_LINE.search(_source(nb["cells"][0]))
    return found[0] if found else None


def write_time_line(path: Path) -> bool:
    """Set the notebook's time line to its estimate; True when it changed. Only that line moves:
    the file is edited as text so every other byte stays as committed."""
    text = path.read_text(encoding="utf-8")
    nb = json.loads(text)
    old, new = stated_line(nb), estimate(nb).line()
    if old is None:
        raise ValueError(f"{path.name}: no '*Time: ...*' line under the title")
    if old == new:
        return False
    encoded_old, encoded_new = json.dumps(old)[1:-1], json.dumps(new)[1:-1]
    if text.count(encoded_old) != 1:
        raise ValueError(f"{path.name}: the time line is not once in the file")
    path.write_text(text.replace(encoded_old, encoded_new), encoding="utf-8")
    return True


# A notebook named in an agenda row: "02 leases", "13 your queue and labqueue".
NAMED = re.compile(r"\b(\d\d) (\w+)")


def _cells(line: str) -> list[str] | None:
    return [c.strip() for c in line.strip().strip("|").split("|")] if line.startswith("|") else None


def agenda_notebooks(what: str, stems: Sequence[str]) -> list[str]:
    """The notebooks an agenda row names, by number and first word."""
    return [
        stem
        for number, word in NAMED.findall(what)
        for stem in stems
        if stem.lower().startswith(f"{number}_{word.lower()}")
    ]


def rewrite_agenda(text: str, minutes: dict[str, int]) -> str:
    """docs/workshop.md with each agenda table's clock running on the notebooks' stated times.

    An agenda table is one whose header starts with `clock`; its third column holds a row's minutes.
    A row naming notebooks takes the sum of their times; any other row (a break, lunch) keeps its own.
    Each clock is the one before plus that row's minutes, from the table's first clock on."""
    out, clock = [], None
    in_table = False
    for line in text.split("\n"):
        cells = _cells(line)
        if cells and cells[0] == "clock":
            in_table, clock = True, None
        elif cells is None:
            in_table = False
        elif in_table and not set(cells[0]) <= {"-", " "}:
            if clock is None:
                hours, mins = map(int, cells[0].split(":"))
                clock = hours * 60 + mins
            cells[0] = f"{clock // 60}:{clock % 60:02d}"
            named = agenda_notebooks(cells[1], list(minutes))
            if named:
                cells[2] = f"{sum(minutes[s] for s in named)} min"
            if cells[2]:
                clock += int(cells[2].removesuffix(" min"))
            line = "| " + " | ".join(cells) + " |"
        out.append(line)
    return "\n".join(out)


def write_agenda(path: Path = AGENDA) -> bool:
    """Set the workshop agenda's clock to every notebook's stated time; True when it changed."""
    text = path.read_text(encoding="utf-8")
    new = rewrite_agenda(text, course_minutes())
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


# The course's length per part, in notebook 00 and the README: "Part 1 takes about 8 h 45 min and
# Part 2 about 2 h 45 min", the notebooks' stated times added up.
TOTALS = re.compile(r"Part 1 takes about \d+ h \d+ min and Part 2 about \d+ h \d+ min")
TOTALS_IN = (NOTEBOOKS / "00_introduction.ipynb", ROOT / "README.md")


def totals_phrase(minutes: dict[str, int]) -> str:
    """Each part's time, from each notebook's (by stem): Part 1 is 00-12, Part 2 13 on."""
    part1 = sum(m for stem, m in minutes.items() if stem < "13")
    part2 = sum(m for stem, m in minutes.items() if stem >= "13")
    return f"Part 1 takes about {_hours(part1)} and Part 2 about {_hours(part2)}"


def _hours(minutes: int) -> str:
    return f"{minutes // 60} h {minutes % 60} min"


def course_minutes() -> dict[str, int]:
    return {
        p.stem: estimate(json.loads(p.read_text(encoding="utf-8"))).total
        for p in sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    }


def write_totals() -> list[Path]:
    """Set the per-part totals in notebook 00 and the README; the files changed."""
    phrase, changed = totals_phrase(course_minutes()), []
    for path in TOTALS_IN:
        text = path.read_text(encoding="utf-8")
        new = TOTALS.sub(phrase, text)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m labqueue.lab.reading", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--write",
        action="store_true",
        help="rewrite each notebook's time line to its estimate, and the workshop agenda's clock",
    )
    parser.add_argument("notebooks", nargs="*", type=Path, help="default: every notebook of the course")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    for path in paths:
        nb = json.loads(path.read_text(encoding="utf-8"))
        est = estimate(nb)
        changed = write_time_line(path) if args.write else False
        print(
            f"{path.stem:32} {est.words:5} words{' (over budget)' if est.words > WORD_BUDGET else '':14} "
            f"{len(long_sentences(nb)):3} long sentences  {est.code:4} code lines  {est.exercises} exercises "
            f"run {est.run_s:5.1f} s  -> {est.total:3} min{'  (time line rewritten)' if changed else ''}"
        )
    if args.write and write_agenda():
        print(f"{AGENDA.relative_to(ROOT)}: the agenda's clock rewritten")
    for path in write_totals() if args.write else []:
        print(f"{path.relative_to(ROOT)}: the totals per part rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
