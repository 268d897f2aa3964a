"""Notebook 00: which SQLite this Python links, as a table, a picture and a widget."""

from __future__ import annotations

import html
import re
import sqlite3

import pandas as pd

from ..errors import InvalidArgument
from ..versions import RETURNING_SINCE, SQLiteReport, Version, sqlite_report
from .assets import new_figure

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


_CELL = "style='text-align:left;vertical-align:top;white-space:normal;padding:3px 8px'"


def report_html(report: SQLiteReport) -> str:
    """The yes/no table as HTML whose long cells wrap inside a narrow column instead of
    running off its edge (a DataFrame's cells do not wrap in JupyterLab)."""
    rows = report.rows()
    columns = list(rows[0])
    head = "".join(f"<th {_CELL}>{html.escape(c)}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td {_CELL}>{html.escape(str(row[c]))}</td>" for c in columns) + "</tr>"
        for row in rows
    )
    return f"<table style='table-layout:auto;max-width:100%'><tr>{head}</tr>{body}</table>"


def report_table(report: SQLiteReport):
    """The yes/no table for a notebook cell: wrapped HTML, with the plain table as text."""
    from IPython.display import HTML

    class _Table(HTML):
        def __repr__(self) -> str:  # the text shown where HTML is not (a terminal, nbval)
            return report_frame(report).to_string()

    return _Table(report_html(report))


def plot_versions(version: Version | None = None):
    """The releases that matter, on one axis, with this build marked."""
    version = tuple(sqlite3.sqlite_version_info if version is None else version)

    def x(v: tuple[int, ...]) -> float:  # 3.x.y on a line: minor, plus the patch as a fraction
        return v[1] + v[2] / 10

    fig, ax = new_figure()
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
    return fig


class VersionPanel:
    """Type any SQLite version and see what the queue would make of it."""

    def __init__(self) -> None:
        import ipywidgets as w

        self.text = w.Text(value=sqlite3.sqlite_version, description="SQLite", continuous_update=False)
        self.table = w.HTML()
        self.text.observe(self._typed, names="value")
        self.widget = w.VBox([self.text, self.table])
        self.update(self.text.value)

    def _typed(self, change: dict) -> None:
        try:
            self.update(change["new"])
        except KeyboardInterrupt:  # the kernel was interrupted while the table was drawn
            self.table.value = "<b>interrupted</b>: type the version again"

    def update(self, text: str) -> SQLiteReport | None:
        try:
            report = report_for(text)
        except InvalidArgument as exc:
            self.table.value = f"<span style='color:#b00'>{html.escape(str(exc), quote=False)}</span>"
            return None
        self.table.value = report_html(report)
        return report


def version_panel():
    """The notebook's widget: a version box and the yes/no table for that version."""
    return VersionPanel().widget
