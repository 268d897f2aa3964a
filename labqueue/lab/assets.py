"""The files the labs read, the images they hand to widgets, and the one figure size of the course.

Every plot helper in ``labqueue.lab`` starts from :func:`new_figure` (or at least from
:data:`FIGSIZE` and :data:`DPI`), so that every figure in every notebook is the same
640 x 320 pixels, live, committed and on GitHub. Nothing here touches matplotlib's global
state (``rcParams``, the pyplot figure list): importing this module changes nothing.
"""

from __future__ import annotations

import io
import zlib
from pathlib import Path
from typing import Any

#: The course's figure size in inches (width, height): 640 x 320 pixels at :data:`DPI`.
FIGSIZE: tuple[float, float] = (6.4, 3.2)
#: Dots per inch for every figure, live and saved.
DPI: int = 100
#: A taller variant for a figure with two rows of axes, same width.
FIGSIZE_TALL: tuple[float, float] = (6.4, 4.8)


def new_figure(nrows: int = 1, ncols: int = 1, *, tall: bool = False, **subplots: Any) -> tuple[Any, Any]:
    """A fresh figure of the course's size and its axes: ``fig, ax = new_figure()``.

    The figure is a plain ``matplotlib.figure.Figure`` with the constrained layout (labels are
    never cut off), not registered with pyplot: it needs no ``plt.close``, is never shown twice,
    and appears where the notebook cell returns or displays it. Keyword arguments go to
    ``Figure.subplots`` (``sharex=``, ``gridspec_kw=`` ...).

    A cell that ends with the figure shows it as a PNG even where pyplot was never imported
    (the figure knows how to draw itself, see :func:`figure_png`)."""
    fig = _figure_class()(figsize=FIGSIZE_TALL if tall else FIGSIZE, dpi=DPI, layout="constrained")
    axes = fig.subplots(nrows, ncols, squeeze=True, **subplots)
    return fig, axes


def data_file(name: str) -> Path:
    """A file in the repository's data/ folder (the tutorial's published figures): next to the
    package in a checkout, else in the current folder or one above it (notebooks run in
    notebooks/)."""
    here = Path.cwd().resolve()
    for root in (Path(__file__).resolve().parents[2], here, *here.parents):
        candidate = root / "data" / name
        if candidate.is_file():
            return candidate
    raise FileNotFoundError(f"data/{name} was not found next to the package or above {here}")


_FIGURE_CLASS: Any = None


def _figure_class() -> Any:
    """matplotlib's Figure, plus the one method IPython looks for when it has no PNG printer
    of its own for figures (that printer is registered only once pyplot is imported)."""
    global _FIGURE_CLASS
    if _FIGURE_CLASS is None:
        from matplotlib.figure import Figure

        class CourseFigure(Figure):
            def _repr_png_(self) -> tuple[bytes, dict[str, str]]:
                # IPython keeps the second item as the output's metadata: the site's alt text.
                alt = describe(self)
                return figure_png(self), ({"alt": alt} if alt else {})

        CourseFigure.__name__ = CourseFigure.__qualname__ = "Figure"  # reads as <Figure size ...>
        _FIGURE_CLASS = CourseFigure
    return _FIGURE_CLASS


def describe(fig: Any) -> str:
    """A figure in words, for the alt text of its image: its title, else each panel's title, else
    what each panel plots against what; empty when it says none of these."""
    said: list[str] = []
    suptitle = getattr(fig, "_suptitle", None)
    for text in [suptitle.get_text() if suptitle is not None else ""] + [_panel(ax) for ax in fig.axes]:
        if text and text not in said:
            said.append(text)
    return "Chart: " + "; ".join(said) if said else ""


def _panel(ax: Any) -> str:
    title = ax.get_title() or ax.get_title("left")
    if title:
        return " ".join(title.split())
    y, x = ax.get_ylabel(), ax.get_xlabel()
    return f"{y} against {x}" if y and x else y or x


def figure_png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes, for an ipywidgets Image. The figure in words
    (:func:`describe`) goes with it, as the PNG's Description, for a saved panel's alt text."""
    buffer = io.BytesIO()
    said = describe(fig)
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Description": said} if said else None)
    return buffer.getvalue()


def png_description(png: bytes) -> str:
    """The Description a PNG carries (see :func:`figure_png`), empty when it has none."""
    at = 8  # past the signature
    while at + 8 <= len(png):
        size = int.from_bytes(png[at : at + 4], "big")
        kind, body = png[at + 4 : at + 8], png[at + 8 : at + 8 + size]
        if kind == b"tEXt" and body.startswith(b"Description\0"):
            return body.split(b"\0", 1)[1].decode("latin-1")
        if kind == b"iTXt" and body.startswith(b"Description\0"):
            # keyword, NUL, compression flag and method, language tag NUL, translated keyword NUL, text
            _, rest = body.split(b"\0", 1)
            compressed, rest = rest[0], rest[2:]
            text = rest.split(b"\0", 2)[2]
            return (zlib.decompress(text) if compressed else text).decode("utf-8")
        if kind == b"IDAT":
            return ""  # matplotlib writes its text before the image data
        at += 12 + size
    return ""
