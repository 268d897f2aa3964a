"""A job's life as one picture: its states and every move between them.

The states are the queue's own (``labqueue.queue.STATES``, the ``CHECK`` in
``labqueue.drivers.sqlite.sql.TABLE``) and each edge names the SQL statements that make that move, so
a test can run the statements and check that the picture and the code agree.

    from labqueue.lab import states
    states.diagram()                        # the whole life of a job
    states.diagram(highlight="reclaim")     # one move (or a state) drawn in colour
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ..errors import InvalidArgument
from ..queue import STATES
from .assets import new_figure

#: Where the jobs come from: enqueue is drawn as an arrow from outside.
START = "new"


@dataclass(frozen=True)
class Edge:
    """One move of a job: from a state to a state, the name the course uses for it, how the
    picture labels it, and the constants of ``labqueue.drivers.sqlite.sql`` that perform it."""

    key: str
    source: str
    target: str
    label: str
    statements: tuple[str, ...]


EDGES: tuple[Edge, ...] = (
    Edge("enqueue", START, "queued", "enqueue", ("ENQUEUE", "ENQUEUE_MANY")),
    Edge(
        "claim",
        "queued",
        "running",
        "claim\n(attempts + 1, new token)",
        ("CLAIM", "CLAIM_IDS", "CLAIM_ID_RUN"),
    ),
    Edge(
        "reclaim",
        "running",
        "running",
        "lease expired:\nclaimed again\n(attempts + 1, new token)",
        ("CLAIM", "CLAIM_IDS", "CLAIM_ID_RUN"),
    ),
    # COMPLETE_MANY (COMPLETE_ID_RUN for consecutive ids): group commit's plain completions,
    # one statement per claim, each fenced; COMPLETE_RESULT: one with a return value.
    Edge(
        "complete",
        "running",
        "done",
        "complete\n(token matches)",
        ("COMPLETE", "COMPLETE_MANY", "COMPLETE_ID_RUN", "COMPLETE_RESULT"),
    ),
    # RELEASE: a warm stop gives back a batch's unstarted jobs, the same move back to queued;
    # PUT_BACK: a worker gives back a kind it has no handler for.
    Edge("retry", "running", "queued", "fail: retry after backoff", ("FAIL", "RELEASE", "PUT_BACK")),
    Edge(
        "dead",
        "running",
        "dead",
        "fail, out of attempts;\nor lease expired\non the last attempt",
        ("FAIL", "RETIRE_EXHAUSTED", "BURY"),
    ),
    Edge("requeue", "dead", "queued", "requeue_dead (attempts = 0)", ("REQUEUE_DEAD", "REQUEUE_DEAD_IDS")),
    # Part 2: cancel() stops a job that is not finished; a running one loses its token.
    Edge("cancel", "queued", "cancelled", "cancel", ("CANCEL",)),
    Edge("cancel_running", "running", "cancelled", "cancel while running\n(token voided)", ("CANCEL",)),
)

EDGE_KEYS = tuple(edge.key for edge in EDGES)

#: What Part 2 adds to a job's life; Part 1's tutorial queue has neither (``part2=False``).
PART2_STATES = ("cancelled",)
PART2_MOVES = ("cancel", "cancel_running")

# Where each state sits, in inches on the course's 6.4 x 3.2 figure.
_AT = {
    START: (0.25, 1.5),
    "queued": (1.45, 1.5),
    "running": (3.55, 1.5),
    "done": (5.9, 2.3),
    "dead": (5.75, 0.75),
    "cancelled": (0.55, 0.5),
}
_RADIUS = 0.42
_MUTED, _HOT = "#555555", "#d62728"
_FILL = {
    "queued": "#dddddd",
    "running": "#9ecae1",
    "done": "#a1d99b",
    "dead": "#fc9272",
    "cancelled": "#fdd0a2",
}


def transitions() -> set[tuple[str, str]]:
    """The diagram's moves as (from, to) pairs between states (enqueue left out)."""
    return {(e.source, e.target) for e in EDGES if e.source != START}


#: Which call of the queue Part 1 builds (labqueue.tutorial.jobqueue) makes each move.
TUTORIAL_MOVES = {
    "enqueue": "enqueue(), enqueue_many()",
    "claim": "claim(): CLAIM",
    "reclaim": "claim(): CLAIM",
    "complete": "complete()",
    "retry": "fail(): FAIL",
    "dead": "fail(): FAIL; claim(): RETIRE_EXHAUSTED",
    "requeue": "requeue_dead()",
}


