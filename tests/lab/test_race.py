import sqlite3

import matplotlib.pyplot as plt
import pytest

from labqueue import InvalidArgument
from labqueue.lab import race, race_view
from labqueue.tutorial import race as course
from labqueue.tutorial.sections import package_text


@pytest.fixture
def table(tmp_path):
    path = tmp_path / "race.db"
    race.create_race_db(path, 5)
    db = course.connect(path)
    yield db
    db.close()


def test_the_harness_races_the_tutorials_strategies_in_its_order():
    assert tuple(course.STRATEGIES) == race.STRATEGY_NAMES


@pytest.mark.parametrize("name", race.STRATEGY_NAMES)
def test_each_strategy_claims_every_job_once_when_alone(table, name):
    claim = course.STRATEGIES[name]
    got = [claim(table, "w0") for _ in range(6)]
    assert got == [(1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (None, 0)]
    assert table.execute("SELECT COUNT(*) FROM jobs WHERE claimed_by = 'w0'").fetchone()[0] == 5


class RivalCutsIn:
    """Our connection, except that right after our first look (a SELECT) a rival on
    its own connection runs a whole naive claim, before our write."""

    def __init__(self, db, rival_db):
        self.db, self.rival_db = db, rival_db
        self.rival_got = None

    def execute(self, statement, params=()):
        cursor = self.db.execute(statement, params)
        if statement.startswith("SELECT") and self.rival_got is None:
            rows = cursor.fetchall()
            self.rival_got = course.claim_naive(self.rival_db, "rival")
            return FixedRows(rows)
        return cursor


class FixedRows:
    def __init__(self, rows):
        self.rows = rows

    def fetchone(self):
        return self.rows[0] if self.rows else None


@pytest.mark.parametrize(
    ("name", "ours", "holder"),
    [
        pytest.param("naive", (1, 0), "w0", id="naive-takes-the-rivals-row"),
        pytest.param("cas", (2, 1), "rival", id="cas-wastes-one-look-then-takes-the-next"),
    ],
)
def test_a_rival_between_look_and_write(tmp_path, table, name, ours, holder):
    rival_db = course.connect(tmp_path / "race.db")
    cut_in = RivalCutsIn(table, rival_db)
    try:
        assert course.STRATEGIES[name](cut_in, "w0") == ours
    finally:
        rival_db.close()
    assert cut_in.rival_got == (1, 0)  # the rival took job 1 during our gap
    assert table.execute("SELECT claimed_by FROM jobs WHERE id = 1").fetchone()[0] == holder


def test_bad_sizes_and_strategy_are_named():
    with pytest.raises(InvalidArgument, match=r"n_jobs .* got 0"):
        race.check_size(0, 4)
    with pytest.raises(InvalidArgument, match=r"workers .* got 'four'"):
        race.check_size(10, "four")
    with pytest.raises(InvalidArgument, match="'greedy'"):
        race.race("greedy", 10, 2)


def test_summarize_counts_duplicates_from_the_results_db(tmp_path):
    path = tmp_path / "results.db"
    db = sqlite3.connect(path)
    db.executescript(race.RESULTS_TABLES)
    db.executemany("INSERT INTO claims VALUES (?, ?)", [("w0", 1), ("w0", 2), ("w1", 2), ("w1", 3)])
    db.executemany("INSERT INTO workers VALUES (?, ?, ?, ?)", [("w0", 2, 0, 10.5), ("w1", 2, 3, 11.0)])
    db.commit()
    db.close()
    r = race.summarize("naive", 3, path, started=10.0)
    assert (r.claims, r.distinct, r.duplicates, r.wasted, r.workers, r.seconds) == (4, 3, 1, 3, 2, 1.0)


@pytest.mark.slow
def test_real_race_atomic_claims_each_job_exactly_once(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    r = race.race("atomic", 300, 2)
    assert (r.claims, r.distinct, r.duplicates, r.wasted, r.workers) == (300, 300, 0, 0, 2)


def _learners_race_py(folder, atomic_body):
    """A workspace folder holding race.py with its claim_atomic replaced by `atomic_body`."""
    folder.mkdir()
    text = package_text("race")
    start = text.index("def claim_atomic(")
    end = text.index("STRATEGIES = ")
    (folder / "race.py").write_text(text[:start] + atomic_body + "\n\n" + text[end:])
    return folder


def test_the_racers_run_the_learners_race_py(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    half = """
def claim_atomic(db, worker):
    rows = db.execute(
        "UPDATE jobs SET state = 'running', claimed_by = ? WHERE id ="
        " (SELECT MIN(id) FROM jobs WHERE state = 'queued' AND id <= 20) RETURNING id",
        (worker,),
    ).fetchall()
    return (rows[0][0] if rows else None), 0
"""
    code = _learners_race_py(tmp_path / "yours", half)
    r = race.race("atomic", 40, 2, code=code)
    assert (r.claims, r.distinct, r.duplicates) == (20, 20, 0)  # the learner's claim stops at job 20


def test_a_racer_that_cannot_load_the_learners_code_stops_the_race_at_once(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    code = _learners_race_py(tmp_path / "yours", "def claim_atomic(db, worker):\n    return 1 / 0, 0\n")
    broken = (code / "race.py").read_text() + "\nraise ImportError('broken on purpose')\n"
    (code / "race.py").write_text(broken)
    with pytest.raises(RuntimeError, match="failed before the start"):
        race.race("atomic", 10, 2, code=code)


def test_a_claim_that_never_runs_out_stops_after_as_many_claims_as_jobs(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    forever = "def claim_atomic(db, worker):\n    return 1, 0\n"
    r = race.race("atomic", 30, 2, code=_learners_race_py(tmp_path / "yours", forever))
    assert (r.claims, r.distinct) == (60, 1)


def fake_runner(n_jobs, workers, *, progress, code=None):
    return [
        race.RaceResult("naive", n_jobs, workers, n_jobs + 7, n_jobs, 7, 0, 0.1),
        race.RaceResult("cas", n_jobs, workers, n_jobs, n_jobs, 0, 5, 0.1),
        race.RaceResult("atomic", n_jobs, workers, n_jobs, n_jobs, 0, 0, 0.1),
    ]


def test_side_by_side_scales_to_per_thousand_jobs():
    table = race_view.side_by_side(fake_runner(1000, 4, progress=False))
    mine = table[table.source == "this run"].set_index("strategy")
    tutorial = table[table.source == "tutorial"].set_index("strategy")
    assert mine.loc["naive", "duplicates per 1,000 jobs"] == 7.0
    assert tutorial.loc["naive", "duplicates per 1,000 jobs"] == 266.6  # 5,331 of 20,000
    assert tutorial.loc["cas", "wasted retries per 1,000 jobs"] == 232.7


def test_plot_has_two_labelled_panels():
    fig = race_view.plot_race(fake_runner(1000, 4, progress=False))
    assert len(fig.axes) == 2
    assert all(ax.get_ylabel() and ax.get_xlabel() for ax in fig.axes)
    plt.close(fig)


def test_panel_runs_the_race_with_the_sliders_values():
    panel = race_view.RacePanel(runner=fake_runner)
    assert "Run the race" in panel.status.value  # visible before any run
    panel.jobs.value, panel.workers.value = 1500, 3
    panel.button.click()
    assert [(r.jobs, r.workers) for r in panel.results] == [(1500, 3)] * 3
    assert "<b>7</b> duplicate claims" in panel.status.value
    assert not panel.button.disabled
    assert "<table" in panel.table.value and ">1507<" in panel.table.value
    assert bytes(panel.chart.value).startswith(b"\x89PNG")


def test_panel_says_interrupted_and_can_run_again():
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    panel = race_view.RacePanel(runner=interrupted)
    panel.button.click()
    assert "interrupted" in panel.status.value and not panel.button.disabled
    panel.runner = fake_runner
    panel.button.click()
    assert "duplicate claims" in panel.status.value


class FakeRacer:
    def __init__(self, fails=False):
        self.started = self.killed = self.joined = False
        self.fails, self.pid = fails, None

    def start(self):
        if self.fails:
            raise RuntimeError("could not start")
        self.started, self.pid = True, 4242

    def is_alive(self):
        return self.started and not self.killed

    def kill(self):
        self.killed = True

    def join(self, timeout=None):
        self.joined = True


class InterruptedBarrier:
    def wait(self, timeout=None):
        raise KeyboardInterrupt


def test_an_interrupt_kills_every_racer_and_goes_on():
    racers = [FakeRacer() for _ in range(4)]
    with pytest.raises(KeyboardInterrupt):
        race._run_racers(racers, InterruptedBarrier())
    assert all(r.started and r.killed and r.joined for r in racers)


def test_a_racer_that_fails_to_start_stops_the_ones_already_started():
    racers = [FakeRacer(), FakeRacer(fails=True), FakeRacer()]
    with pytest.raises(RuntimeError, match="could not start"):
        race._run_racers(racers, InterruptedBarrier())
    first, failed, never = racers
    assert first.killed and first.joined
    assert not failed.joined and not never.started and not never.joined


def test_racers_start_with_ctrl_c_ignored_and_the_parent_keeps_its_handler():
    import signal
    import subprocess
    import sys

    before = signal.getsignal(signal.SIGINT)
    probe = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    with race._children_ignore_interrupts():
        child = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert child.stdout.strip() == "True"
    assert signal.getsignal(signal.SIGINT) == before


LOOK = "SELECT MIN(id) FROM jobs WHERE state = 'queued'"
TAKE_GUARDED = "UPDATE jobs SET claimed_by = :worker, state = 'running' WHERE id = :id AND state = 'queued'"
ONE_STATEMENT = (
    "UPDATE jobs SET claimed_by = :worker, state = 'running' "
    "WHERE id = (SELECT MIN(id) FROM jobs WHERE state = 'queued') RETURNING id"
)


def test_claim_with_runs_a_look_and_a_take_or_one_statement(table):
    assert race.claim_with(table, "w0", LOOK, TAKE_GUARDED) == (1, 0)
    assert race.claim_with(table, "w0", None, ONE_STATEMENT) == (2, 0)
    stuck = "UPDATE jobs SET claimed_by = :worker WHERE id = :id AND 0"
    assert race.claim_with(table, "w0", LOOK, stuck) == (None, race.GIVE_UP_AFTER)


def test_a_race_of_sql_statements_stops_at_the_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path))
    forever = "UPDATE jobs SET claimed_by = :worker WHERE id = 1 RETURNING id"  # never runs out
    result = race.race("yours", 50, 2, statements=(None, forever))
    assert result.claims == 100 and result.distinct == 1
