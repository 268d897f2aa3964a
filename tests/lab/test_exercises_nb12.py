"""Notebook 12's exercises beyond the checks every exercise gets (test_exercises.py)."""

from __future__ import annotations

from labqueue.lab.exercises import nb12 as module


def test_the_real_queue_keeps_every_invariant_and_each_variant_breaks_one():
    from labqueue import JobQueue

    assert module.mini_chaos(JobQueue).broken == []
    for name, variant in module.VARIANTS.items():
        (broken,) = module.mini_chaos(variant).broken
        assert broken == module.INVARIANTS[module.ANSWERS["invariants"]["answers"][name] - 1]
