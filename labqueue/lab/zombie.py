"""Notebook 04: a worker whose lease ran out reports late, with and without the fence.

`scenario()` plays one timeline on a fake clock and records every claim and report,
so the same function draws the side-by-side picture and answers the widget. It runs
the JobQueue class it is given (notebook 04 passes the learner's; the tutorial's by
default): the fenced reports are that class's `fail` and `complete`.
"""

from __future__ import annotations

import contextlib
import io
import os
import sqlite3
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..tutorial.jobqueue import Job, JobQueue
from .assets import data_file, figure_png, new_figure
from .scratch import db_path
from .walks import ONE_ROW, unfenced_fail

LEASE = 30.0
TAKEOVER_AT = 31.0  # worker-b's claim, one second after worker-a's lease ended
DATA_FILE = "zombie_workers_tutorial.txt"
REPORTS = ("fail", "complete")


UNFENCED_COMPLETE = "UPDATE jobs SET lease_token = NULL, finished_at = :now, state = 'done' WHERE id = :id"


def unfenced_complete(q: JobQueue, job: Job) -> None:
    """The same bug for a success: mark the job done by its id alone."""
    q.db.execute(UNFENCED_COMPLETE, {"now": q.clock(), "id": job.id})


@dataclass(frozen=True)
class Event:
    t: float
    worker: str
    action: str  # "claim", "complete", "fail" or "claim (nothing)"
    accepted: bool
    note: str = ""


@dataclass
class Outcome:
    fenced: bool
    report: str
    report_at: float
    replaced: bool
    events: list[Event] = field(default_factory=list)
    state: str = ""
    attempts: int = 0

    @property
    def runs(self) -> list[str]:
        """Every claim that handed the job to a handler: one run of the work."""
        return [e.worker for e in self.events if e.action == "claim" and e.accepted]

    def summary(self) -> str:
        fence = "with the fence" if self.fenced else "without the fence"
        return (
            f"{fence}: the handler ran {len(self.runs)} time{'s' * (len(self.runs) != 1)} "
            f"({', '.join(self.runs)}); the job ends {self.state} after {self.attempts} attempt"
            f"{'s' * (self.attempts != 1)}"
        )


def scenario(
    fenced: bool = True,
    report: str = "fail",
    report_at: float = 40.0,
    replaced: bool = True,
    folder: str | Path | None = None,
    queue_class: type[JobQueue] | None = None,
) -> Outcome:
    """worker-a claims at t=0 with a 30 s lease and stalls. If `replaced`, worker-b
    claims at t=31 and completes. At `report_at` worker-a reports its late `fail` or
    `complete`, checked against its token (`fenced`: `queue_class`'s own methods) or by
    id alone; then worker-c asks for work and, if it gets the job, completes it."""
    if report not in REPORTS:
        raise InvalidArgument(f"report must be one of {', '.join(REPORTS)}, got {report!r}")
    low = TAKEOVER_AT if replaced else 0.0
    if not isinstance(report_at, (int, float)) or not low < report_at <= 600:
        raise InvalidArgument(f"report_at must be after t={low:g} and at most 600, got {report_at!r}")
    out = Outcome(fenced=fenced, report=report, report_at=float(report_at), replaced=replaced)
    clock = FakeClock(0.0)
    # rng=0: a failure's retry is due at once, so worker-c's claim shows whether it was requeued.
    name = f"zombie_{'fenced' if fenced else 'unfenced'}_{report}"
    q = (queue_class or JobQueue)(db_path(name, folder), lease_seconds=LEASE, clock=clock, rng=lambda: 0.0)
    with contextlib.closing(q.db):
        q.enqueue("email", {"to": "ada@example.com"})
        (a,) = q.claim("worker-a")
        out.events.append(Event(0.0, "worker-a", "claim", True, f"attempt {a.attempts}"))
        if replaced:
            clock.now = TAKEOVER_AT
            (b,) = q.claim("worker-b")
            out.events.append(Event(clock.now, "worker-b", "claim", True, f"attempt {b.attempts}"))
            out.events.append(Event(clock.now, "worker-b", "complete", q.complete(b)))
        clock.now = float(report_at)
        out.events.append(Event(clock.now, "worker-a", report, _late_report(q, a, report, fenced)))
        got = q.claim("worker-c")
        if got:
            out.events.append(Event(clock.now, "worker-c", "claim", True, f"attempt {got[0].attempts}"))
            out.events.append(Event(clock.now, "worker-c", "complete", q.complete(got[0])))
        else:
            out.events.append(Event(clock.now, "worker-c", "claim (nothing)", False))
        row = q.db.execute(ONE_ROW, (1,)).fetchone()
        out.state, out.attempts = row["state"], row["attempts"]
    return out


