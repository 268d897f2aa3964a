"""Every notebook in real JupyterLab, in headless Chromium, run and then used as a learner uses it.

nbval runs the notebooks' code, but never renders a widget or clicks one. Here each notebook is
opened in JupyterLab, its saved outputs cleared, all cells run from the Run menu, and the page
checked for error outputs, kernel errors (widget callbacks included), cells that did not run and
widgets that did not render. Then every notebook's widget panel is used as a learner would: a
control set to a value other than its default, its button pressed (04, 05 and 07 have none:
they redraw as a control changes), and the page checked for what that must show (the claim
race's new plot, the lease playground's row changing hands, the crash lab's takeover, a new blue
bar in the throughput chart, the dashboard's counts, ...). A test that drives notebook NN
(marked drives("NN")) runs right after NN's clean run, on the page that run left open, and
closes it. Pictures of each driven panel and of any notebook whose run failed go to
screenshots/browser/ (git-ignored); LABQUEUE_SCREENSHOTS=1 adds one of every whole notebook.

This file takes notebooks 00 to 09 and the checks of the course environment itself;
test_notebooks_10_to_17_in_browser.py takes the rest, so the two halves run side by side.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from pathlib import Path

import pytest
from browser_lab import ROOT, LabServer, LabWindow, load_tasks
from panels import NOTEBOOKS, SECOND_HALF, finished, job_row, new_picture, run_clean, table_rows, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

FIRST = [nb for nb in NOTEBOOKS if nb.name < SECOND_HALF]


@pytest.mark.parametrize("notebook", FIRST, ids=[nb.stem for nb in FIRST])
def test_notebook_runs_clean(
    notebook: Path, open_notebook, ran_pages, lab_server: LabServer, request: pytest.FixtureRequest
) -> None:
    run_clean(notebook, open_notebook, ran_pages, lab_server, request)


@pytest.mark.drives("02")
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


@pytest.mark.drives("03")
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


@pytest.mark.drives("01")
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


# --- 04: the zombie's late report, fenced and unfenced ------------------------------------


@pytest.mark.drives("04")
def test_zombie_panel_replays_a_late_complete(ran_notebook) -> None:
    page = ran_notebook("04")
    panel = page.panel_of("complete")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    before, src = panel.inner_text(), chart.get_attribute("src")
    assert "without the fence: the handler ran 3 times (worker-a, worker-b, worker-c)" in before, before

    page.button("complete").click()  # the zombie reports complete() late, not fail()
    text = wait_for(
        panel.inner_text, lambda t: "without the fence: the handler ran 2 times" in t, "the late complete()"
    )
    assert "with the fence: the handler ran 2 times (worker-a, worker-b); the job ends done" in text, text
    assert "mod-active" in page.button("complete").get_attribute("class")
    new_picture(chart, src)
    print("04 zombie panel: late report fail -> complete:", " | ".join(text.splitlines()[-2:]))
    page.screenshot("04_zombie_workers-late-complete", whole=False)
    assert page.problems() == []


# --- 05: an effect committed separately, when the stale worker wakes up early ---------------


@pytest.mark.drives("05")
def test_effects_panel_replays_an_early_wake_up(ran_notebook) -> None:
    page = ran_notebook("05")
    panel = page.panel_of("effect, then complete()")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    assert "wakes up at t=40 s, after worker-b" in panel.inner_text()

    page.set_slider(panel, "stall (s)", 20)  # worker-a wakes before worker-b looks (t=31)
    text = wait_for(panel.inner_text, lambda t: "worker-a wakes up at t=20 s" in t, "the replay at 20 s")
    assert "t=20 s, before worker-b looks for work" in text and "ada ends with 10 credits" in text, text
    steps = table_rows(panel.locator("table"))
    assert {"t (s)": "20.0", "worker": "worker-a", "step": "add credits"}.items() <= steps[2].items(), steps
    assert (steps[-1]["worker"], steps[-1]["result"]) == ("worker-b", "nothing ready"), steps
    assert steps[-1]["ada's credits"] == "10", steps
    new_picture(chart, src)
    print(f"05 effects panel: stall 40 -> 20 s, {len(steps)} steps, last {steps[-1]}")
    page.screenshot("05_effect_in_transaction-stall-20", whole=False)
    assert page.problems() == []


# --- 06: both heartbeat scenarios again, with a shorter lease and shorter work ---------------


@pytest.mark.drives("06")
def test_heartbeat_panel_runs_a_shorter_lease(ran_notebook) -> None:
    page = ran_notebook("06")
    panel = page.panel_of("run both scenarios")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    page.set_slider(panel, "lease (s)", 0.5)
    page.set_slider(panel, "work (s)", 1.5)  # a second past the lease: w2 has time to claim
    wait_for(
        lambda: (page.slider_value(panel, "lease (s)"), page.slider_value(panel, "work (s)")),
        lambda v: v == (0.5, 1.5),
        "the sliders",
    )

    page.button("run both scenarios").click()  # real threads: about 2 x 1.5 s
    finished(panel, r"(?m)^lease 0\.5 s, work 1\.5 s$", "both scenarios at lease 0.5 s, work 1.5 s")
    rows = {r["scenario"]: r for r in table_rows(panel.locator("table"))}
    assert set(rows) == {"no_heartbeat", "keepalive"}, rows
    assert all((r["lease (s)"], r["work (s)"]) == ("0.5", "1.5") for r in rows.values()), rows
    assert rows["no_heartbeat"]["handler runs"] == "2", "1.5 s of work outlives a 0.5 s lease: w2 runs it too"
    new_picture(chart, src)
    print(f"06 heartbeat panel: lease 1.0 -> 0.5 s, work 3.0 -> 1.5 s: {rows}")
    page.screenshot("06_heartbeat-short-lease", whole=False)
    assert page.problems() == []


# --- 07: full jitter with fewer attempts ----------------------------------------------------


@pytest.mark.drives("07")
def test_jitter_panel_follows_max_attempts(ran_notebook) -> None:
    page = ran_notebook("07")
    panel = page.panel_with("max attempts")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    before = table_rows(panel.locator("table"))
    assert [r["attempt"] for r in before] == [str(n) for n in range(1, 8)], before

    page.set_slider(panel, "max attempts", 4)  # three retries, then dead
    rows = wait_for(lambda: table_rows(panel.locator("table")), lambda r: len(r) == 3, "three attempts")
    assert [r["attempt"] for r in rows] == ["1", "2", "3"], rows
    assert [r["ceiling (s)"] for r in rows] == ["1.0", "2.0", "4.0"], rows
    new_picture(chart, src)
    print(f"07 jitter panel: max attempts 8 -> 4: {rows}")
    page.screenshot("07_retries_and_poison-max-attempts-4", whole=False)
    assert page.problems() == []


# --- 08: claims timed on a smaller table --------------------------------------------------


@pytest.mark.drives("08")
def test_claim_index_panel_measures_a_smaller_table(ran_notebook) -> None:
    page = ran_notebook("08")
    panel = page.panel_of("seed and measure")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    before = {r["setup"]: r for r in table_rows(panel.locator("table"))}
    page.choose(panel, "table", "10,000 done rows")
    wait_for(lambda: page.chosen(panel, "table"), lambda v: v == "10,000 done rows", "the dropdown")

    page.button("seed and measure").click()
    seeded = finished(panel, r"10,000 done rows \(seeded in [\d.]+ s\)", "10,000 rows seeded and timed")
    after = {r["setup"]: r for r in table_rows(panel.locator("table"))}
    assert set(after) == set(before), (before, after)
    gap = {
        name: (float(before[name]["× the fastest"]), float(r["× the fastest"])) for name, r in after.items()
    }
    # a thirtieth of the finished rows to scan: the unindexed claim's gap must shrink
    assert gap["no index"][1] < gap["no index"][0], gap
    new_picture(chart, src)
    print(f"08 claim index panel: {seeded[0]}; x the fastest, before -> after: {gap}")
    page.screenshot("08_claim_index-10000-rows", whole=False)
    assert page.problems() == []


# --- 09: a run of my own: a new blue bar ----------------------------------------------------

TAB_BLUE = (31, 119, 180)  # matplotlib's tab:blue, the colour of "your runs"


@pytest.mark.drives("09")
def test_throughput_panel_adds_a_blue_bar(ran_notebook) -> None:
    page = ran_notebook("09")
    panel = page.panel_of("Run")
    panel.scroll_into_view_if_needed()
    chart = panel.locator("img.widget-image")
    src = chart.get_attribute("src")
    assert page.pixels_of_colour(chart, TAB_BLUE) == 0, "no run of mine yet: grey bars only"
    page.set_slider(panel, "workers", 2)
    page.choose(panel, "per claim", "5")
    page.choose(panel, "jobs", "500")
    wait_for(
        lambda: (
            page.slider_value(panel, "workers"),
            page.chosen(panel, "per claim"),
            page.chosen(panel, "jobs"),
        ),
        lambda v: v == (2, "5", "500"),
        "the controls",
    )

    page.button("Run").click()
    status = finished(panel, r"2 w, 5/claim, NORMAL: [\d,]+ jobs/s \([\d.]+ s\)", "the run of 2 w, 5/claim")
    new_picture(chart, src)
    blue = page.pixels_of_colour(chart, TAB_BLUE)
    assert blue > 100, f"no blue bar for the new run ({blue} blue pixels)"
    print(f"09 throughput panel: {status[0]}; the chart now has {blue} blue pixels")
    page.screenshot("09_throughput-my-run", whole=False)
    assert page.problems() == []


# --- 02 and 04: break a saved cell, then the reset ----------------------------------------

COURSE = "this kernel and your worker processes run the course's code, line for line"
# What the diff cell compares, asked of the kernel: the kernel's code and the workers' both differ.
BOTH_DIFFER = (
    'print(*(f"+++ {who} jobqueue.py" in ws.changes() for who in ("this kernel\'s", "your workers\'")))'
)


@pytest.mark.parametrize(
    ("number", "saved_cell", "removed", "check", "rule"),
    [
        pytest.param(
            "02", "# jobqueue.py\n@add_to_class(JobQueue)\ndef complete(", " AND lease_token = :token",
            "steps = ", "complete is not fenced", marks=pytest.mark.drives("02"), id="02",
        ),
        pytest.param(
            "04", "# jobqueue.py\n# A failure", "lease_token = :token AND ", "assert real.taken_over",
            "not fenced", marks=pytest.mark.drives("04"), id="04",
        ),
    ],
)  # fmt: skip
def test_a_broken_cell_fails_the_check_until_the_reset(
    ran_notebook, number, saved_cell, removed, check, rule
):
    """As a learner does it: edit the saved cell, run it and the cells below; the diff cell shows
    the edit in the kernel and the workers, the Check names the rule. Then the reset as notebook
    00 teaches it: the first code cell, then the cells below the edited one."""
    page = ran_notebook(number)
    edited, diff, check_cell = (
        page.cell_index(saved_cell),
        page.cell_index("print(ws.changes()"),
        page.cell_index(check),
    )
    page.edit_cell(edited, removed, "")
    page.run_cells(edited)
    page.run_cells(edited + 1, below=True)
    assert page.execute(BOTH_DIFFER).strip() == "True True"
    assert page.output_of(diff)[0].startswith("--- course/jobqueue.py"), page.output_of(diff)
    assert rule in page.output_of(check_cell)[1], page.output_of(check_cell)

    page.run_cells(page.state()["cells"][0]["index"])  # the first code cell: the reset
    page.run_cells(edited + 1, below=True)
    assert COURSE in page.output_of(diff)[0], page.output_of(diff)
    shown, error = page.output_of(check_cell)
    assert not error and shown.strip(), (shown, error)
    print(f"{number}: broken, the Check said {rule!r}; after the reset: {shown.strip()[:80]}")
    page.screenshot(f"{number}-after-the-reset", whole=False)


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


# --- the environment: what `python tasks.py lab` builds, as Binder does ----------------------


def lab_setting_defaults(server: LabServer, plugin: str) -> dict:
    """A JupyterLab plugin's defaults as the server hands them out, overrides included."""
    request = urllib.request.Request(
        f"{server.base}/lab/api/settings/{plugin}", headers={"Authorization": f"token {server.token}"}
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        schema = json.loads(response.read())["schema"]
    return {name: spec.get("default") for name, spec in schema["properties"].items()}


def test_lab_runs_in_the_course_environment(
    open_notebook, lab_window: LabWindow, lab_server: LabServer
) -> None:
    """JupyterLab and its kernels run in ./.venv-lab as `tasks.py lab` built it from binder/: the
    kernel's interpreter is that environment's, with binder/requirements.txt's exact versions;
    the server culls idle kernels, even in open notebooks (binder/jupyter_server_config.json);
    JupyterLab's defaults ask nothing: no news question, no update check, no kernel dialog, and
    closing a notebook's tab shuts its kernel down (binder/overrides.json); and `tasks.py lab`
    printed the first notebook's link with its token."""
    import nbformat
    from test_binder_config import binder_pins

    tasks = load_tasks()
    pins = {name: str(next(iter(req.specifier)).version) for name, req in binder_pins().items()}
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.cells = [
        nbformat.v4.new_code_cell(
            "import importlib.metadata, sys\n"
            "from pathlib import Path\n"
            f"assert Path(sys.prefix).resolve() == Path({str(tasks.LAB_VENV)!r}).resolve(), sys.prefix\n"
            f"pins = {pins!r}\n"
            "found = {n: importlib.metadata.version(n) for n in pins}\n"
            "wrong = {n: v for n, v in found.items() if v != pins[n]}\n"
            "assert not wrong, f'not the versions binder/requirements.txt pins: {wrong}'\n"
            "print('kernel in', sys.prefix)"
        )
    ]
    path = lab_server.copies / "notebooks" / "zz_environment.ipynb"
    nbformat.write(nb, path)
    page = open_notebook(path)
    try:
        state = page.run_all()
        assert page.problems(state) == [], page.problems(state)
    finally:
        page.close()

    log = lab_server.log.read_text(errors="replace")
    culling = json.loads((ROOT / tasks.SERVER_CONFIG[0]).read_text())["MappingKernelManager"]
    assert f"Culling kernels with idle durations > {culling['cull_idle_timeout']} seconds" in log, log[-3000:]
    assert "Culling kernels even with connected clients" in log
    link = f"{lab_server.base}/lab/tree/{tasks.FIRST_NOTEBOOK}?token={lab_server.token}"
    assert link in log, f"tasks.py lab did not print {link}:\n{lab_server.log_tail()}"

    notification = lab_setting_defaults(lab_server, "@jupyterlab/apputils-extension:notification")
    assert notification["fetchNews"] == "false" and notification["checkForUpdates"] is False, notification
    tracker = lab_setting_defaults(lab_server, "@jupyterlab/notebook-extension:tracker")
    assert tracker["autoStartDefaultKernel"] is True
    toasts = lab_window.page.locator(".Toastify__toast").all_inner_texts()
    assert not [t for t in toasts if "news" in t.lower() or "update" in t.lower()], toasts


def test_the_printed_link_opens_the_first_notebook(browser, lab_server: LabServer) -> None:
    """The link `tasks.py lab` prints (and the browser opens) shows the course's first notebook,
    with its kernel started and no dialog: as a learner meets the course, locally or on Binder."""
    tasks = load_tasks()
    assert (ROOT / tasks.FIRST_NOTEBOOK).is_file(), f"{tasks.FIRST_NOTEBOOK} is missing"
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(f"{lab_server.base}/lab/tree/{tasks.FIRST_NOTEBOOK}?token={lab_server.token}")
        page.wait_for_function(
            "path => { const app = window.jupyterapp; const w = app && app.shell.currentWidget;"
            " return !!(w && w.context && w.context.path === path && w.sessionContext.session"
            " && w.sessionContext.session.kernel); }",
            arg=tasks.FIRST_NOTEBOOK,
            timeout=90_000,
        )
        time.sleep(2)  # a dialog or a news question would show by now
        assert page.query_selector(".jp-Dialog") is None, page.inner_text(".jp-Dialog")
        toasts = page.locator(".Toastify__toast").all_inner_texts()
        assert toasts == [], toasts
        session = page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext.session.id")
        lab_server.api("DELETE", f"sessions/{session}")
    finally:
        context.close()
