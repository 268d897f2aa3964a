"""Notebook 03: a real worker is killed mid-job, and the lease passes its job on to
a second worker once it runs out.

Both workers run the tutorial's worker loop (``python -m labqueue.tutorial.process``),
on the learner's code when ``code`` names their workspace (``ws.folder``). What happened
is read back from the jobs table: ``visible_at - lease`` is when each claim was made and
``finished_at`` when the job was done, so the gap between the two claims comes from the
database, not from how often we happened to look. A second worker that never gets the
job (a claim that ignores expired leases, a lease that does not reach the worker) ends
the run after a while instead of raising, so the notebook's Check can say what broke.
"""

from __future__ import annotations

import sqlite3
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import pandas as pd

from ..errors import InvalidArgument
from ..pool import stop_processes
from ..procs import kill_tree
from ..tutorial import process
from ..tutorial.jobqueue import JobQueue
from .assets import new_figure
from .scratch import db_path

LEASE = 2.0
STALLED_REPORT = {"stall_first_attempt": True}  # attempt 1 hangs for 60 s; later ones take 0.2 s
ROW = "SELECT state, attempts, worker, visible_at, finished_at FROM jobs WHERE id = 1"
Code = str | Path | None  # a workspace folder holding the learner's modules, or the course's code


def enqueue_stalled_report(path: Path, lease: float) -> None:
    """A fresh database holding one report job whose first attempt hangs."""
    q = JobQueue(path, lease_seconds=lease)
    try:
        q.enqueue("report", STALLED_REPORT)
    finally:
        q.db.close()


@dataclass(frozen=True)
class Observation:
    """The job's row as the watcher saw it, `t` seconds after the start."""

    t: float
    state: str
    attempts: int
    worker: str | None


@dataclass
class CrashRun:
    lease: float
    started: float  # wall-clock time.time() of the start; every other time is relative to it
    observations: list[Observation] = field(default_factory=list)
    killed_at: float | None = None
    second_started_at: float | None = None
    claims: list[float] = field(default_factory=list)  # per attempt, from visible_at - lease
    done_at: float | None = None  # from finished_at
    killed_pids: list[int] = field(default_factory=list)
    killed_after: int = 0  # how many observations were made before the kill
    lease_ends: list[float] = field(default_factory=list)  # per attempt, the stored visible_at
    waited: float = 0.0  # how long the run waited for w2 to finish the job

    @property
    def first_lease(self) -> float:
        """How long w1's claim leased the job for, as its worker set it: the deadline it
        stored less the moment the watcher first saw the claim (a hair under the lease)."""
        seen = next(o.t for o in self.observations if o.state == "running")
        return self.lease_ends[0] - seen

    @property
    def finished(self) -> bool:
        """True when w2 claimed the job and finished it before the run gave up waiting."""
        return self.done_at is not None and len(self.claims) >= 2

    @property
    def gap(self) -> float:
        """Seconds between the first claim and the second: the time the job waited."""
        if len(self.claims) < 2:
            raise ValueError(f"w2 never claimed the job (claims at {self.claims}): there is no gap")
        return self.claims[1] - self.claims[0]

    def lines(self) -> list[str]:
        """The run as a timeline: every change of the job's row, and the kill."""
        said = [
            (o.t, f"state={o.state:<8} attempts={o.attempts} worker={o.worker}") for o in self.observations
        ]
        if self.killed_at is not None:
            said.insert(self.killed_after, (self.killed_at, "killing w1 while it is inside the handler"))
        out = [f"lease is {self.lease:g} seconds; attempt 1 will hang inside the handler"]
        out += [f"t={t:4.1f}s  {what}" for t, what in said]
        if not self.finished:
            out.append(f"w2 did not finish the job: the run gave up after {self.waited:g} s")
        return out

    def frame(self) -> pd.DataFrame:
        return pd.DataFrame([asdict(o) for o in self.observations])

    def events(self) -> pd.DataFrame:
        rows = [
            ("w1 claims the job (attempt 1)", self.claims[0]),
            ("w1 is killed inside the handler", self.killed_at),
            ("w2 starts and polls", self.second_started_at),
            ("w2 claims the job (attempt 2)", self.claims[1] if len(self.claims) > 1 else None),
            ("w2 completes the job", self.done_at),
        ]
        return pd.DataFrame(rows, columns=["event", "t (s)"]).round(2)


