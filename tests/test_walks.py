"""The fake-clock walks print the tutorial's figures, line for line."""

from __future__ import annotations

from pathlib import Path

import pytest

from labqueue.lab import walks

EXPECTED = Path(__file__).parent / "expected"


@pytest.mark.parametrize("name", ["leases", "zombie_workers", "effect_in_transaction", "retries", "ops"])
def test_walk_prints_the_tutorial_figures(name, tmp_path, capsys):
    result = getattr(walks, name)(tmp_path)
    if hasattr(result, "close"):
        result.close()
    assert capsys.readouterr().out == (EXPECTED / f"{name}.txt").read_text()
