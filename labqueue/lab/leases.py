"""Notebook 02: one job's lease on a fake clock, as a trace, a timeline and a playground.

Each runs on a `JobQueue` class it is given: notebook 02 passes the learner's own, the one
its cells define; without one, the tutorial's (`labqueue.tutorial.jobqueue`, the same code
as those cells).
"""

from __future__ import annotations

import html
import itertools
from dataclasses import asdict, dataclass
from pathlib import Path

import pandas as pd

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..tutorial.jobqueue import Job, JobQueue
from .assets import new_figure
from .scratch import db_path
from .walks import ONE_ROW

LEASE = 30.0
START = 1000.0
WORKERS = ("worker-a", "worker-b")


@dataclass(frozen=True)
class Snapshot:
    """The job's row just after one step of the walk."""

    t: float
    step: str
    result: str
    state: str
    attempts: int
    visible_at: float
    worker: str | None
    token: str | None


def snapshot(q: JobQueue, step: str, result: object = "", job_id: int = 1) -> Snapshot:
    r = q.db.execute(ONE_ROW, (job_id,)).fetchone()
    token = r["lease_token"]
    return Snapshot(
        t=q.clock(),
        step=step,
        result=str(result),
        state=r["state"],
        attempts=r["attempts"],
        visible_at=r["visible_at"],
        worker=r["worker"],
        token=token[:8] if token else None,
    )


def trace_leases(folder: str | Path | None = None, queue_class: type | None = None) -> list[Snapshot]:
    """The tutorial's lease walk on `queue_class` (the learner's JobQueue; the tutorial's
    when None), keeping the row after every step."""
    clock = FakeClock(START)
    q = (queue_class or JobQueue)(db_path("leases_trace", folder), lease_seconds=LEASE, clock=clock)
    try:
        q.enqueue("email", {"to": "ada@example.com"})
        trace = [snapshot(q, "enqueue")]

        def attempt_by(worker: str) -> Job | None:
            jobs = q.claim(worker)  # a claim that hands out nothing is traced as []
            trace.append(snapshot(q, f"{worker} claims", f"attempt {jobs[0].attempts}" if jobs else jobs))
            return jobs[0] if jobs else None

        holders = {"worker-a": attempt_by("worker-a")}
        clock.now = START + 10  # inside worker-a's lease: the claim hands out nothing
        too_early = q.claim("worker-b")
        trace.append(snapshot(q, "worker-b claims", too_early))
        clock.now = START + LEASE + 1  # a second after the lease ended
        holders["worker-b"] = attempt_by("worker-b")
        for worker, job in holders.items():  # worker-a's late report first, then worker-b's
            if job is not None:
                trace.append(snapshot(q, f"{worker} completes", q.complete(job)))
    finally:
        q.db.close()
    return trace


def connection_settings(q: JobQueue) -> pd.DataFrame:
    """What a queue's connection `q.db` is set to, read back from SQLite itself, with the reason."""
    db = q.db
    (busy_ms,) = db.execute("PRAGMA busy_timeout").fetchone()  # what connect's timeout= set
    rows = [
        (
            "isolation_level",
            repr(db.isolation_level),
            "autocommit: Python opens no transaction behind our back; _tx() says where each begins and ends",
        ),
        (
            "timeout (s)",
            f"{busy_ms / 1000:g}",
            "how long a write waits for the write lock before giving up (Python's default: 5 s)",
        ),
        (
            "journal_mode",
            db.execute("PRAGMA journal_mode").fetchone()[0],
            "write-ahead log: readers do not block the writer, nor the writer the readers",
        ),
        (
            "synchronous",
            {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}[db.execute("PRAGMA synchronous").fetchone()[0]],
            "NORMAL: fewer waits for the disk; a power cut may lose the last commits (notebook 09)",
        ),
    ]
    return pd.DataFrame(rows, columns=["setting", "value", "why"]).set_index("setting")


def trace_frame(trace: list[Snapshot]) -> pd.DataFrame:
    return pd.DataFrame([asdict(s) for s in trace])


