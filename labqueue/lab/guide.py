"""How to work a notebook of the course, as one picture (notebook 00): the parts every
notebook has, top to bottom, and what to do with each."""

from __future__ import annotations

from typing import Any

from .assets import new_figure

# (the part as it looks in the notebook, whether it is code, what to do with it), top to bottom.
PARTS: tuple[tuple[str, bool, str], ...] = (
    (
        "ws = follow(...)",
        True,
        "the first code cell; re-run it to reset\nkernel and workers to the course's code",
    ),
    ("# jobqueue.py", True, "your queue: edit it, Shift+Enter;\nthe worker processes load your copy"),
    ("experiment, table, plot", False, "real worker processes run your copy"),
    ("panel", False, "sliders and buttons: try your own settings"),
    ("Break it on purpose", False, "edit a saved cell (+ adds a new one),\nthen run the cells below it"),
    ("print(ws.changes() ...)", True, "how kernel and workers differ from the course"),
    ("Check", False, "asserts the notebook's claims;\nnames the rule you broke"),
    ("Your turn: answer, checker", False, "PASS, or NOT YET with a reason\n(YOUR TURN until you try)"),
    ("▸ Hint   ▸ Answer", False, "folded: click to open"),
)
TITLE = "A notebook, top to bottom: Run > Run All Cells, or one cell with Shift+Enter"


def notebook_parts() -> Any:
    """The parts of a notebook as a column of cells, each with what to do with it."""
    fig, ax = new_figure(tall=True)
    ax.set_xlim(0, 10)
    ax.set_ylim(len(PARTS), 0)
    ax.axis("off")
    for row, (part, code, todo) in enumerate(PARTS):
        style = (
            {"facecolor": "#f3f6fa", "edgecolor": "#0969da"}
            if code
            else {"facecolor": "white", "edgecolor": "#999"}
        )
        ax.add_patch(_box(row, **style))
        ax.text(0.3, row + 0.5, part, va="center", fontsize=8.5, family="monospace" if code else "sans-serif")
        ax.annotate(
            todo, xy=(4.1, row + 0.5), xytext=(4.6, row + 0.5), va="center", fontsize=8,
            arrowprops={"arrowstyle": "->", "color": "#666666"},
        )  # fmt: skip
    ax.set_title(TITLE, fontsize=9)
    return fig


def _box(row: int, **style: Any) -> Any:
    from matplotlib.patches import FancyBboxPatch

    return FancyBboxPatch((0.1, row + 0.12), 3.9, 0.76, boxstyle="round,pad=0.02", **style)
