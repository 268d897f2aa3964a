"""A panel's table keeps each header on one line and scrolls sideways in a narrow column."""

from __future__ import annotations

import pandas as pd

from labqueue.lab.tables import html_table


def test_headers_stay_on_one_line_and_the_table_may_scroll():
    text = html_table(pd.DataFrame({"jobs per second": [1.5], "workers": [float("nan")]}))
    assert text.startswith('<div style="overflow-x:auto')
    assert text.count("white-space:nowrap") == 2  # one per header
    assert "jobs per second" in text and "–" in text  # a missing value reads as a dash