class Watcher:
    """Reads the job's row on its own connection and keeps every change."""

    def __init__(self, path: Path, run: CrashRun) -> None:
        self.run = run
        self.last: tuple | None = None
        self.deadlines: dict[int, float] = {}  # attempt -> visible_at of that claim
        db = sqlite3.connect(str(path), timeout=30.0)  # its own connection: it only reads
        db.row_factory = sqlite3.Row
        self.db = db

    def look(self) -> sqlite3.Row:
        r = self.db.execute(ROW).fetchone()
        if r["state"] == "running":
            self.deadlines[r["attempts"]] = r["visible_at"]
        seen = (r["state"], r["attempts"], r["worker"])
        if seen != self.last:  # keep changes only: one observation per new (state, attempts, worker)
            self.last = seen
            self.run.observations.append(Observation(round(time.time() - self.run.started, 3), *seen))
        return r

    def until(self, done, timeout: float, what: str) -> sqlite3.Row:
        deadline = time.monotonic() + timeout
        while True:
            r = self.look()
            if done(r):
                return r
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {timeout:.0f} s for {what}; the job row is {dict(r)}")
            time.sleep(0.02)

    def close(self) -> None:
        self.db.close()


def crash_recovery(
    lease: float = LEASE, folder: str | Path | None = None, timeout: float = 10.0, code: Code = None
) -> CrashRun:
    """One stalling report job; worker w1 claims it and is killed inside the handler;
    worker w2, started right after, takes it once the lease runs out. Both run the
    tutorial's worker loop on the code in folder `code` (the course's without it).

    Raises TimeoutError when w1 has not claimed the job after `timeout` seconds (with
    what w1 wrote to stderr). When w2 has not finished the job `lease + timeout` seconds
    after the kill, the run ends and says so (`finished` is False)."""
    if not isinstance(lease, (int, float)) or not 0.2 <= lease <= 30:
        raise InvalidArgument(f"lease must be between 0.2 and 30 seconds, got {lease!r}")
    path = db_path("crash", folder)
    enqueue_stalled_report(path, lease)
    run = CrashRun(lease=float(lease), started=time.time())
    watcher = Watcher(path, run)
    w1 = w2 = None
    try:
        w1, w1_log = _start(path, "w1", lease, 2.0, code)
        try:
            watcher.until(lambda r: r["state"] == "running", timeout, "w1 to claim the job")
        except TimeoutError as exc:
            raise TimeoutError(f"{exc}{_said(w1_log)}") from None
        run.killed_at = time.time() - run.started
        run.killed_after = len(run.observations)
        run.killed_pids = kill_tree(w1)
        w2, _ = _start(path, "w2", lease, lease + timeout, code)
        run.second_started_at = time.time() - run.started
        run.waited = lease + timeout
        try:
            final = watcher.until(lambda r: r["state"] == "done", run.waited, "w2 to finish the job")
        except TimeoutError:
            final = None
    finally:
        watcher.close()
        for proc in (w1, w2):
            if proc is not None:
                stop(proc)
    deadlines = dict(watcher.deadlines)
    if final is not None:
        # A completion leaves visible_at alone, so the final row still holds the last
        # claim's deadline; the first one the watcher saw while w1 held the job.
        deadlines[final["attempts"]] = final["visible_at"]
        run.done_at = final["finished_at"] - run.started
    # Kept unrounded: the second claim follows the first one's deadline by about a
    # millisecond (0.8-1.6 ms measured), which rounding each time to the millisecond could
    # turn into a gap a hair under the lease (the tables and the plot round for display).
    run.lease_ends = [deadlines[n] - run.started for n in sorted(deadlines)]
    run.claims = [end - lease for end in run.lease_ends]
    return run


