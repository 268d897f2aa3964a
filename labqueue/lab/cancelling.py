"""Notebook 16, part 1: cancelling a job that is queued or running, and the schema version
that made room for the new state.

The cancel board runs a few slow jobs with two workers inside the kernel, on a FakeClock that
moves one second per step, so a cancellation lands exactly when you choose and the story
replays the same way every time. The workers call the queue as the real worker loop does
(claim, heartbeat, settle), so what they are told is what a worker process would be told.
"""

from __future__ import annotations

import contextlib
import html
import re
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..clock import FakeClock
from ..drivers.sqlite import sql
from ..errors import CannotCancel, InvalidArgument, JobNotFound
from ..keepalive import KeepAlive
from ..queue import Finished, Job, JobQueue
from .assets import new_figure
from .demo_handlers import LEDGER_TABLE, ledger_effect
from .scratch import db_path
from .tables import html_table
from .walks import Folder

# -- schema version 2: an old file gains the state --------------------------------------

# The states CHECK as schema versions 1 to 3 wrote it (an IN list) and as version 4 does
# (comparisons joined by OR; labqueue/drivers/sqlite/sql.py says why).
STATES_IN_LIST = re.compile(r"CHECK\s*\(\s*state\s+IN\s*\(([^)]*)\)\s*\)", re.I)
STATES_COMPARED = re.compile(r"CHECK\s*\(\s*(state\s*=\s*'\w+'(?:\s+OR\s+state\s*=\s*'\w+')*)\s*\)", re.I)
LEDGER_COUNT = "SELECT job_id, COUNT(*) FROM ledger GROUP BY job_id"


