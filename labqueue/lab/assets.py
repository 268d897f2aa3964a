"""The files the labs read and the images they hand to widgets."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any


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


def figure_png(fig: Any) -> bytes:
    """A matplotlib figure as PNG bytes, for an ipywidgets Image."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    return buffer.getvalue()
