"""Part 1 of the course builds the tutorial's queue: what its notebooks show is Part 1's
queue, and every function a notebook displays is short and holds what the text before it
names. (Part 2 and the bridge notebook, 13, meet the production package.)"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
PART1 = sorted(p for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb") if p.name < "13")
# 00_introduction maps the whole course, Part 2 included; the others keep to Part 1.
PART1_STEPS = [p for p in PART1 if p.name != "00_introduction.ipynb"]

# Part 2's features, as a learner would meet their names.
PART2_WORDS = re.compile(
    r"\bpriorit(y|ies)\b|\bnamed queues?\b|\bcancel(s|led|ling|lation)?\b|\bpaused?\b.{0,20}\bqueue"
    r"|\bq\.pause\b|\bwake-?up hints?\b|\bwaking\b|\bgroup commit\b|\bqueue=",
    re.IGNORECASE,
)
BACKTICKED = re.compile(r"`([^`\n]+)`")
NAME = re.compile(r"[A-Za-z_][\w.]*(\(\))?")


def cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def everything_shown(cell: dict) -> str:
    """A cell's source and every text its outputs show."""
    shown = [text(cell["source"])]
    for out in cell.get("outputs", []):
        shown.append(text(out.get("text", "")))
        shown += [text(v) for k, v in out.get("data", {}).items() if k in ("text/plain", "text/markdown")]
    return "\n".join(shown)


@pytest.mark.parametrize("path", PART1_STEPS, ids=[p.stem for p in PART1_STEPS])
def test_part1_shows_part1s_queue(path):
    found = {
        n: sorted({m.group(0) for m in PART2_WORDS.finditer(everything_shown(cell))})
        for n, cell in enumerate(cells(path))
    }
    assert {n: words for n, words in found.items() if words} == {}, (
        f"{path.name} names Part 2's features (cell: words)"
    )


def shown_functions(path: Path) -> list[tuple[int, str, str]]:
    """(cell number, the markdown just before it, the source it displayed) for every
    show_source cell, read from the committed outputs."""
    found, before = [], ""
    for n, cell in enumerate(cells(path)):
        if cell["cell_type"] == "markdown":
            before = text(cell["source"])
        elif "show_source(" in text(cell["source"]) and not text(cell["source"]).lstrip().startswith(
            ("from ", "import ")
        ):
            for out in cell.get("outputs", []):
                if "text/plain" in out.get("data", {}):
                    found.append((n, before, text(out["data"]["text/plain"])))
    return found


@pytest.mark.parametrize("path", PART1, ids=[p.stem for p in PART1])
def test_every_shown_function_is_short_and_holds_what_the_text_names(path):
    problems = []
    for n, before, source in shown_functions(path):
        lines = source.count("\n") + 1
        if lines > 60:
            problems.append(f"cell {n}: {lines} lines")
        for token in BACKTICKED.findall(before):
            if NAME.fullmatch(token):
                name = token.removesuffix("()").rsplit(".", 1)[-1]
                if not re.search(rf"\b{re.escape(name)}\b", source):
                    problems.append(f"cell {n}: the text names `{token}`, the code shown has no {name}")
    assert problems == [], f"{path.name}: {problems}"
