"""A table as a widget panel shows it: headers on one line, the table scrolling sideways in a
narrow column rather than squeezing "jobs per second" into a word per line."""

from __future__ import annotations

from typing import Any

CELL = "padding:2px 8px;text-align:right"


def html_table(frame: Any, *, na_rep: str = "–") -> str:
    """A pandas DataFrame (index already reset) as the HTML of a panel's table."""
    text = frame.to_html(index=False, border=0, na_rep=na_rep)
    text = text.replace("<th>", f'<th style="white-space:nowrap;{CELL}">')
    text = text.replace("<td>", f'<td style="{CELL}">')
    return f'<div style="overflow-x:auto;max-width:100%">{text}</div>'