def _late_report(q: JobQueue, job: Job, report: str, fenced: bool) -> bool:
    """worker-a's late report; True when it changed the job's row."""
    if fenced:
        return q.fail(job, "TimeoutError") is not None if report == "fail" else q.complete(job)
    before = q.db.total_changes
    if report == "fail":
        unfenced_fail(q, job, "TimeoutError")
    else:
        unfenced_complete(q, job)
    return q.db.total_changes > before


def outcomes_table(
    report_at: float = 40.0, folder: str | Path | None = None, queue_class: type[JobQueue] | None = None
):
    """Every combination of late report, takeover and fence, played on the fake clock."""
    import pandas as pd

    rows = []
    for replaced in (True, False):
        for report in REPORTS:
            for fenced in (False, True):
                o = scenario(fenced, report, report_at, replaced, folder, queue_class)
                late = next(e for e in o.events if e.worker == "worker-a" and e.action == report)
                rows.append(
                    {
                        "worker-b took over": "yes" if replaced else "no",
                        "worker-a's late report": report,
                        "fence": "on" if fenced else "off",
                        "late report changed the row": late.accepted,
                        "handler runs": len(o.runs),
                        "final state": o.state,
                        "attempts": o.attempts,
                    }
                )
    return pd.DataFrame(rows)


def tutorial_lines(path: Path | None = None) -> list[str]:
    """The lines the tutorial printed for its three zombie runs (from data/)."""
    text = (path or data_file(DATA_FILE)).read_text(encoding="utf-8")
    return [line for line in text.splitlines() if not line.startswith("#")]


def printed_lines(*walks: Callable[[], object]) -> list[str]:
    """Run fake-clock walks and return what they printed, one blank line between them."""
    lines: list[str] = []
    for k, walk in enumerate(walks):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            walk()
        lines += ([""] if k else []) + buffer.getvalue().splitlines()
    return lines


LANES = ("worker-a", "worker-b", "worker-c")
MARKS = {True: ("o", "tab:green"), False: ("x", "tab:red")}