def _start(
    path: Path, name: str, lease: float, idle_exit: float, code: Code
) -> tuple[subprocess.Popen, Path]:
    """One tutorial worker process; what it writes to stderr goes to a file beside the database."""
    log = path.with_name(f"{path.stem}-{name}.stderr")
    with log.open("wb") as err:
        proc = process.start_worker(path, name, lease, idle_exit, code=code, stderr=err)
    return proc, log


def _said(log: Path, lines: int = 8) -> str:
    """The last lines a worker wrote to stderr, to explain a run that went wrong."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    return "\nthe worker said:\n" + "\n".join(text.splitlines()[-lines:]) if text else ""


def stop(proc: subprocess.Popen, grace: float = 5.0) -> None:
    """A warm stop (SIGTERM lets the current job finish), then a hard kill if needed."""
    stop_processes([proc], grace)


STATE_COLORS = {"queued": "#bbbbbb", "w1": "tab:blue", "w2": "tab:green", "done": "tab:orange"}


def job_spans(run: CrashRun, end: float) -> list[tuple[float, float, str]]:
    """(start, end, label) of the job's state over time: queued, held by w1 or w2, done."""
    marks = [(o.t, o.worker if o.state == "running" else o.state) for o in run.observations]
    spans = []
    for (t, label), (t_next, _) in zip(marks, [*marks[1:], (end, "")], strict=True):
        if t_next > t:
            spans.append((t, t_next, label))
    return spans


def plot_crash(run: CrashRun):
    """Two worker lanes and the job's state over real time, with the lease gap marked."""
    if not run.finished:
        return _plot_unfinished(run)
    end = (run.done_at or run.observations[-1].t) + 0.4
    claim1, claim2 = run.claims[0], run.claims[1]
    fig, ax = new_figure()
    ax.axvspan(claim1, claim2, color="tab:red", alpha=0.08, linewidth=0)
    h = 0.5
    ax.broken_barh([(claim1, run.killed_at - claim1)], (2 - h / 2, h), color="tab:blue")
    ax.broken_barh(
        [(run.killed_at, claim1 + run.lease - run.killed_at)],
        (2 - h / 2, h),
        facecolor="white",
        edgecolor="tab:blue",
        hatch="///",
    )
    ax.text(run.killed_at + 0.05, 2 + h / 2 + 0.05, "killed; its lease still holds the job", fontsize=7)
    ax.broken_barh([(run.second_started_at, claim2 - run.second_started_at)], (1 - h / 2, h), color="#c7e9c0")
    ax.text(run.second_started_at + 0.05, 1 + h / 2 + 0.05, "polling: nothing claimable", fontsize=7)
    ax.broken_barh([(claim2, run.done_at - claim2)], (1 - h / 2, h), color="tab:green")
    for start, stop_, label in job_spans(run, end):
        ax.broken_barh([(start, stop_ - start)], (-h / 2, h), color=STATE_COLORS.get(label, "white"))
        if stop_ - start < 0.08 * end:  # too narrow to hold a label
            continue
        ax.text(
            (start + stop_) / 2,
            0,
            "running" if label in ("w1", "w2") else label,
            ha="center",
            va="center",
            fontsize=7,
            color="white" if label in ("w1", "w2") else "black",
        )
    ax.axvline(run.killed_at, color="tab:red", linewidth=1)
    ax.annotate(
        "", xy=(claim2, -0.75), xytext=(claim1, -0.75), arrowprops={"arrowstyle": "<->", "color": "tab:red"}
    )
    ax.text(
        (claim1 + claim2) / 2,
        -0.7,
        f"gap {run.gap:.2f} s (lease {run.lease:g} s)",
        ha="center",
        va="bottom",
        fontsize=8,
        color="tab:red",
    )
    ax.set_yticks([2, 1, 0], ["worker w1", "worker w2", "job 1"])
    ax.set_ylim(-1.0, 2.7)
    ax.set_xlim(0, end)
    ax.set_xlabel("time since the start (s)")
    return fig