def edges_frame(*, part2: bool = True):
    """The moves as a table: name, from, to, what the picture says, and the SQL that does it
    in labqueue; with ``part2=False``, Part 1's moves and the call of the tutorial's queue
    that makes each."""
    import pandas as pd

    def made_by(e: Edge) -> dict[str, str]:
        if part2:
            return {"SQL (labqueue.drivers.sqlite.sql)": ", ".join(e.statements)}
        return {"in your queue": TUTORIAL_MOVES[e.key]}

    return pd.DataFrame(
        [
            {
                "move": e.key,
                "from": e.source,
                "to": e.target,
                "what happens": " ".join(e.label.split()),
                **made_by(e),
            }
            for e in EDGES
            if part2 or e.key not in PART2_MOVES
        ]
    ).set_index("move")


def _chosen(highlight: str | Iterable[str] | None, part2: bool = True) -> set[str]:
    if highlight is None:
        return set()
    names = {highlight} if isinstance(highlight, str) else set(highlight)
    shown_states = STATES if part2 else tuple(s for s in STATES if s not in PART2_STATES)
    shown_moves = EDGE_KEYS if part2 else tuple(k for k in EDGE_KEYS if k not in PART2_MOVES)
    unknown = sorted(n for n in names if n not in shown_states and n not in shown_moves)
    if unknown:
        raise InvalidArgument(
            f"highlight must name states ({', '.join(shown_states)}) or moves ({', '.join(shown_moves)}), "
            f"got {', '.join(map(repr, unknown))}"
        )
    return names


def diagram(highlight: str | Iterable[str] | None = None, title: str | None = None, *, part2: bool = True):
    """The state diagram of a job as a matplotlib Figure of the course's size.

    ``highlight`` names states and/or moves (``"claim"``, ``"reclaim"``, ``"complete"``,
    ``"retry"``, ``"dead"``, ``"requeue"``, ``"enqueue"``) to draw in colour; the rest is
    drawn in gray. ``part2=False`` leaves out what Part 2 adds (the cancelled state and the
    cancel moves): Part 1's queue has four states. The figure is not kept by pyplot: return
    it from a cell to show it."""
    from matplotlib.patches import Circle, FancyArrowPatch

    hot = _chosen(highlight, part2)
    drawn = STATES if part2 else tuple(s for s in STATES if s not in PART2_STATES)
    fig, ax = new_figure()
    fig.set_layout_engine("none")
    ax.set_position((0.0, 0.0, 1.0, 0.92))  # one inch of axes is one inch of figure
    ax.set_xlim(0, 6.4)
    ax.set_ylim(0, 3.2 * 0.92)
    ax.axis("off")

    for state in drawn:
        x, y = _AT[state]
        lit = state in hot or not hot
        ax.add_patch(
            Circle(
                (x, y),
                _RADIUS,
                facecolor=_FILL[state] if lit else "#f4f4f4",
                edgecolor=_HOT if state in hot else "#333333",
                linewidth=2.5 if state in hot else 1.2,
                zorder=2,
            )
        )
        size = 10 if len(state) < 8 else 8
        ax.text(x, y, state, ha="center", va="center", fontsize=size, fontweight="bold", zorder=3)

    def arrow(a, b, key, rad=0.0, **kw):
        color = _HOT if key in hot else _MUTED
        ax.add_patch(
            FancyArrowPatch(
                a,
                b,
                connectionstyle=f"arc3,rad={rad}",
                arrowstyle="-|>",
                mutation_scale=14,
                color=color,
                linewidth=2.2 if key in hot else 1.2,
                shrinkA=kw.get("shrink_a", 0),
                shrinkB=0,
                zorder=1,
            )
        )
        return color

    def label(key: str, x: float, y: float, **kw) -> None:
        edge = next(e for e in EDGES if e.key == key)
        color = _HOT if key in hot else "#222222"
        ax.text(x, y, edge.label, fontsize=7.5, color=color, ha=kw.pop("ha", "center"), va="center", **kw)

    qx, qy = _AT["queued"]
    rx, ry = _AT["running"]
    dx, dy = _AT["done"]
    ex, ey = _AT["dead"]
    r = _RADIUS
    arrow((0.0, qy), (qx - r, qy), "enqueue")
    label("enqueue", 0.05, qy + 0.18, ha="left")
    arrow((qx + r * 0.8, qy + r * 0.6), (rx - r * 0.8, ry + r * 0.6), "claim", rad=-0.3)
    label("claim", (qx + rx) / 2 - 0.1, qy + 0.72)
    arrow((rx - r * 0.8, ry - r * 0.6), (qx + r * 0.8, qy - r * 0.6), "retry", rad=-0.3)
    label("retry", (qx + rx) / 2, qy - 0.68)
    # The reclaim: a loop over the top of running, back into running.
    arrow((rx - r * 0.7, ry + r * 0.72), (rx + r * 0.7, ry + r * 0.72), "reclaim", rad=-1.9)
    label("reclaim", rx + 0.42, ry + 0.98, ha="left")
    arrow((rx + r * 0.95, ry + r * 0.3), (dx - r, dy), "complete", rad=-0.1)
    label("complete", dx - 1.05, ry + 0.12)
    arrow((rx + r * 0.95, ry - r * 0.3), (ex - r, ey + 0.1), "dead", rad=0.1)
    label("dead", ex - 1.3, ey - 0.1)
    # requeue_dead: from dead, under everything, back to queued.
    arrow((ex - r * 0.3, ey - r * 0.95), (qx, qy - r), "requeue", rad=-0.3)
    label("requeue", 4.05, 0.22)
    if part2:
        cx, cy = _AT["cancelled"]
        arrow((qx - r * 0.7, qy - r * 0.72), (cx + r * 0.6, cy + r * 0.8), "cancel", rad=0.1)
        label("cancel", qx - 0.62, qy - 0.4, ha="right")
        arrow((rx - r * 0.1, ry - r), (cx + r, cy - 0.08), "cancel_running", rad=-0.3)
        label("cancel_running", 2.15, 0.16)

    title = title or f"The life of a job: {len(drawn)} states, every move an UPDATE"
    fig.suptitle(title, fontsize=10, y=0.98)
    return fig


