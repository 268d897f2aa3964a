"""Every notebook in real JupyterLab, in headless Chromium, run and then used as a learner uses it.

nbval runs the notebooks' code, but never renders a widget or clicks one. Here each notebook is
opened in JupyterLab, its saved outputs cleared, all cells run from the Run menu, and the page
checked for error outputs, kernel errors (widget callbacks included), cells that did not run and
widgets that did not render. Then the widgets are used: the lease playground (02), the crash lab
(03) and the claim race's size slider and Run button (01). Screenshots of every page go to
screenshots/browser/ (git-ignored).
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browser_lab import BINDER_MEMORY, ROOT, LabServer, LabWindow, NotebookPage

pytestmark = [pytest.mark.browser, pytest.mark.slow]

NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# Notebooks whose widgets a test drives after the run: their page is kept open for it.
DRIVEN = {"01", "02", "03"}


def find_notebook(number: str) -> Path:
    found = sorted((ROOT / "notebooks").glob(f"{number}_*.ipynb"))
    assert found, f"notebooks/{number}_*.ipynb is missing"
    return found[0]


@pytest.fixture(scope="session")
def ran_pages(lab_window: LabWindow) -> Iterator[dict[str, NotebookPage]]:
    """Pages already run by test_notebook_runs_clean, kept for the tests that drive widgets."""
    pages: dict[str, NotebookPage] = {}
    yield pages
    for page in pages.values():
        page.close()


@pytest.fixture
def open_notebook(lab_window: LabWindow) -> Callable[[Path], NotebookPage]:
    def opener(notebook: Path, window: LabWindow = lab_window) -> NotebookPage:
        page = NotebookPage(window, notebook)
        try:
            page.open()
        except BaseException:
            page.close()
            raise
        return page

    return opener


@pytest.fixture
def ran_notebook(open_notebook, ran_pages) -> Callable[[str], NotebookPage]:
    """The notebook numbered `number`, opened and run clean (reusing an earlier run's page)."""

    def get(number: str) -> NotebookPage:
        if number not in ran_pages:
            page = open_notebook(find_notebook(number))
            ran_pages[number] = page
            state = page.run_all()
            assert page.problems(state) == []
        return ran_pages[number]

    return get


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[nb.stem for nb in NOTEBOOKS])
def test_notebook_runs_clean(notebook: Path, open_notebook, ran_pages, lab_server: LabServer) -> None:
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
        page.screenshot(notebook.stem)
        problems = page.problems(state)
        assert problems == [], f"{notebook.name} in JupyterLab:\n" + "\n".join(problems)
        widgets = sum(o["widget"] and o["views"] > 0 for c in state["cells"] for o in c["outputs"])
        peak = lab_server.memory.peak
        print(
            f"{notebook.name}: {len(state['cells'])} code cells ran in {seconds:.1f} s, {widgets} widgets,"
            f" server+kernels+workers peak {peak / 2**20:.0f} MiB"
        )
        assert peak < BINDER_MEMORY, f"{notebook.name}: {peak / 2**20:.0f} MiB will not fit Binder's 2 GB"
    except BaseException:
        page.close()
        raise
    if number in DRIVEN and number not in ran_pages:
        ran_pages[number] = page
    else:
        page.close()


# --- 02: the lease playground -------------------------------------------------------------


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


def test_lease_playground_row_changes_hands(ran_notebook) -> None:
    page = ran_notebook("02")
    panel = page.panel_of("worker-a claims")
    panel.scroll_into_view_if_needed()
    before = job_row(panel)
    assert before["state"] == "queued", before

    page.button("worker-a claims").click()
    held = wait_for(lambda: job_row(panel), lambda r: r["worker"] == "worker-a", "worker-a's claim")
    assert held["state"] == "running"

    page.button("worker-b claims").click()  # too early: the lease still hides the job
    wait_for(panel.inner_text, lambda t: "worker-b claims: []" in t, "worker-b's early claim")
    assert job_row(panel)["worker"] == "worker-a"

    for _ in range(10):  # move the clock until the lease has run out
        if "claimable: yes" in panel.inner_text():
            break
        page.button("+10 s").click()
        time.sleep(0.3)
    wait_for(panel.inner_text, lambda t: "claimable: yes" in t, "the lease running out")

    page.button("worker-b claims").click()
    taken = wait_for(lambda: job_row(panel), lambda r: r["worker"] == "worker-b", "worker-b's claim")
    assert taken["state"] == "running"
    assert taken["token"] != held["token"], ("a takeover gets a new fencing token", held, taken)
    assert int(taken["attempts"]) == int(held["attempts"]) + 1, (held, taken)
    print(f"02 lease playground: row {before} -> {held} -> {taken}")
    page.screenshot("02_leases-after-takeover", whole=False)
    assert page.problems() == []


