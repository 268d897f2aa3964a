"""The notebooks as they are committed, that is, as GitHub, nbviewer and a fresh clone show them:
every figure drawn, every panel readable, every notebook with its Check, its links, and (from
01 on) an exercise with a hint and an answer."""

from __future__ import annotations

import base64
import json
import re
import struct
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
IDS = [p.stem for p in NOTEBOOKS]

# A cell draws a figure when it calls a plot helper (plot_*, draw_*, diagram, *_figure)
# or matplotlib directly; a call inside show_source(...) only names the function.
DRAWS = re.compile(r"\b(plot_\w*|draw_\w*|diagram|\w*_figure|plt\.\w+)\s*\(")
RAW_WIDGET = re.compile(r"^\s*\w*(Box|Tab|Accordion)\(children=")
WIDTH_PX = (560, 700)  # the course's figure is 640 px wide (labqueue.lab.assets.FIGSIZE at DPI)


def _load(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _text(value) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def _images(cell: dict) -> list[bytes]:
    return [
        base64.b64decode(_text(out["data"]["image/png"]))
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]


def _markdown(nb: dict) -> str:
    return "\n".join(_source(c) for c in nb["cells"] if c["cell_type"] == "markdown")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_cell_that_draws_a_figure_shows_it(path):
    missing = []
    for n, cell in enumerate(_load(path)["cells"]):
        if cell["cell_type"] != "code":
            continue
        code = re.sub(r"show_source\([^)]*\)", "", _source(cell))
        if DRAWS.search(code) and not _images(cell):
            missing.append(f"cell {n}: {code.strip().splitlines()[0]}")
    assert not missing, f"{path.name}: cells that draw a figure but show none: {missing}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_figure_has_the_course_width(path):
    widths = [struct.unpack(">I", png[16:20])[0] for cell in _load(path)["cells"] for png in _images(cell)]
    odd = [w for w in widths if not WIDTH_PX[0] <= w <= WIDTH_PX[1]]
    assert not odd, f"{path.name}: figures {odd} px wide; the course's figure is 640 px (assets.new_figure)"


SAVED_CHART = re.compile(r"<img style='max-width:100%' alt='([^']*)' src='data:image/png;base64,([^']+)'>")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_saved_panel_chart_is_described_by_what_it_plots(path):
    """A saved panel's chart has the figure's own description as its alt text, which the site
    shows; the generic text only where the PNG says nothing (drawn before figure_png said so).
    Part 1's notebooks, executed with today's figure_png, have no generic one left."""
    import html

    from labqueue.lab.assets import png_description
    from labqueue.lab.execute import PANEL_CHART

    charts = [
        (html.unescape(alt), png_description(base64.b64decode(data)))
        for cell in _load(path)["cells"]
        for out in cell.get("outputs", [])
        for alt, data in SAVED_CHART.findall(_text(out.get("data", {}).get("text/html", "")))
    ]
    assert all(alt == (said or PANEL_CHART) for alt, said in charts), charts
    if path.name < "13":
        assert all(said for _, said in charts), f"{path.name}: re-execute it (tasks.py execute)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_no_committed_panel_shows_its_raw_repr(path):
    raw = [
        _text(out["data"]["text/plain"])[:60]
        for cell in _load(path)["cells"]
        for out in cell.get("outputs", [])
        if RAW_WIDGET.match(_text(out.get("data", {}).get("text/plain", "")))
    ]
    assert not raw, f"{path.name}: widget outputs committed as raw text: {raw} (run labqueue.lab.execute)"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_has_a_check_cell_with_asserts(path):
    cells = _load(path)["cells"]
    headings = [n for n, c in enumerate(cells) if c["cell_type"] == "markdown" and "## Check" in _source(c)]
    assert headings, f"{path.name} has no '## Check' section"
    after = cells[headings[-1] + 1 :]
    code = next((c for c in after if c["cell_type"] == "code"), None)
    assert code is not None and re.search(r"^\s*assert\b", _source(code), re.M), (
        f"{path.name}: the cell after '## Check' states nothing with assert"
    )


@pytest.mark.parametrize("n", range(len(NOTEBOOKS)), ids=IDS)
def test_every_notebook_links_to_the_previous_and_the_next(n):
    text = _markdown(_load(NOTEBOOKS[n]))
    if n > 0:
        previous = NOTEBOOKS[n - 1].name
        assert f"]({previous})" in text, f"{NOTEBOOKS[n].name} has no link back to {previous}"
    if n + 1 < len(NOTEBOOKS):
        following = NOTEBOOKS[n + 1].name
        assert f"]({following})" in text, f"{NOTEBOOKS[n].name} has no link on to {following}"


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if int(p.name[:2]) >= 1], ids=lambda p: p.stem)
def test_every_step_has_an_exercise_with_a_hint_an_answer_and_a_checker(path):
    cells = _load(path)["cells"]
    text = _markdown(_load(path))
    assert "## Your turn" in text, f"{path.name} has no '## Your turn' exercise"
    assert "<summary>Hint</summary>" in text, f"{path.name}: the exercise has no folded hint"
    assert "<summary>Answer</summary>" in text, f"{path.name}: the exercise has no folded answer"
    verdicts = [
        out
        for c in cells
        if c["cell_type"] == "code" and "exercises" in _source(c)
        for out in c.get("outputs", [])
        if re.search(r"\b(PASS|NOT YET|YOUR TURN)\b", _text(out.get("data", {}).get("text/html", "")))
    ]
    assert verdicts, f"{path.name}: no committed checker verdict under the exercise"
    shown = " ".join(_text(out.get("data", {}).get("text/html", "")) for out in verdicts)
    assert "NOT YET" not in shown, f"{path.name}: after Run All an untried exercise reads as a failure"
    assert not [out for c in cells for out in c.get("outputs", []) if out.get("output_type") == "error"], (
        f"{path.name} was committed with an error output"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_ends_by_saying_how_to_free_its_kernel(path):
    """Binder gives a session 2 GB and each open kernel holds 100-150 MB: the last cell of
    every notebook tells the learner how to shut its kernel down."""
    last = _load(path)["cells"][-1]
    assert last["cell_type"] == "markdown" and "Shut Down Kernel" in "".join(last["source"]), (
        f"{path.name} does not end by saying how to shut its kernel down"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=IDS)
def test_every_notebook_gives_its_time_what_you_learned_and_glossary_links(path):
    nb = _load(path)
    first = _source(nb["cells"][0])
    assert re.search(r"\*Time: about \d+ minutes", first), f"{path.name}: no time estimate under the title"
    learned = [c for c in nb["cells"] if _source(c).startswith("## What you learned")]
    assert learned, f"{path.name}: no 'What you learned' at the end"
    glossary = (Path(__file__).resolve().parents[1] / "docs" / "glossary.md").read_text(encoding="utf-8")
    anchors = {
        line[3:].strip().lower().replace(" ", "-") for line in glossary.splitlines() if line.startswith("## ")
    }
    linked = re.findall(r"\]\(\.\./docs/glossary\.md#([\w-]+)\)", _source(learned[0]))
    assert linked and set(linked) <= anchors, (
        f"{path.name}: glossary links {linked} (known: {sorted(anchors)})"
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_nbvals_markers_are_cell_tags_not_comments_in_sight(path):
    """A learner never reads test machinery: a cell whose output nbval compares says so in its
    tags (nbval reads both), not in a comment on its first line."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        source = "".join(cell["source"])
        assert not re.search(r"^\s*#\s*(NBVAL|PYTEST_VALIDATE)_", source, re.M), source[:80]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_check_heading_says_which_claims_it_checks(path):
    """The learner reads, before the asserts, what they hold the notebook to."""
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"]).strip()
        if cell["cell_type"] == "markdown" and text.startswith("## Check"):
            assert len(text.removeprefix("## Check").strip()) > 40, f"{path.name}: a bare Check heading"