#: One sentence per move and per state, for the panel.
MOVES_EXPLAINED = {
    "enqueue": "A producer adds the job; it is ready at once, or after its delay.",
    "claim": "A worker takes a ready job: one more attempt, a fresh lease token, a deadline.",
    "reclaim": "The lease ran out without a report: the next claim takes the job, with a new token.",
    "complete": "The worker whose token is still current reports success; a stale token changes nothing.",
    "retry": "The handler failed with attempts left: back to queued, visible again after a backoff.",
    "dead": "The last attempt failed, or its lease ran out: parked with its error for a person.",
    "requeue": "An operator sends dead jobs back to the queue, attempts reset to 0.",
    "cancel": "Someone cancels a queued job: it will never run.",
    "cancel_running": "Someone cancels a running job: its token is voided, so its worker's heartbeat and "
    "report are refused and its effect never commits.",
}
STATES_EXPLAINED = {
    "queued": "Waiting: claimable once visible_at has passed.",
    "running": "Leased to one worker until visible_at; claimable again after that.",
    "done": "Finished; the row stays for monitoring until someone purges it.",
    "dead": "A dead letter: out of attempts, kept with its last error for a person.",
    "cancelled": "Stopped on purpose before it finished; kept until a purge removes it.",
}


class DiagramPanel:
    """A dropdown of the moves and states, and the diagram with the chosen one in colour, each
    with one sentence on what it means. `show(name)` is plain Python, so tests drive the panel
    as a learner does."""

    def __init__(self, *, part2: bool = True) -> None:
        import ipywidgets as w

        self.part2 = part2
        moves = [k for k in EDGE_KEYS if part2 or k not in PART2_MOVES]
        options = [("(everything)", ""), *((f"move: {k}", k) for k in moves)]
        options += [(f"state: {s}", f"state:{s}") for s in STATES if part2 or s not in PART2_STATES]
        self.choice = w.Dropdown(options=options, value="", description="show")
        self.text = w.HTML()
        self.image = w.Image(format="png", layout=w.Layout(width="640px", max_width="100%"))
        self.choice.observe(lambda change: self.show(change["new"]), names="value")
        self.widget = w.VBox([self.choice, self.text, self.image])
        self.show("")

    def show(self, name: str) -> None:
        from .assets import figure_png

        key = name.removeprefix("state:")
        try:
            self.image.value = figure_png(diagram(highlight=key or None, part2=self.part2))
        except KeyboardInterrupt:  # the kernel was interrupted while drawing
            self.text.value = "<b>interrupted</b>: pick again"
            return
        if not key:
            self.text.value = "Every state and every move of a job."
        elif name.startswith("state:"):
            self.text.value = STATES_EXPLAINED[key]
        else:
            self.text.value = MOVES_EXPLAINED[key]


def diagram_panel(*, part2: bool = True):
    """The notebook's panel: pick a move or a state and see it in colour (``part2=False``:
    Part 1's four states only)."""
    return DiagramPanel(part2=part2).widget
