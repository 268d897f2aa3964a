"""Notebook 04: a worker whose lease ran out reports late, with and without the fence.

`scenario()` plays one timeline on a fake clock and records every claim and report,
so the same function draws the side-by-side picture and answers the widget. It runs
the JobQueue class it is given (notebook 04 passes the learner's; the tutorial's by
default): the fenced reports are that class's `fail` and `complete`.
"""

from __future__ import annotations

import contextlib
import io
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
