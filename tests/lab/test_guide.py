"""Notebook 00's picture of how to work a notebook."""

from __future__ import annotations

from labqueue.lab import assets, guide


def test_the_picture_names_every_part_and_what_to_do_with_it():
    fig = guide.notebook_parts()
    shown = {t.get_text() for t in fig.axes[0].texts}
    for part, _, todo in guide.PARTS:
        assert part in shown and todo in shown
    assert guide.PARTS[0][0] == "ws = follow(...)"  # the reset sits in the first cell
    assert assets.describe(fig) == f"Chart: {guide.TITLE}"
    assert tuple(fig.get_size_inches()) == assets.FIGSIZE_TALL