def draw_timeline(ax, outcome: Outcome, until: float | None = None) -> None:
    """One outcome on one axes: each worker's lease as a bar, each report as a mark
    (green circle: the row changed; red cross: refused or nothing to claim)."""
    until = until or max(outcome.report_at + 15, 60)
    lane = {w: len(LANES) - 1 - i for i, w in enumerate(LANES)}
    for e in outcome.events:
        y = lane[e.worker]
        if e.action == "claim":
            end = next(
                (x.t for x in outcome.events if x.worker == e.worker and x.action != "claim" and x.t >= e.t),
                until,
            )
            held = min(max(end, e.t + 1.5), e.t + LEASE)
            ax.broken_barh([(e.t, held - e.t)], (y - 0.2, 0.4), color="#9ecae1")
            if end > e.t + LEASE:  # still working after its lease ended
                ax.broken_barh(
                    [(e.t + LEASE, end - e.t - LEASE)],
                    (y - 0.2, 0.4),
                    facecolor="white",
                    edgecolor="#9ecae1",
                    hatch="///",
                )
            late = e.t > 0.75 * until  # near the right edge: the note ends at the bar instead
            side = "right" if late else "left"
            ax.text(e.t + (-0.5 if late else 0.5), y + 0.25, e.note, fontsize=7, ha=side)
        else:
            marker, color = MARKS[e.accepted]
            ax.plot(e.t, y, marker=marker, color=color, markersize=8, markeredgewidth=2)
            if e.action == "claim (nothing)":
                label = "claims: []"
            elif e.worker == "worker-a":
                label = f"late {e.action}: {'accepted' if e.accepted else 'refused'}"
            else:
                label = e.action
            # Near the right edge a centred label would run off the axes (and the picture):
            # end it at the mark instead.
            right = e.t > 0.75 * until
            ax.text(
                e.t + 1.5 * right,
                y - 0.3,
                label,
                fontsize=7,
                color=color,
                ha="right" if right else "center",
                va="top",
            )
    ax.axvline(LEASE, color="gray", linestyle=":", linewidth=1)
    ax.set_yticks(list(lane.values()), list(lane))
    ax.set_ylim(-0.8, len(LANES) - 0.3)
    ax.set_xlim(-1, until)
    ax.set_xlabel("fake time (s)")
    runs = len(outcome.runs)
    fence = "with the fence" if outcome.fenced else "without the fence"
    ax.set_title(f"{fence}: ran {runs}×, ends {outcome.state}", fontsize=9)


def plot_side_by_side(left: Outcome, right: Outcome):
    """Two timelines, typically unfenced and fenced, sharing the worker lanes."""
    until = max(left.report_at, right.report_at) + 15
    fig, axes = new_figure(1, 2, sharey=True)
    draw_timeline(axes[0], left, until)
    draw_timeline(axes[1], right, until)
    axes[1].tick_params(labelleft=False)
    return fig


class ZombiePanel:
    """Choose how the late worker reports and whether the fence is on; the panel
    replays the timeline on a fake clock and draws it beside its twin."""

    def __init__(self, folder: str | Path | None = None, queue_class: type[JobQueue] | None = None) -> None:
        import ipywidgets as w

        self.folder = folder
        self.queue_class = queue_class
        self.report = w.ToggleButtons(options=REPORTS, value="fail", description="late report")
        self.report_at = w.IntSlider(
            value=40, min=32, max=90, description="at t (s)", continuous_update=False
        )
        self.replaced = w.Checkbox(value=True, description="worker-b took over at t=31")
        self.text = w.HTML()
        self.chart = w.Image(format="png", layout=w.Layout(width="640px", max_width="100%"))
        for control in (self.report, self.report_at, self.replaced):
            control.observe(lambda _: self.refresh(), names="value")
        self.widget = w.VBox([w.HBox([self.report, self.replaced]), self.report_at, self.text, self.chart])
        self.update()

    def update(self) -> tuple[Outcome, Outcome]:
        args = dict(
            report=self.report.value,
            report_at=self.report_at.value,
            replaced=self.replaced.value,
            queue_class=self.queue_class,
        )
        self.outcomes = (
            scenario(fenced=False, folder=self.folder, **args),
            scenario(fenced=True, folder=self.folder, **args),
        )
        self.text.value = "<br>".join(o.summary() for o in self.outcomes)

        self.chart.value = figure_png(plot_side_by_side(*self.outcomes))
        return self.outcomes

    def refresh(self) -> None:
        """update() for a control's callback: a kernel interrupt is reported, not left half-drawn."""
        try:
            self.update()
        except KeyboardInterrupt:
            self.text.value = "<b>interrupted</b>: move a control to replay the timelines"


def zombie_panel(folder: str | Path | None = None, queue_class: type[JobQueue] | None = None):
    """The notebook's widget: the late report, its time, and whether anyone took over
    (played on `queue_class`, the learner's JobQueue in notebook 04)."""
    return ZombiePanel(folder, queue_class).widget