def _whole(name: str, value: object, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidArgument(f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return value


def allowed_states(db: sqlite3.Connection) -> list[str]:
    """The states the jobs table's CHECK constraint allows, read from the file's own schema."""
    create = db.execute(sql.JOBS_OBJECT).fetchone()[1]
    if (listed := STATES_IN_LIST.search(create)) is not None:
        return [s.strip().strip("'") for s in listed.group(1).split(",")]
    if (compared := STATES_COMPARED.search(create)) is not None:
        return re.findall(r"'(\w+)'", compared.group(1))
    return []


def version1_file(path: str | Path) -> Path:
    """A queue file as schema version 1 left it (the tutorial's table and states), with
    three finished and waiting jobs in it, written with plain sqlite3."""
    with contextlib.closing(sqlite3.connect(path)) as db, db:
        db.executescript(sql.TABLE_V1 + sql.INDEXES_V1)
        rows = [("report", "done", 5.0), ("report", "queued", None), ("email", "dead", 9.0)]
        for kind, state, finished in rows:
            db.execute(
                "INSERT INTO jobs (kind, payload, state, visible_at, created_at, finished_at)"
                " VALUES (?, '{}', ?, 0, 0, ?)",
                (kind, state, finished),
            )
        db.execute("PRAGMA user_version = 1")
    return Path(path)


def _file_facts(path: Path) -> dict[str, Any]:
    with contextlib.closing(sqlite3.connect(path)) as db:
        return {
            "user_version": db.execute(sql.USER_VERSION).fetchone()[0],
            "states allowed": allowed_states(db),
            "rows": [tuple(r) for r in db.execute("SELECT id, kind, state FROM jobs ORDER BY id")],
        }


def upgrade_old_file(folder: Folder = None) -> list[str]:
    """Open a version-1 file with today's JobQueue and print what the upgrade changed and kept."""
    path = version1_file(db_path("cancel_v1_file", folder))
    before = _file_facts(path)
    JobQueue(path).close()  # opening it runs the migration, in one write transaction
    after = _file_facts(path)
    lines = []
    for label, facts in (("before", before), ("after JobQueue(path)", after)):
        lines.append(f"{label}: user_version {facts['user_version']}, states {facts['states allowed']}")
    lines.append(f"rows before: {before['rows']}")
    lines.append(f"rows after:  {after['rows']}")
    for line in lines:
        print(line)
    return lines


# -- the fake-clock story ------------------------------------------------------------------


def cancel_walk(folder: Folder = None) -> dict[int, str]:
    """Three jobs on a FakeClock: one cancelled while queued, one cancelled while running
    (its heartbeat and its completion are refused, its effect never lands), one finished
    before anyone tried. Prints each step; returns the final state of each job."""
    clock = FakeClock(0.0)
    with JobQueue(db_path("cancel_walk", folder), clock=clock, lease_seconds=30, wake=False) as q:
        q.db.execute(LEDGER_TABLE)
        a, b, c = (q.enqueue("report", {"n": n}) for n in range(3))
        print(f"t=0   enqueue jobs {a}, {b}, {c}")
        print(f"t=0   cancel({a}) -> {q.cancel(a)!r}: it will never run")
        held = q.claim("w1", limit=2)
        print(f"t=0   w1 claims jobs {[job.id for job in held]}")
        running, last = held
        clock.advance(5)
        print(f"t=5   cancel({running.id}) -> {q.cancel(running.id)!r}")
        print(f"t=10  w1 heartbeat for job {running.id} -> {q.heartbeat(running)}")
        clock.advance(5)
        outcomes, _ = q.settle(
            [Finished(running, effect=ledger_effect(running)), Finished(last, effect=ledger_effect(last))]
        )
        print(f"t=10  w1 reports both done: settle -> {outcomes}")
        try:
            q.cancel(last.id)
        except CannotCancel as exc:
            print(f"t=10  cancel({last.id}) -> CannotCancel: {exc}")
        states = {job_id: q.job(job_id).state for job_id in (a, b, c)}
        ledger = [job_id for job_id, _ in q.db.execute(LEDGER_COUNT)]
        print(f"states {states}; ledger rows for jobs {ledger}")
    return states


def keepalive_notices(
    lease: float = 0.3, cancel_after: float = 0.15, folder: Folder = None
) -> dict[str, Any]:
    """Real time: a KeepAlive renews a job's lease every lease/6 s until the job is cancelled.
    Returns how many heartbeats it sent and how long after the cancel it noticed."""
    path = db_path("cancel_keepalive", folder)
    with JobQueue(path, lease_seconds=lease, wake=False) as q:
        job_id = q.enqueue("report", {})
        (job,) = q.claim("w1")
        with KeepAlive(path, job, lease_seconds=lease, interval=lease / 6) as hb:
            time.sleep(cancel_after)
            was = q.cancel(job_id)
            cancelled_at = time.monotonic()
            noticed = hb.lost.wait(5 * lease)
            noticed_after = time.monotonic() - cancelled_at
        return {
            "cancelled while": was,
            "heartbeats accepted before": hb.beats,
            "KeepAlive lost": noticed,
            "KeepAlive cancelled": hb.cancelled.is_set(),
            "noticed after (s)": round(noticed_after, 3),
            "state": q.job(job_id).state,
            "completion accepted afterwards": q.complete(job),
        }


# -- the cancel board -----------------------------------------------------------------------


@dataclass
class Held:
    """A job a board worker is working on, and how many seconds of its work are done."""

    job: Job
    done_s: int = 0


@dataclass
class Span:
    """One stretch of a worker on a job, for the timeline: from its claim to how it ended."""

    job_id: int
    worker: str
    start: float
    end: float | None = None
    how: str = "running"


class CancelBoard:
    """`jobs` slow jobs and `workers` workers on one queue with a fake clock.

    Each step moves the clock one second. An idle worker claims the next job. A busy one
    works one second on it; every `beat_every` seconds of work it sends a heartbeat, and
    once `work_seconds` are done it reports the job done with a ledger effect through
    settle(), the group-commit report the worker loop uses. A refused heartbeat or report
    means the worker drops the job. `cancel(id)` calls JobQueue.cancel between steps."""

    def __init__(
        self,
        jobs: int = 5,
        workers: int = 2,
        *,
        work_seconds: int = 4,
        beat_every: int = 2,
        lease: float = 3.0,
        folder: Folder = None,
        name: str = "cancel_board",
    ) -> None:
        self.n_jobs = _whole("jobs", jobs, 1, 30)
        self.n_workers = _whole("workers", workers, 1, 8)
        self.work_seconds = _whole("work_seconds", work_seconds, 1, 60)
        self.beat_every = _whole("beat_every", beat_every, 1, 60)
        self.lease = lease
        self.folder, self.name = folder, name
        self.listeners: list[Callable[[], None]] = []
        self._lock = threading.RLock()
        self.q: JobQueue | None = None
        self.reset()

    def reset(self) -> None:
        """Fresh jobs, idle workers, the clock back at 0."""
        with self._lock:
            if self.q is not None:
                self.q.close()
            self.clock = FakeClock(0.0)
            self.q = JobQueue(
                db_path(self.name, self.folder), clock=self.clock, lease_seconds=self.lease, wake=False
            )
            self.q.db.execute(LEDGER_TABLE)
            self.ids = [self.q.enqueue("report", {"n": n}) for n in range(self.n_jobs)]
            self.held: dict[str, Held | None] = {f"w{i + 1}": None for i in range(self.n_workers)}
            self.notes: dict[int, str] = {}
            self.worked: dict[int, int] = {}  # seconds of work done, per job
            self.cancels: dict[int, tuple[float, str]] = {}
            self.spans: list[Span] = []
            self.log: list[str] = []
        self._changed()

    @property
    def now(self) -> float:
        return self.clock.now

    def _say(self, line: str) -> str:
        self.log.append(f"t={self.now:<3g} {line}")
        return line

    def _note(self, job_id: int, text: str) -> None:
        self.notes[job_id] = f"{self.notes[job_id]}; {text}" if job_id in self.notes else text

    def _changed(self) -> None:
        for listener in list(self.listeners):
            listener()

    def _span(self, job_id: int) -> Span:
        return next(s for s in reversed(self.spans) if s.job_id == job_id)

    def _drop(self, worker: str, how: str) -> None:
        held = self.held[worker]
        assert held is not None
        span = self._span(held.job.id)
        span.end, span.how = self.now, how
        self.held[worker] = None

    def step(self) -> list[str]:
        """One second: every worker claims, works, beats or reports. Returns what happened."""
        assert self.q is not None
        with self._lock:
            first = len(self.log)
            self.clock.advance(1.0)
            for worker, held in self.held.items():
                if held is None:
                    got = self.q.claim(worker)
                    if got:
                        self.held[worker] = Held(got[0])
                        self.spans.append(Span(got[0].id, worker, self.now))
                        self._say(f"{worker} claims job {got[0].id}")
                    continue
                held.done_s += 1
                job = held.job
                self.worked[job.id] = held.done_s
                if held.done_s >= self.work_seconds:
                    (outcome,), _ = self.q.settle([Finished(job, effect=ledger_effect(job))])
                    self._say(f"{worker} reports job {job.id} done: settle -> {outcome!r}")
                    if outcome == "cancelled":
                        self._note(job.id, f"report refused at t={self.now:g}, effect not committed")
                    else:
                        self._note(job.id, "done")
                    self._drop(worker, outcome)
                elif held.done_s % self.beat_every == 0:
                    if self.q.heartbeat(job):
                        self._say(f"{worker} heartbeat for job {job.id}: accepted")
                    else:
                        state = self.q.job(job.id).state
                        self._say(f"{worker} heartbeat for job {job.id}: refused (it is {state}), dropped")
                        self._note(job.id, f"heartbeat refused at t={self.now:g}, worker let go")
                        self._drop(worker, state)
            lines = self.log[first:]
        self._changed()
        return lines

    def cancel(self, job_id: int) -> str:
        """JobQueue.cancel(job_id), told in words: what it was cancelled in, or why not."""
        assert self.q is not None
        with self._lock:
            try:
                was = self.q.cancel(job_id)
            except (CannotCancel, JobNotFound) as exc:
                line = self._say(f"cancel({job_id}) -> {type(exc).__name__}: {exc}")
            else:
                self.cancels[job_id] = (self.now, was)
                how = "queued: never runs" if was == "queued" else "running"
                self._note(job_id, f"cancelled at t={self.now:g} while {how}")
                line = self._say(f"cancel({job_id}) -> {was!r}")
        self._changed()
        return line

    def busy(self) -> bool:
        """Whether a step can still change anything."""
        assert self.q is not None
        counts = self.q.counts()
        return counts["queued"] + counts["running"] > 0 or any(self.held.values())

    def run_to_end(self, max_steps: int = 500) -> int:
        """Step until every job is finished and every worker idle. Returns the steps taken."""
        steps = 0
        while self.busy() and steps < max_steps:
            self.step()
            steps += 1
        return steps

    def ledger(self) -> dict[int, int]:
        """Ledger rows per job: the effects that were committed."""
        assert self.q is not None
        return dict(self.q.db.execute(LEDGER_COUNT).fetchall())

    def rows(self) -> Any:
        """One row per job: its state, who holds it, how far its work is, its ledger rows."""
        import pandas as pd

        assert self.q is not None
        holder = {h.job.id: w for w, h in self.held.items() if h is not None}
        ledger = self.ledger()
        table = []
        for job_id in self.ids:
            record = self.q.job(job_id)
            table.append(
                {
                    "job": job_id,
                    "state": record.state,
                    "worker": holder.get(job_id, ""),
                    "work done": f"{self.worked.get(job_id, 0)}/{self.work_seconds} s",
                    "ledger rows": ledger.get(job_id, 0),
                    "what happened": self.notes.get(job_id, ""),
                }
            )
        return pd.DataFrame(table).set_index("job")

    def close(self) -> None:
        if self.q is not None:
            self.q.close()
            self.q = None


def demo(board: CancelBoard) -> None:
    """The notebook's story on a fresh board: cancel a queued job, a running job before its
    next heartbeat, another between its last heartbeat and its report, then a finished one."""
    board.reset()
    script: list[Callable[[], Any]] = [
        board.step,  # t=1: w1 and w2 claim jobs 1 and 2
        lambda: board.cancel(5),  # still queued: it never runs
        board.step,  # t=2: a second of work each
        lambda: board.cancel(1),  # running, before its heartbeat at t=3
        board.step,  # t=3: w1's heartbeat is refused; w2's is accepted
        board.step,  # t=4: w1 claims job 3; job 2 has done 3 of its 4 s
        lambda: board.cancel(2),  # running, after its last heartbeat
        board.run_to_end,  # job 2's report is refused; jobs 3 and 4 finish
        lambda: board.cancel(3),  # done already
    ]
    for action in script:
        action()
    for line in board.log:
        print(line)


COLOURS = {"done": "#4c72b0", "cancelled": "#c44e52", "running": "#999999", "lost": "#dd8452"}


def plot_board(board: CancelBoard):
    """Each job's life on the board: a bar while a worker held it (blue if it finished done,
    red if the worker learned it was cancelled), and a cross where cancel() was called."""
    fig, ax = new_figure()
    for span in board.spans:
        end = board.now if span.end is None else span.end
        colour = COLOURS.get(span.how, "#999999")
        ax.barh(span.job_id, end - span.start, left=span.start, height=0.5, color=colour, alpha=0.85)
        ax.text(span.start + 0.1, span.job_id, span.worker, va="center", fontsize=8, color="white")
    for job_id, (at, was) in board.cancels.items():
        ax.plot(at, job_id, "kx", markersize=9, markeredgewidth=2)
        ax.annotate(f"cancel ({was})", (at, job_id), xytext=(6, 7), textcoords="offset points", fontsize=8)
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    handles = [
        Patch(color=COLOURS["done"], label="held, reported done"),
        Patch(color=COLOURS["cancelled"], label="held, then refused: cancelled"),
        Line2D([], [], color="k", marker="x", linestyle="", label="cancel() called"),
    ]
    ax.set_yticks(board.ids)
    ax.set_ylim(max(board.ids) + 0.7, min(board.ids) - 0.7)
    ax.set_xlim(0, max(board.now, 1) + 1)
    ax.set_xlabel("fake time (s)")
    ax.set_ylabel("job id")
    ax.set_title(f"{board.n_jobs} jobs, {board.n_workers} workers, {board.work_seconds} s of work each")
    ax.legend(handles=handles, loc="upper right", fontsize="small")
    return fig


def cancel_panel(board: CancelBoard):
    """The board live: pick a job and press Cancel job; step the clock; start over."""
    import ipywidgets as widgets

    choice = widgets.Dropdown(description="job", layout=widgets.Layout(width="150px"))
    cancel = widgets.Button(description="Cancel job", button_style="danger", icon="times")
    step = widgets.Button(description="Step 1 s", icon="step-forward")
    finish = widgets.Button(description="Run to the end", icon="fast-forward")
    fresh = widgets.Button(description="New jobs", icon="refresh")
    status = widgets.HTML()
    table = widgets.HTML()
    log = widgets.HTML()

    def show() -> None:
        ids = list(board.ids)
        if list(choice.options) != ids:
            keep = choice.value if choice.value in ids else ids[0]
            choice.options = ids
            choice.value = keep
        counts = board.q.counts() if board.q is not None else {}
        live = ", ".join(f"{k} {v}" for k, v in counts.items() if v)
        status.value = f"<b>t = {board.now:g} s</b> &nbsp; {live}"
        table.value = html_table(board.rows().reset_index())
        tail = html.escape("\n".join(board.log[-8:]) or "(nothing yet: press Step 1 s)")
        log.value = f"<pre style='font-size:11px; margin:0'>{tail}</pre>"

    def guarded(action: Callable[[], Any]) -> Callable[[Any], None]:
        def on_click(_: Any) -> None:
            try:
                action()
            except Exception as exc:  # shown, never lost in the kernel log
                why = html.escape(f"{type(exc).__name__}: {exc}")
                status.value = f"<b style='color:#b00'>failed:</b> {why}"

        return on_click

    cancel.on_click(guarded(lambda: board.cancel(choice.value)))
    step.on_click(guarded(board.step))
    finish.on_click(guarded(board.run_to_end))
    fresh.on_click(guarded(board.reset))
    board.listeners.append(show)
    show()
    controls = widgets.HBox([choice, cancel, step, finish, fresh])
    return widgets.VBox([controls, status, table, log])