def _plot_unfinished(run: CrashRun):
    """The run where w2 never got the job: the job's state over time, and the wait."""
    polled = run.second_started_at
    end = polled + run.waited if polled is not None else run.observations[-1].t + 1
    fig, ax = new_figure()
    h = 0.5
    for start, stop_, label in job_spans(run, end):
        ax.broken_barh([(start, stop_ - start)], (-h / 2, h), color=STATE_COLORS.get(label, "white"))
    if polled is not None:
        ax.broken_barh([(polled, end - polled)], (1 - h / 2, h), color="#c7e9c0")
        ax.text(polled + 0.05, 1 + h / 2 + 0.05, "polling: nothing claimable", fontsize=7)
    if run.lease_ends and run.lease_ends[0] < end:
        ax.axvline(run.lease_ends[0], color="gray", linestyle=":", linewidth=1)
        ax.text(run.lease_ends[0], 1.6, " w1's lease ends", fontsize=7)
    elif run.lease_ends:
        ax.text(end, 1.6, f"w1's lease ends at t={run.lease_ends[0]:.1f} s ", fontsize=7, ha="right")
    ax.set_title(f"w2 did not get the job in {run.waited:g} s", fontsize=9, color="tab:red")
    ax.set_yticks([1, 0], ["worker w2", "job 1"])
    ax.set_ylim(-0.8, 2.0)
    ax.set_xlim(0, end)
    ax.set_xlabel("time since the start (s)")
    return fig


class CrashLab:
    """The playground behind the panel: one stalling job, and workers the learner
    starts and kills. Every call is plain Python, so tests drive it directly."""

    def __init__(self, folder: str | Path | None = None, lease: float = LEASE, code: Code = None) -> None:
        self.folder = folder
        self.code = code  # the workers run the tutorial's loop on this workspace's code
        self.procs: dict[str, subprocess.Popen] = {}
        self.killed: set[str] = set()
        self.log: list[str] = []
        self.new_job(lease)

    def new_job(self, lease: float | None = None) -> str:
        """Stop every worker, then start over with one fresh stalling job."""
        if lease is not None:
            if not isinstance(lease, (int, float)) or not 0.2 <= lease <= 60:
                raise InvalidArgument(f"lease must be between 0.2 and 60 seconds, got {lease!r}")
            self.lease = float(lease)
        self.close()
        self.procs, self.killed, self.log = {}, set(), []
        self.path = db_path("crash_panel", self.folder)
        enqueue_stalled_report(self.path, self.lease)
        self.started = time.time()
        return self._say(f"a fresh job is queued; workers will take {self.lease:g}-second leases")

    def start(self) -> str:
        name = f"w{len(self.procs) + 1}"
        self.procs[name] = process.start_worker(self.path, name, self.lease, 30.0, code=self.code)
        return self._say(f"started worker {name} (pid {self.procs[name].pid})")

    def kill(self) -> str:
        """Hard-kill the newest worker still running: no cleanup code runs in it."""
        alive = [name for name, p in self.procs.items() if p.poll() is None]
        if not alive:
            return self._say("no worker is running")
        name = alive[-1]
        kill_tree(self.procs[name])
        self.killed.add(name)
        return self._say(f"killed worker {name} with kill_tree")

    def row(self) -> dict[str, object]:
        """The job's row, read on a fresh connection (the watch thread calls this too)."""
        db = sqlite3.connect(str(self.path), timeout=30.0)
        try:
            db.row_factory = sqlite3.Row
            r = dict(db.execute(ROW).fetchone())
        finally:
            db.close()
        now = time.time()
        r["t"] = round(now - self.started, 1)
        r["lease left (s)"] = round(r["visible_at"] - now, 1) if r["state"] == "running" else None
        return r

    def workers(self) -> list[dict[str, object]]:
        out = []
        for name, p in self.procs.items():
            code = p.poll()
            status = "running" if code is None else "killed" if name in self.killed else f"exited ({code})"
            out.append({"worker": name, "pid": p.pid, "status": status})
        return out

    def html(self) -> str:
        r = self.row()
        keys = ("t", "state", "attempts", "worker", "lease left (s)")
        head = "".join(f"<th style='padding:2px 8px'>{k}</th>" for k in keys)
        cells = "".join(f"<td style='padding:2px 8px'>{r[k]}</td>" for k in keys)
        procs = ", ".join(f"{w['worker']} {w['status']}" for w in self.workers()) or "none yet"
        log = "<br>".join(self.log[-5:])
        return (
            f"<table><tr>{head}</tr><tr>{cells}</tr></table>"
            f"<div>workers: {procs}</div><div style='font-family:monospace;font-size:90%'>{log}</div>"
        )

    def close(self) -> None:
        for p in getattr(self, "procs", {}).values():
            if p.poll() is None:
                kill_tree(p)

    def interrupted(self) -> str:
        """After a kernel interrupt: stop every worker this lab started, and say so."""
        self.close()
        return self._say("interrupted: every worker this panel started is stopped")

    def _say(self, line: str) -> str:
        self.log.append(f"t={time.time() - self.started:5.1f}s  {line}")
        return line