def plot_lease_timeline(trace: list[Snapshot], until: float = 1070.0):
    """The job's lease deadline (visible_at) against fake time, with the state as
    coloured bands. Wherever the clock line lies above the deadline, a claim may
    take the job."""
    fig, ax = new_figure()
    ts = [s.t for s in trace] + [until]
    deadlines = [s.visible_at for s in trace]
    ax.step(
        [*ts[:-1], until], [*deadlines, deadlines[-1]], where="post", color="tab:red", label="lease deadline"
    )
    ax.plot([ts[0], until], [ts[0], until], color="gray", linestyle=":", label="now (the clock)")
    colors = {"queued": "#dddddd", "worker-a": "#9ecae1", "worker-b": "#a1d99b", "done": "#fdd49e"}
    for start, end, label in state_bands(trace, until):
        ax.axvspan(start, end, color=colors.get(label, "white"), alpha=0.6, linewidth=0)
        ax.text(
            (start + end) / 2,
            0.97,
            label.replace(" ", "\n"),
            ha="center",
            va="top",
            fontsize=7,
            transform=ax.get_xaxis_transform(),
        )
    for s in trace:
        refused = s.result in ("[]", "False")
        if refused or s.result.startswith("attempt"):
            ax.plot(s.t, s.visible_at, "kx" if refused else "ko", markersize=7 if refused else 4)
            ax.annotate(
                f"{s.step}: {s.result}",
                (s.t, s.visible_at),
                textcoords="offset points",
                xytext=(4, -12 if refused else 3),
                fontsize=7,
            )
    ax.set_xlim(ts[0] - 2, until)
    ax.set_xlabel("fake time (s)")
    ax.set_ylabel("lease deadline,\nvisible_at (s)")
    ax.legend(loc="lower right", fontsize=7)
    return fig


def state_bands(trace: list[Snapshot], until: float) -> list[tuple[float, float, str]]:
    """(start, end, label) spans: queued, the holder's live lease, an expired lease
    that any worker may claim, done. Zero-length spans are left out."""
    marks = [(s.t, s.worker if s.state == "running" else s.state, s.visible_at) for s in trace]
    marks.append((until, "", until))
    bands: list[tuple[float, float, str]] = []
    for (start, label, deadline), (end, _, _) in itertools.pairwise(marks):
        spans = [(start, end, label)]
        if label not in ("queued", "done") and deadline < end:  # the lease ran out in this span
            spans = [(start, deadline, label), (deadline, end, "expired, claimable")]
        for a, b, name in spans:
            if b <= a:
                continue
            if bands and bands[-1][2] == name and bands[-1][1] == a:
                bands[-1] = (bands[-1][0], b, name)
            else:
                bands.append((a, b, name))
    return bands


