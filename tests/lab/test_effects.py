"""The effect-in-transaction lab: replays, the raising effect, and the widget."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.lab import effects
from labqueue.tutorial.jobqueue import JobQueue as TutorialQueue


def test_stale_worker_credits_twice_only_with_separate_commits(tmp_path):
    separate = effects.replay("separate", 40, tmp_path)
    together = effects.replay("together", 40, tmp_path)
    assert separate[-1].credits == 20
    assert together[-1].credits == 10
    # In both designs worker-a's late complete() is refused; only the effect's placement differs.
    assert separate[-1].worker == together[-1].worker == "worker-a"
    assert separate[-1].result == together[-1].result == "False"


@pytest.mark.parametrize("design", effects.DESIGNS)
def test_a_worker_back_before_anyone_else_looks_is_counted_once(tmp_path, design):
    steps = effects.replay(design, 20, tmp_path)
    assert steps[-1].credits == 10
    assert (steps[-1].worker, steps[-1].result) == ("worker-b", "nothing ready")


def test_account_before_after(tmp_path):
    table = effects.account_before_after(45, tmp_path)
    assert table.to_dict() == {
        "before": {"separate": 0, "together": 0},
        "after": {"separate": 20, "together": 10},
    }
    fig = effects.plot_account(table)
    assert fig.axes[0].get_ylabel() == "ada's balance (credits)"


@pytest.mark.parametrize("bad", [("both", 40), ("separate", 0), ("separate", "40"), ("together", True)])
def test_bad_input_is_named(tmp_path, bad):
    design, stall = bad
    with pytest.raises(InvalidArgument, match=r"design|stall_seconds"):
        effects.replay(design, stall, tmp_path)


def test_the_replay_runs_the_class_it_is_given(tmp_path):
    class EffectFirst(TutorialQueue):
        """A complete() that runs the effect before its fence: the stale worker's credits land."""

        def complete(self, job, effect=None):
            if effect is not None:
                effect(self.db)
            return super().complete(job)

    steps = effects.replay("together", 40, tmp_path, queue_class=EffectFirst)
    assert steps[-1].credits == 20
    assert effects.replay("together", 40, tmp_path)[-1].credits == 10, "the tutorial's complete()"


def test_panel_shows_a_replay_at_once_and_follows_its_controls(tmp_path):
    panel = effects.effects_panel(tmp_path)
    (design, stall), summary, table, picture = panel.children[0].children, *panel.children[1:]
    assert "20 credits" in summary.value and "worker-a" in table.value and picture.value
    design.value = "together"
    assert "10 credits" in summary.value
    first_picture = picture.value
    stall.value = 10.0
    assert "before worker-b" in summary.value and "nothing ready" in table.value
    assert picture.value != first_picture


def test_panel_says_interrupted_when_the_kernel_is_interrupted(tmp_path, monkeypatch):
    panel = effects.effects_panel(folder=tmp_path)
    (_design, stall), summary = panel.children[0].children, panel.children[1]

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(effects, "replay", interrupted)
    stall.value = 20.0
    assert "interrupted" in summary.value