# -- the same story with real worker processes ---------------------------------------------

RUN_LEASE = 1.0  # seconds: short, so the frozen workers' leases run out quickly
RUN_IDLE_EXIT = 1.5  # a worker with nothing to claim for this long leaves (longer than a retry's delay)
POLL = 0.01  # how often the harness reads the jobs table
THAW_WHEN = ("taken", "done")
JOB_ROWS = "SELECT id, state, attempts, worker, lease_token, last_error FROM jobs ORDER BY id"


@dataclass
class ZombieJob:
    """One email job, its frozen worker, and what the jobs table and the ledger say at the end."""

    id: int
    report: str  # what its first worker reports when thawed: "complete", or "fail" (a timeout)
    zombie: str = ""  # the worker frozen while holding it
    frozen_at: float | None = None  # seconds since the start
    taken_over_at: float | None = None  # when the harness saw another claim of it
    thawed_at: float | None = None
    reported: bool = False  # the thawed worker went on and left cleanly: its late report was made
    state: str = ""
    attempts: int = 0
    worker: str | None = None  # who claimed it last
    last_error: str | None = None
    ledger: list[int] = field(default_factory=list)  # the attempt of each ledger row it wrote

    @property
    def taken_over(self) -> bool:
        return self.frozen_at is not None and self.attempts >= 2

    @property
    def verdict(self) -> str:
        """What became of the frozen worker's late report: refused, accepted, or none made."""
        if not (self.taken_over and self.reported):
            return "none"
        return "accepted" if self.late_report_accepted else "refused"

    @property
    def late_report_accepted(self) -> bool:
        """The frozen worker's report changed the job: its success wrote a ledger row, or
        its failure was recorded (the timeout is the only error an email job raises)."""
        if self.report == "complete":
            return 1 in self.ledger
        return (self.last_error or "").startswith("TimeoutError")


@dataclass
class ZombieRun:
    lease: float
    thaw: str
    jobs: list[ZombieJob]
    seconds: float = 0.0
    exit_codes: dict[str, int | None] = field(default_factory=dict)
    timed_out: bool = False

    @property
    def taken_over(self) -> list[int]:
        return [j.id for j in self.jobs if j.taken_over]

    @property
    def late_reports(self) -> list[int]:
        """Jobs whose frozen worker was thawed after a takeover and made its report."""
        return [j.id for j in self.jobs if j.taken_over and j.reported]

    @property
    def refused(self) -> list[int]:
        return [j.id for j in self.jobs if j.id in self.late_reports and not j.late_report_accepted]

    @property
    def accepted(self) -> list[int]:
        return [j.id for j in self.jobs if j.id in self.late_reports and j.late_report_accepted]

    @property
    def ran_three_times(self) -> list[int]:
        return [j.id for j in self.jobs if j.attempts >= 3]

    @property
    def doubled(self) -> list[int]:
        return [j.id for j in self.jobs if len(j.ledger) >= 2]

    @property
    def stale_results(self) -> list[int]:
        """Jobs whose ledger holds the frozen worker's attempt: a late success counted."""
        return [j.id for j in self.jobs if j.taken_over and 1 in j.ledger]

    @property
    def not_done(self) -> list[int]:
        return [j.id for j in self.jobs if j.state != "done"]

    @property
    def once(self) -> list[int]:
        """Jobs whose effect landed exactly once, from the claim that held the job last."""
        return [j.id for j in self.jobs if j.state == "done" and j.ledger == [j.attempts]]

    def lines(self) -> list[str]:
        n = len(self.jobs)
        said = [
            f"{n} email jobs, lease {self.lease:g} s; every first worker frozen (SIGSTOP) holding its job",
            f"taken over by another worker: {len(self.taken_over)} of {n}",
            f"late reports after the thaw (SIGCONT): {len(self.late_reports)}, "
            f"refused {len(self.refused)}, accepted {len(self.accepted)}",
            f"one ledger row, from the last claim: {len(self.once)} of {n} jobs; "
            f"claimed three times: {self.ran_three_times}; two ledger rows: {self.doubled}",
        ]
        if self.timed_out:
            said.append("the run timed out: its workers were stopped")
        return said

    def table(self):
        import pandas as pd

        rows = [
            {
                "job": j.id,
                "frozen worker": j.zombie,
                "its late report": j.report,
                "frozen at (s)": j.frozen_at,
                "taken over at (s)": j.taken_over_at,
                "thawed at (s)": j.thawed_at,
                "late report": j.verdict,
                "claims": j.attempts,
                "ledger rows (attempt)": ", ".join(map(str, j.ledger)) or "none",
                "state": j.state,
            }
            for j in self.jobs
        ]
        return pd.DataFrame(rows).set_index("job").round(2)