class LeasePlayground:
    """One job on a fake clock that the learner drives: move the clock, claim as
    worker-a or worker-b, complete as either. Each worker keeps the last Job its
    claim returned, so a stale worker completes with its stale token."""

    def __init__(
        self, folder: str | Path | None = None, lease_seconds: float = LEASE, queue_class: type | None = None
    ) -> None:
        self.folder = folder
        self.lease_seconds = lease_seconds
        self.queue_class = queue_class or JobQueue
        self.q: JobQueue | None = None
        self.reset()

    def close(self) -> None:
        if self.q is not None:
            self.q.db.close()
            self.q = None

    def reset(self) -> str:
        self.close()
        self.clock = FakeClock(START)
        self.q = self.queue_class(
            db_path("lease_playground", self.folder), lease_seconds=self.lease_seconds, clock=self.clock
        )
        self.q.enqueue("email", {"to": "ada@example.com"})
        self.held: dict[str, Job] = {}
        self.log: list[str] = []
        return self._say(
            f"t={self.clock.now:.0f}  a fresh job is queued; leases last {self.lease_seconds:.0f} s"
        )

    def advance(self, seconds: float) -> str:
        if not isinstance(seconds, (int, float)) or seconds <= 0:
            raise InvalidArgument(f"the clock only moves forward here, got {seconds!r} seconds")
        self.clock.advance(seconds)
        return self._say(f"t={self.clock.now:.0f}  clock moved +{seconds:g} s")

    def claim(self, worker: str) -> str:
        self._check(worker)
        jobs = self.q.claim(worker)
        if not jobs:
            return self._say(f"t={self.clock.now:.0f}  {worker} claims: [] (nothing visible)")
        self.held[worker] = jobs[0]
        return self._say(
            f"t={self.clock.now:.0f}  {worker} claims: attempt {jobs[0].attempts}, "
            f"lease until {jobs[0].lease_expires_at:.0f}"
        )

    def complete(self, worker: str) -> str:
        self._check(worker)
        job = self.held.get(worker)
        if job is None:
            return self._say(f"t={self.clock.now:.0f}  {worker} holds no claim to complete")
        return self._say(f"t={self.clock.now:.0f}  {worker} complete(): {self.q.complete(job)}")

    def row(self) -> dict[str, object]:
        return asdict(snapshot(self.q, "now"))

    def _check(self, worker: str) -> None:
        if worker not in WORKERS:
            raise InvalidArgument(f"worker must be one of {', '.join(WORKERS)}, got {worker!r}")

    def _say(self, line: str) -> str:
        self.log.append(line)
        return line

    def html(self) -> str:
        r = self.row()
        claimable = r["state"] in ("queued", "running") and r["visible_at"] <= self.clock.now
        cells = "".join(
            f"<td style='padding:2px 8px'>{html.escape(str(r[k]))}</td>"
            for k in ("state", "attempts", "visible_at", "worker", "token")
        )
        heads = "".join(
            f"<th style='padding:2px 8px'>{k}</th>"
            for k in ("state", "attempts", "visible_at", "worker", "token")
        )
        log = "<br>".join(html.escape(line) for line in self.log[-6:])
        return (
            f"<b>now: t={self.clock.now:.0f}</b> &nbsp; claimable: <b>{'yes' if claimable else 'no'}</b>"
            f"<table><tr>{heads}</tr><tr>{cells}</tr></table>"
            f"<div style='font-family:monospace;font-size:90%'>{log}</div>"
        )


def lease_panel(folder: str | Path | None = None, queue_class: type | None = None):
    """Buttons that drive a LeasePlayground on `queue_class` (the learner's JobQueue), and
    the job's row shown live."""
    return LeasePanel(LeasePlayground(folder, queue_class=queue_class)).widget


class LeasePanel:
    def __init__(self, playground: LeasePlayground) -> None:
        import ipywidgets as w

        self.playground = playground
        self.view = w.HTML(playground.html())
        self.buttons: dict[str, w.Button] = {}
        actions = {
            "+1 s": lambda: playground.advance(1),
            "+10 s": lambda: playground.advance(10),
            "+30 s": lambda: playground.advance(30),
            "worker-a claims": lambda: playground.claim("worker-a"),
            "worker-b claims": lambda: playground.claim("worker-b"),
            "worker-a completes": lambda: playground.complete("worker-a"),
            "worker-b completes": lambda: playground.complete("worker-b"),
            "reset": playground.reset,
        }
        for label, action in actions.items():
            button = w.Button(description=label, layout=w.Layout(width="auto"))
            button.on_click(lambda _, act=action: self._do(act))
            self.buttons[label] = button
        b = self.buttons
        self.widget = w.VBox(
            [
                w.HBox([b["+1 s"], b["+10 s"], b["+30 s"], b["reset"]]),
                w.HBox([b["worker-a claims"], b["worker-a completes"]]),
                w.HBox([b["worker-b claims"], b["worker-b completes"]]),
                self.view,
            ]
        )

    def _do(self, action) -> None:
        try:
            action()
        except KeyboardInterrupt:  # the kernel was interrupted mid-step: say so, keep the panel usable
            self.view.value = "<b>interrupted</b>: press a button to go on, or <b>reset</b><br>" + (
                self.playground.html()
            )
            return
        self.view.value = self.playground.html()