class CrashPanel:
    """Buttons for CrashLab and a live view of the job row. 'watch' refreshes the
    view from a background thread until it is switched off (or after two minutes)."""

    def __init__(self, lab: CrashLab, watch_seconds: float = 120.0, interval: float = 0.2) -> None:
        import ipywidgets as w

        self.lab = lab
        self.watch_seconds, self.interval = watch_seconds, interval
        self._thread: threading.Thread | None = None
        self.lease = w.FloatSlider(value=lab.lease, min=0.5, max=10, step=0.5, description="lease (s)")
        self.view = w.HTML(lab.html())
        self.watch = w.ToggleButton(value=False, description="watch live", icon="eye")
        actions = {
            "new job": lambda: lab.new_job(self.lease.value),
            "start a worker": lab.start,
            "kill newest worker": lab.kill,
            "refresh": lambda: None,
        }
        self.buttons: dict[str, w.Button] = {}
        for label, action in actions.items():
            self.buttons[label] = w.Button(description=label, layout=w.Layout(width="auto"))
            self.buttons[label].on_click(lambda _, act=action: self._do(act))
        self.watch.observe(lambda change: self._watch(change["new"]), names="value")
        self.widget = w.VBox(
            [w.HBox([self.lease, self.watch]), w.HBox(list(self.buttons.values())), self.view]
        )

    def _do(self, action) -> None:
        try:
            action()
        except KeyboardInterrupt:  # the kernel was interrupted while a button's action ran
            self.lab.interrupted()
        self.refresh()

    def refresh(self) -> None:
        self.view.value = self.lab.html()

    def _watch(self, on: bool) -> None:
        if on and (self._thread is None or not self._thread.is_alive()):
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        deadline = time.monotonic() + self.watch_seconds
        while self.watch.value and time.monotonic() < deadline:
            self.refresh()
            time.sleep(self.interval)
        self.watch.value = False


def crash_panel(folder: str | Path | None = None, lease: float = LEASE, code: Code = None):
    """The notebook's panel: start workers (on the code in folder `code`), kill them, watch
    the job row change."""
    return CrashPanel(CrashLab(folder, lease, code)).widget