def _state(pid: int) -> str | None:
    """Process `pid`'s state letter from /proc (S asleep, T stopped, ...); None where /proc
    cannot tell (not Linux, or the process is gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def _stopped(pid: int, timeout: float = 2.0) -> None:
    """Wait until process `pid` is stopped (Linux says so in /proc; elsewhere, a short wait)."""
    if _state(pid) is None:
        time.sleep(0.05)
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if _state(pid) in ("T", "t", None):
            return
        time.sleep(0.002)


def _in_the_call(pid: int) -> bool:
    """Whether process `pid` is asleep, which a worker holding an email job is only inside the
    0.5 s mail call. A worker caught between its claim's commit and the call (a loaded machine
    can leave it there for a while) would, frozen there, make its whole call after the thaw, and
    the new holder could finish first. Where /proc cannot tell (not Linux), yes."""
    state = _state(pid)
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text().strip()
    except OSError:
        return True
    if state is None:
        return True
    # wchan names the kernel function it sleeps in; some kernels hide it ("0")
    return state == "S" and ("sleep" in wchan or wchan in ("", "0"))


def zombie_run(
    jobs: int = 4,
    lease: float = RUN_LEASE,
    thaw: str = "taken",
    folder: str | Path | None = None,
    code: str | Path | None = None,
    timeout: float = 30.0,
    progress: bool = False,
) -> ZombieRun:
    """Real zombies: `jobs` email jobs (every other one's first call times out), one worker
    process per job that claims it and is frozen with SIGSTOP mid-call, then one more
    worker that takes the jobs over as their leases run out. Each frozen worker is thawed
    with SIGCONT once its job is `taken` by another claim (its late report meets a job
    that is still running, under the new claim), or once the job is `done`. Every worker
    runs the tutorial's loop on the code in folder `code` (the learner's workspace).
    Ends when every worker has left; after `timeout` seconds it stops them and says so."""
    import signal

    if not isinstance(jobs, int) or isinstance(jobs, bool) or not 1 <= jobs <= 12:
        raise InvalidArgument(f"jobs must be a whole number from 1 to 12, got {jobs!r}")
    if not isinstance(lease, (int, float)) or not 0.6 <= lease <= 10:
        raise InvalidArgument(f"lease must be from 0.6 to 10 seconds (an email takes 0.5 s), got {lease!r}")
    if thaw not in THAW_WHEN:
        raise InvalidArgument(f"thaw must be one of {', '.join(THAW_WHEN)}, got {thaw!r}")
    from tqdm.auto import tqdm

    from ..demo.handlers import LEDGER_TABLE
    from ..procs import kill_tree
    from ..tutorial import process

    path = db_path("zombie_run", folder)
    q = JobQueue(path, lease_seconds=lease)
    with contextlib.closing(q.db):
        q.db.execute(LEDGER_TABLE)
        for n in range(jobs):
            q.enqueue("email", {"to": f"user{n + 1}@example.com", "times_out": n % 2 == 1})
    run = ZombieRun(
        float(lease), thaw, [ZombieJob(n + 1, "fail" if n % 2 else "complete") for n in range(jobs)]
    )
    by_id = {j.id: j for j in run.jobs}
    by_zombie: dict[str, ZombieJob] = {}  # each frozen worker and the job it was frozen holding
    names = [f"frozen-{n + 1}" for n in range(jobs)]
    logs = {}
    procs: dict[str, subprocess.Popen] = {}

    def start(name: str) -> None:
        logs[name] = path.with_name(f"{path.stem}-{name}.stderr")
        with logs[name].open("wb") as err:
            procs[name] = process.start_worker(path, name, lease, RUN_IDLE_EXIT, code=code, stderr=err)

    started = time.monotonic()
    bar = tqdm(total=3 * jobs, desc="frozen, taken over, reported", unit="step", disable=not progress)
    db = sqlite3.connect(str(path), timeout=30.0)
    db.row_factory = sqlite3.Row
    try:
        for name in names:
            start(name)
        waiting = set(names)  # started, not yet seen holding a job
        frozen: set[str] = set()
        while time.monotonic() - started < timeout:
            now = time.monotonic() - started
            rows = {r["id"]: r for r in db.execute(JOB_ROWS)}
            holders = {
                r["worker"]: r for r in rows.values() if r["state"] == "running" and r["attempts"] == 1
            }
            for name in sorted(waiting):
                if procs[name].poll() is not None:
                    said = logs[name].read_text(encoding="utf-8", errors="replace").strip()
                    tail = "\n".join(said.splitlines()[-8:])
                    raise RuntimeError(f"worker {name} left before it claimed a job:\n{tail}")
                if name not in holders or not _in_the_call(procs[name].pid):
                    continue
                row = holders[name]
                os.kill(procs[name].pid, signal.SIGSTOP)
                _stopped(procs[name].pid)
                again = db.execute(
                    "SELECT worker, lease_token FROM jobs WHERE id = ?", (row["id"],)
                ).fetchone()
                waiting.discard(name)
                job = by_zombie[name] = by_id[row["id"]]
                job.zombie = name
                if again["lease_token"] == row["lease_token"]:
                    job.frozen_at = round(now, 2)
                    frozen.add(name)
                    bar.update(1)
                else:  # it had reported already: not a zombie after all
                    os.kill(procs[name].pid, signal.SIGCONT)
            if not waiting and "rescuer" not in procs:
                start("rescuer")  # every first claim is frozen: now someone may take them over
            for name in sorted(frozen):
                job = by_zombie[name]
                row = rows[job.id]
                if job.taken_over_at is None and row["attempts"] >= 2:
                    job.taken_over_at = round(now, 2)
                    bar.update(1)
                if job.taken_over_at is not None and (thaw == "taken" or row["state"] == "done"):
                    os.kill(procs[name].pid, signal.SIGCONT)
                    job.thawed_at = round(now, 2)
                    frozen.discard(name)
            if not waiting and not frozen and all(p.poll() is not None for p in procs.values()):
                break
            time.sleep(POLL)
        else:
            run.timed_out = True
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                with contextlib.suppress(OSError):
                    os.kill(proc.pid, signal.SIGCONT)
                kill_tree(proc)
        run.seconds = round(time.monotonic() - started, 2)
        try:
            rows = {r["id"]: r for r in db.execute(JOB_ROWS)}
            ledger = db.execute("SELECT job_id, attempt FROM ledger ORDER BY job_id, attempt").fetchall()
        finally:
            db.close()
    run.exit_codes = {name: proc.returncode for name, proc in procs.items()}
    for job in run.jobs:
        r = rows[job.id]
        job.state, job.attempts, job.worker = r["state"], r["attempts"], r["worker"]
        job.last_error = r["last_error"]
        job.ledger = [attempt for job_id, attempt in ledger if job_id == job.id]
        job.reported = job.thawed_at is not None and run.exit_codes.get(job.zombie) == 0
        if job.taken_over and job.reported:
            bar.update(1)
    bar.close()
    return run
