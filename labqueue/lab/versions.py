"""Notebook 00: which SQLite this Python links, as a table, a picture and a widget."""

from __future__ import annotations

import re
import sqlite3

import pandas as pd

from ..errors import InvalidArgument
from ..versions import RETURNING_SINCE, SQLiteReport, Version, sqlite_report

# The releases that matter to the queue, oldest first: (version, what it brought).
MILESTONES: list[tuple[Version, str]] = [
    (RETURNING_SINCE, "3.35.0: RETURNING"),
    ((3, 44, 6), "3.44.6: WAL-reset fix (backport)"),
    ((3, 50, 7), "3.50.7: WAL-reset fix (backport)"),
    ((3, 51, 3), "3.51.3: WAL-reset fix"),
]

_LABEL_BOX = {"facecolor": "white", "edgecolor": "none", "pad": 1}
_VERSION = re.compile(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?\s*$")


def parse_version(text: str) -> Version:
    """'3.40.1' -> (3, 40, 1); a missing patch number counts as 0."""
    match = _VERSION.match(text) if isinstance(text, str) else None
    if match is None:
        raise InvalidArgument(f"an SQLite version looks like 3.45.1, got {text!r}")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


def report_for(text: str | None = None) -> SQLiteReport:
    """The report for this Python's SQLite, or for a version the learner types in."""
    if text is None:
        return sqlite_report()
    version = parse_version(text)
    return sqlite_report(version, ".".join(map(str, version)))


def report_frame(report: SQLiteReport) -> pd.DataFrame:
    return pd.DataFrame(report.rows()).set_index("check")


def plot_versions(version: Version | None = None):
    """The releases that matter, on one axis, with this build marked."""
    import matplotlib.pyplot as plt

    version = tuple(sqlite3.sqlite_version_info if version is None else version)

    def x(v: tuple[int, ...]) -> float:  # 3.x.y on a line: minor, plus the patch as a fraction
        return v[1] + v[2] / 10

    fig, ax = plt.subplots(figsize=(6.4, 3.2))
    for k, (v, label) in enumerate(MILESTONES):
        color = "tab:green" if version >= v else "tab:gray"
        ax.axvline(x(v), color=color, linewidth=1.5)
        ax.text(
            x(v) + 0.15,
            0.9 - 0.2 * k,
            label,
            color=color,
            fontsize=8,
            transform=ax.get_xaxis_transform(),
            bbox=_LABEL_BOX,
        )
    ax.axvline(x(version), color="tab:blue", linewidth=3, linestyle="--")
    shown = ".".join(map(str, version))
    ax.text(
        x(version) - 0.15,
        0.05,
        f"this build: {shown}",
        color="tab:blue",
        fontsize=9,
        ha="right",
        transform=ax.get_xaxis_transform(),
        bbox=_LABEL_BOX,
    )
    low = min(x(RETURNING_SINCE), x(version)) - 4
    high = max(x(MILESTONES[-1][0]), x(version)) + 4
    ax.set_xlim(low, high)
    ax.set_yticks([])
    ax.set_xlabel("SQLite 3.x release (minor version; patch as tenths)")
    ax.set_title("green: what this build has; gray: what it lacks", fontsize=9)
    fig.tight_layout()
    return fig


class VersionPanel:
    """Type any SQLite version and see what the queue would make of it."""

    def __init__(self) -> None:
        import ipywidgets as w

        self.text = w.Text(value=sqlite3.sqlite_version, description="SQLite", continuous_update=False)
        self.table = w.HTML()
        self.text.observe(lambda change: self.update(change["new"]), names="value")
        self.widget = w.VBox([self.text, self.table])
        self.update(self.text.value)

    def update(self, text: str) -> SQLiteReport | None:
        try:
            report = report_for(text)
        except InvalidArgument as exc:
            self.table.value = f"<span style='color:#b00'>{exc}</span>"
            return None
        self.table.value = report_frame(report).reset_index().to_html(index=False, border=0)
        return report


def version_panel():
    """The notebook's widget: a version box and the yes/no table for that version."""
    return VersionPanel().widget
