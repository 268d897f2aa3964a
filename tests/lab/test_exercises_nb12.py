"""Notebook 12's exercises beyond the checks every exercise gets (test_exercises.py)."""

from __future__ import annotations

from labqueue.lab.exercises import nb12 as module


def test_the_real_queue_keeps_every_invariant_and_each_variant_breaks_one():
    from labqueue import JobQueue

    assert module.mini_chaos(JobQueue).broken == []
    for name, variant in module.VARIANTS.items():
        (broken,) = module.mini_chaos(variant).broken
        assert broken == module.INVARIANTS[module.ANSWERS["invariants"]["answers"][name] - 1]


def test_each_wrong_answer_is_told_its_own_mistake_and_not_the_answer():
    right = module.ANSWERS["invariants"]["answers"]
    for wrong in module.WRONG["invariants"]:
        (variant,) = [v for v in right if wrong["answers"][v] != right[v]]
        verdict = module.check_invariants(wrong["answers"])
        message = verdict.message
        assert not verdict.passed
        assert f"{variant}: its run kept '{module.INVARIANTS[wrong['answers'][variant] - 1]}'" in message
        assert module.KEPT[variant, wrong["answers"][variant]] in message
        assert f"VARIANTS[{variant!r}]" in message  # the run to look at is the one answered wrongly
        others = [v for v in right if v != variant]
        assert not any(f"VARIANTS[{v!r}]" in message or f"{v}: " in message for v in others), message
        assert module.INVARIANTS[right[variant] - 1] not in message, "the message gives the answer away"
