"""Notebook 05: the job's database effect inside the completing transaction.

The notebook plays the tutorial's fixed timeline itself, on the learner's JobQueue. Here
the same grant job is replayed with a stall the learner chooses, step by step, so the
notebook can show the account after every step and in a widget. Every replay runs the
JobQueue class it is given (the learner's); without one, the tutorial's
(`labqueue.tutorial.jobqueue`, the same code as notebook 02's cells).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import pandas as pd

from ..clock import FakeClock
from ..errors import InvalidArgument
from ..tutorial.jobqueue import Job, JobQueue
from .assets import figure_png, new_figure
from .scratch import db_path
from .tables import html_table
from .walks import ACCOUNTS_TABLE, ADA_GRANT, LEASE, Folder, add_credits, credits

Design = Literal["separate", "together"]
DESIGNS: tuple[Design, ...] = ("separate", "together")
LEASE_SECONDS = LEASE  # the walks' queue: a 30 s lease, one grant of ADA_GRANT's credits
WORKER_B_POLLS_AT = 31.0  # as in the course's timeline: worker-b looks for work at t=31
GRANT = ADA_GRANT["credits"]


@dataclass(frozen=True)
class Step:
    """One step of the replay and the account balance right after it."""

    t: float
    worker: str
    action: str
    result: str
    credits: int


def grant_queue(
    name: str, folder: Folder = None, queue_class: type | None = None
) -> tuple[JobQueue, FakeClock]:
    """A fresh queue of `queue_class` at t=0, with an empty accounts table and one job
    granting ada 10 credits."""
    clock = FakeClock(0.0)
    q = (queue_class or JobQueue)(db_path(name, folder), lease_seconds=LEASE, clock=clock)
    q.db.execute(ACCOUNTS_TABLE)
    q.enqueue("grant", ADA_GRANT)
    return q, clock


def _finish(q: JobQueue, job: Job, design: Design) -> list[tuple[str, str]]:
    """One worker applies its effect and reports, the way `design` says to."""
    if design == "separate":
        add_credits(job)(q.db)  # its own autocommit transaction
        return [("add credits", "committed"), ("complete()", str(q.complete(job)))]
    return [("complete(effect)", str(q.complete(job, effect=add_credits(job))))]


def replay(
    design: Design, stall_seconds: float = 40.0, folder: Folder = None, queue_class: type | None = None
) -> list[Step]:
    """worker-a claims the grant at t=0 and works for `stall_seconds`; worker-b looks
    for work at t=31. Returns every step with Ada's balance after it."""
    if design not in DESIGNS:
        raise InvalidArgument(f"design must be one of {', '.join(DESIGNS)}, got {design!r}")
    ok = isinstance(stall_seconds, (int, float)) and not isinstance(stall_seconds, bool)
    if not ok or not 0 < stall_seconds < 1000:
        raise InvalidArgument(f"stall_seconds must be a number between 0 and 1000, got {stall_seconds!r}")
    q, clock = grant_queue(f"effects_{design}", folder, queue_class)
    steps: list[Step] = [Step(0.0, "-", "before", "", credits(q))]

    def record(worker: str, outcomes: list[tuple[str, str]]) -> None:
        for action, result in outcomes:
            steps.append(Step(clock.now, worker, action, result, credits(q)))

    try:
        (a,) = q.claim("worker-a")
        record("worker-a", [("claim", f"attempt {a.attempts}")])
        # Whoever acts first in time goes first: worker-a waking up, or worker-b polling.
        if stall_seconds < WORKER_B_POLLS_AT:
            clock.now = float(stall_seconds)
            record("worker-a", _finish(q, a, design))
            clock.now = WORKER_B_POLLS_AT
            record("worker-b", [("claim", "nothing ready" if not q.claim("worker-b") else "claimed")])
        else:
            clock.now = WORKER_B_POLLS_AT
            (b,) = q.claim("worker-b")
            record("worker-b", [("claim", f"attempt {b.attempts}")])
            record("worker-b", _finish(q, b, design))
            clock.now = float(stall_seconds)
            record("worker-a", _finish(q, a, design))
    finally:
        q.db.close()
    return steps


