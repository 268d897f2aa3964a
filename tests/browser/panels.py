"""What the browser tests of the notebooks share: running a notebook clean in JupyterLab, and
waiting for and reading what a widget panel shows."""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from browser_lab import BINDER_MEMORY, ROOT, WHOLE_SCREENSHOTS, LabServer

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# The notebooks from this number on are run by test_notebooks_10_to_17_in_browser.py: one file of
# all of them would take about as long as the rest of the suite, and pytest-xdist gives each file
# to one process, so the two halves run side by side, each in a JupyterLab of its own.
SECOND_HALF = "10"


def find_notebook(number: str) -> Path:
    found = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    assert found, f"notebooks/{number}_*.ipynb is missing"
    return found[0]


ANSWER_BLOCK = re.compile(r"<summary>Answer</summary>.*?```(python|sql)\n(.*?)```", re.S)


def exercises(notebook: Path) -> list[tuple[str, str]]:
    """Each "Your turn" of a notebook: its folded answer as code, and the checker call it answers
    (an answer in SQL is the text of the checker's first argument)."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    found, checker = [], None
    for cell in cells:
        source = "".join(cell["source"])
        if cell["cell_type"] == "code" and re.search(r"^nb\d\d\.check_", source, re.M):
            checker = source
        elif cell["cell_type"] == "markdown" and checker and (match := ANSWER_BLOCK.search(source)):
            language, answer = match.groups()
            if language == "sql":
                name = re.search(r"\.check_\w+\((\w+)", checker)[1]
                answer = f"{name} = {answer!r}"
            found.append((answer, checker))
            checker = None
    return found


def check_cell(notebook: Path) -> str:
    """The source of the notebook's Check: the first code cell after its last "## Check" heading."""
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    heading = max(
        i for i, c in enumerate(cells) if c["cell_type"] == "markdown" and "## Check" in "".join(c["source"])
    )
    return next("".join(c["source"]) for c in cells[heading + 1 :] if c["cell_type"] == "code")


def check_still_holds(page) -> str:
    """Run the notebook's Check again in its kernel, after a test used the panels as a learner
    does (the text invites it): it must hold, and say so. Returns what it printed."""
    said = page.execute(check_cell(page.notebook))
    assert "ERROR" not in said and re.search(r"\b(passed|held)\b", said), (
        f"{page.notebook.name}: the Check fails after the panels were used: {said!r}"
    )
    return said


def driven_later(request: pytest.FixtureRequest, number: str) -> bool:
    """Whether a test selected in this session drives notebook `number`'s widgets."""
    marks = (item.get_closest_marker("drives") for item in request.session.items)
    return any(mark is not None and mark.args[0] == number for mark in marks)


def committed_figures(notebook: Path) -> int:
    """How many code cells of the committed notebook show a figure (a PNG output)."""
    cells = json.loads(notebook.read_text())["cells"]
    return sum(
        any("image/png" in out.get("data", {}) for out in cell.get("outputs", []))
        for cell in cells
        if cell["cell_type"] == "code"
    )


def job_row(panel) -> dict[str, str]:
    """The job's row as a panel's table shows it, e.g. {state, attempts, worker, ...}."""
    heads = [h.strip() for h in panel.locator("table th").all_inner_texts()]
    cells = [c.strip() for c in panel.locator("table td").all_inner_texts()]
    assert heads and len(heads) == len(cells), f"no job row on the page: {heads} {cells}"
    return dict(zip(heads, cells, strict=True))


def wait_for(read: Callable[[], object], ok: Callable[[object], bool], what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = read()
        if ok(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: still {value!r} after {timeout:.0f} s")
        time.sleep(0.2)


_TABLE_JS = """
table => {
  const heads = [...table.querySelectorAll('thead th')].map(h => h.innerText.trim());
  return [...table.querySelectorAll('tbody tr')].map(tr => Object.fromEntries(
    [...tr.querySelectorAll('td')].map((td, i) => [heads[i], td.innerText.trim()])));
}"""


def table_rows(table) -> list[dict[str, str]]:
    return table.evaluate(_TABLE_JS)


def new_picture(image, before: str | None) -> str:
    """Wait until a widget's <img> shows a new picture (a new blob: URL) that has loaded."""
    src = wait_for(lambda: image.get_attribute("src"), lambda s: bool(s) and s != before, "a new picture")
    wait_for(lambda: image.evaluate("img => img.complete && img.naturalWidth"), bool, "the picture loading")
    return src


def finished(panel, pattern: str, what: str, timeout: float = 60.0) -> re.Match:
    """Wait for a button's work to end: the panel's text matches `pattern`, or its status line
    reports a failure ("failed: ...", as the panels show an exception)."""
    failure = re.compile(r"(?m)^failed: .*")
    text = wait_for(
        panel.inner_text,
        lambda t: re.search(pattern, t) is not None or failure.search(t) is not None,
        what,
        timeout=timeout,
    )
    assert not failure.search(text), f"{what}: {failure.search(text)[0]}"
    return re.search(pattern, text)


def run_clean(
    notebook: Path, open_notebook, ran_pages, lab_server: LabServer, request: pytest.FixtureRequest
) -> None:
    """Open `notebook`, run every cell from the Run menu, and check the page: no error output,
    every figure drawn, the memory peak within Binder's. The page stays open (in `ran_pages`)
    when a test selected in this run drives its widgets."""
    page = open_notebook(notebook)
    number = notebook.name[:2]
    try:
        lab_server.memory.reset()
        started = time.monotonic()
        try:
            state = page.run_all()
        except BaseException:
            with contextlib.suppress(Exception):  # a picture of the failure, if one can be taken
                page.screenshot(notebook.stem)
            raise
        seconds = time.monotonic() - started
        if WHOLE_SCREENSHOTS:
            page.screenshot(notebook.stem)
        problems = page.problems(state)
        assert problems == [], f"{notebook.name} in JupyterLab:\n" + "\n".join(problems)
        # every figure the committed notebook shows is drawn on the page too, as a picture
        drawn = sum(any(o["png"] and o["img"] for o in c["outputs"]) for c in state["cells"])
        assert drawn >= committed_figures(notebook), f"{notebook.name}: {drawn} figure(s) shown in JupyterLab"

        widgets = sum(o["widget"] and o["views"] > 0 for c in state["cells"] for o in c["outputs"])
        peak = lab_server.memory.peak
        print(
            f"{notebook.name}: {len(state['cells'])} code cells ran in {seconds:.1f} s, {widgets} widgets,"
            f" server+kernels+workers peak {peak / 2**20:.0f} MiB"
        )
        assert peak < BINDER_MEMORY, f"{notebook.name}: {peak / 2**20:.0f} MiB will not fit Binder's 2 GB"
        # After Run All, each exercise still checks: its folded answer, run in the same kernel, passes.
        for answer, checker in exercises(notebook):
            said = page.execute(answer + "\n" + checker)
            assert said.startswith("PASS"), f"{notebook.name}: after Run All the answer reads {said!r}"
    except BaseException:
        page.close()
        raise
    if driven_later(request, number) and number not in ran_pages:  # kept open for that test
        ran_pages[number] = page
    else:
        page.close()