# --- 03: start a worker, kill it, watch the takeover ---------------------------------------


def test_crash_lab_shows_the_takeover(ran_notebook) -> None:
    page = ran_notebook("03")
    panel = page.panel_of("start a worker")
    panel.scroll_into_view_if_needed()
    page.button("watch live").click()  # the row refreshes itself from here on

    page.button("start a worker").click()
    first = wait_for(
        lambda: job_row(panel), lambda r: r["worker"] == "w1" and r["state"] == "running", "w1's claim"
    )
    assert first["attempts"] == "1", first

    page.button("kill newest worker").click()  # w1 is stuck inside the stalling first attempt
    wait_for(panel.inner_text, lambda t: "w1 killed" in t, "w1 shown as killed")
    assert job_row(panel)["worker"] == "w1", "the dead worker still holds the lease"

    page.button("start a worker").click()
    taken = wait_for(lambda: job_row(panel), lambda r: r["worker"] == "w2", "w2 taking the job", timeout=60)
    assert taken["attempts"] == "2", taken
    done = wait_for(lambda: job_row(panel), lambda r: r["state"] == "done", "the job finishing", timeout=60)
    assert done["worker"] == "w2" and done["attempts"] == "2", done
    print(f"03 crash lab: {first} -> killed w1 -> {taken} -> {done}")
    page.screenshot("03_crash_recovery-after-takeover", whole=False)

    page.button("watch live").click()
    page.button("new job").click()  # stops the remaining worker
    assert page.problems() == []


# --- 01: a new size, Run, a new plot ------------------------------------------------------


def test_claim_race_reruns_at_new_size(ran_notebook) -> None:
    page = ran_notebook("01")
    panel = page.panel_of("Run the race")
    panel.scroll_into_view_if_needed()
    jobs_readout = panel.locator(".widget-slider", has_text="jobs").locator(".widget-readout")
    current = int(re.sub(r"\D", "", jobs_readout.inner_text()))
    new_size = 1000 if current != 1000 else 1500
    page.set_slider(panel, "jobs", new_size)
    wait_for(
        lambda: int(re.sub(r"\D", "", jobs_readout.inner_text())), lambda v: v == new_size, "jobs slider"
    )

    chart = panel.locator("img")
    before = chart.get_attribute("src")
    page.button("Run the race").click()
    wait_for(
        panel.inner_text,
        lambda t: f"last run: {new_size:,} jobs" in t,
        "the race at the new size",
        timeout=120,
    )
    after = wait_for(lambda: chart.get_attribute("src"), lambda s: bool(s) and s != before, "a new chart")
    width = wait_for(lambda: chart.evaluate("img => img.naturalWidth"), lambda w: w > 0, "the chart loading")
    print(
        f"01 claim race: jobs {current} -> {new_size}, chart {before!r:.40} -> {after!r:.40}, {width} px wide"
    )
    page.screenshot("01_claim_race-after-rerun", whole=False)
    assert page.problems() == []


# --- the checks themselves ----------------------------------------------------------------


def test_checks_catch_a_broken_notebook(open_notebook, browser, lab_server: LabServer) -> None:
    """The same checks on a notebook built to fail: a good widget passes; an error, a cell left
    unrun, a widget whose model is missing and a failing button callback are all reported."""
    import nbformat

    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell("import ipywidgets as w\nw.IntSlider(description='fine')"),
        nbformat.v4.new_code_cell(
            "from IPython.display import display\n"
            "display({'application/vnd.jupyter.widget-view+json': {'model_id': 'no-such-model',"
            " 'version_major': 2, 'version_minor': 0}, 'text/plain': 'VBox()'}, raw=True)"
        ),
        nbformat.v4.new_code_cell(
            "def explode(_):\n    raise RuntimeError('callback failed')\n"
            "boom = w.Button(description='Boom')\nboom.on_click(explode)\nboom"
        ),
        nbformat.v4.new_code_cell("1 / 0"),
        nbformat.v4.new_code_cell("print('never runs')"),
    ]
    broken = lab_server.copies / "notebooks" / "zz_broken.ipynb"
    nbformat.write(nb, broken)
    window = LabWindow(lab_server, browser)  # its own window, so nothing it leaves behind lingers
    try:
        page = open_notebook(broken, window)
        state = page.run_all()
        page.button("Boom").click()
        wait_for(page.kernel_errors, lambda errors: len(errors) >= 2, "the callback's error")
        problems = "\n".join(page.problems(state))
        page.close()
    finally:
        window.close()
    assert "code cell 0" not in problems, problems
    assert "code cell 1: a widget did not render" in problems, problems
    assert "code cell 3 raised ZeroDivisionError" in problems, problems
    assert "code cell 4 did not run" in problems, problems
    assert "kernel error: RuntimeError: callback failed" in problems, problems