def steps_table(steps: list[Step]) -> pd.DataFrame:
    return pd.DataFrame(
        [(s.t, s.worker, s.action, s.result, s.credits) for s in steps],
        columns=["t (s)", "worker", "step", "result", "ada's credits"],
    )


def account_before_after(
    stall_seconds: float = 40.0, folder: Folder = None, queue_class: type | None = None
) -> pd.DataFrame:
    """Ada's balance before the job and after both workers are done, per design."""
    rows = []
    for design in DESIGNS:
        steps = replay(design, stall_seconds, folder, queue_class)
        rows.append({"design": design, "before": steps[0].credits, "after": steps[-1].credits})
    return pd.DataFrame(rows).set_index("design")


def plot_account(table: pd.DataFrame, grant: int = GRANT):
    """Grouped bars: the balance before and after, per design, against the one grant the job is worth."""
    fig, ax = new_figure()
    x = range(len(table))
    ax.bar([i - 0.2 for i in x], table["before"], width=0.4, label="before the job", color="#bbbbbb")
    ax.bar([i + 0.2 for i in x], table["after"], width=0.4, label="after both workers", color="#4c72b0")
    ax.axhline(grant, color="#c44e52", linestyle="--", label=f"one grant ({grant} credits)")
    for i, (before, after) in enumerate(zip(table["before"], table["after"], strict=True)):
        ax.annotate(str(before), (i - 0.2, before), ha="center", va="bottom")
        ax.annotate(str(after), (i + 0.2, after), ha="center", va="bottom")
    labels = {
        "separate": "effect, then complete()\n(two commits)",
        "together": "effect inside complete()\n(one commit)",
    }
    ax.set_xticks(list(x), [labels.get(d, d) for d in table.index])
    ax.set_ylabel("ada's balance (credits)")
    ax.set_ylim(0, max(int(table["after"].max()), grant) * 1.3)
    ax.set_title("One grant job, a stale worker, two designs")
    ax.legend(loc="upper right", fontsize="small")
    return fig


# -- the effect that raises (notebook 05's exercise) -----------------------------------


class LedgerClosed(RuntimeError):
    """The demo's failing effect: it has written its row, then gives up."""


# -- the widget ----------------------------------------------------------------------


def effects_panel(folder: Folder = None, queue_class: type | None = None):
    """Choose the design and how long worker-a stalls; see every step and the balance,
    replayed on `queue_class` (the learner's JobQueue)."""
    import ipywidgets as widgets

    design = widgets.ToggleButtons(
        options=[("effect, then complete()", "separate"), ("effect inside complete()", "together")],
        value="separate",
        description="design",
        style={"button_width": "auto"},
    )
    stall = widgets.FloatSlider(
        value=40.0, min=5.0, max=60.0, step=1.0, description="stall (s)", continuous_update=False
    )
    summary = widgets.HTML()
    table = widgets.HTML()
    picture = widgets.Image(format="png", layout=widgets.Layout(width="100%", max_width="640px"))

    def refresh(_change: object = None) -> None:
        try:
            draw()
        except KeyboardInterrupt:  # the kernel was interrupted mid-replay
            summary.value = "<b>interrupted</b>: move a control to replay"

    def draw() -> None:
        steps = replay(design.value, stall.value, folder, queue_class)
        lease_note = "after" if stall.value >= WORKER_B_POLLS_AT else "before"
        picture.value = figure_png(plot_account(account_before_after(stall.value, folder, queue_class)))
        table.value = html_table(steps_table(steps))
        summary.value = (  # last, so the sentence never describes an older chart
            f"<b>worker-a wakes up at t={stall.value:.0f} s, {lease_note} worker-b looks for work "
            f"(t={WORKER_B_POLLS_AT:.0f} s, lease {LEASE_SECONDS:.0f} s): ada ends with "
            f"{steps[-1].credits} credits.</b>"
        )

    design.observe(refresh, names="value")
    stall.observe(refresh, names="value")
    refresh()
    return widgets.VBox([widgets.HBox([design, stall]), summary, table, picture])
