"""Notebook 15's lab: the claim's order, its plans and cost with priorities, the overload
simulation (strict priorities against fair turns), the race with priorities, and the
exercises (checked here as tests/lab/test_exercises.py checks notebooks 01-12's)."""

from __future__ import annotations

import pytest

from labqueue import InvalidArgument
from labqueue.lab import priorities as P
from labqueue.lab import priority_race
from labqueue.lab.exercises import Verdict, nb15


def test_order_walk_takes_priority_first_then_the_tutorials_order(tmp_path, capsys):
    assert P.order_walk(folder=tmp_path) == [5, 4, 6, 1, 3, 2]
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("claim 1: job 5  priority 10  queue mail")
    assert lines[-1].endswith("ready since t=4")


def test_ready_indexes_are_the_packages():
    text = P.ready_indexes()
    assert "jobs_ready ON jobs (priority DESC, visible_at, id" in text  # the claim's order, first
    assert "jobs_queue_ready ON jobs (queue, priority DESC, visible_at, id" in text
    assert "jobs_exhausted" not in text


def test_every_scope_searches_an_index(tmp_path):
    plans = P.claim_plans(folder=tmp_path)["query plan"]
    assert len(plans) == 3
    assert all("USING INDEX jobs_" in p for p in plans)
    assert not P.sorts_in_memory(plans.iloc[0]) and not P.sorts_in_memory(plans.iloc[1])


def test_the_claim_does_the_same_work_with_a_hundred_times_more_finished_rows(tmp_path):
    small = P.measure_claims(500, claims=5, folder=tmp_path, progress=False)
    large = P.measure_claims(50_000, claims=5, folder=tmp_path, progress=False)
    assert list(small["search instructions"]) == list(large["search instructions"])
    assert set(large["finished rows"]) == {50_000}
    fig = P.plot_latency(__import__("pandas").concat([small, large]))
    assert fig.axes[0].get_ylabel() == "median claim (ms)"


def test_simulation_is_deterministic_and_strict_starves_reports(tmp_path):
    runs = P.compare(folder=tmp_path, duration_s=60.0)
    again = P.simulate(fair=False, duration_s=60.0, folder=tmp_path)
    assert runs["strict"].jobs.equals(again.jobs)
    assert runs["strict"].completions()["reports"] == 0
    assert all(n > 0 for n in runs["fair"].completions().values())
    medians = P.medians_by_priority(runs["strict"])
    assert list(medians) == [10, 5, 0] and medians[10] < medians[5] < medians[0]
    fair_mail = P.medians_by_priority(runs["fair"], "mail")
    assert fair_mail[10] < fair_mail[0]
    done, guaranteed = runs["fair"].completions(), runs["fair"].guaranteed_rates()
    for queue in runs["fair"].queues:
        assert done[queue] / 60.0 >= 0.85 * guaranteed[queue], queue


def test_tables_and_plots(tmp_path):
    runs = P.compare(folder=tmp_path, duration_s=30.0)
    waits = P.wait_table(runs)
    assert list(waits.columns) == ["arrived", "claimed", "still waiting", "median wait (s)", "p95 wait (s)"]
    assert (waits["arrived"] == waits["claimed"] + waits["still waiting"]).all()
    table = P.completions_table(runs)
    assert set(table.index.get_level_values("mode")) == {"strict", "fair"}
    assert P.plot_waits(runs).axes[0].get_ylabel() == "wait before a claim (s)"
    assert P.plot_progress(runs).axes[0].get_ylabel() == "jobs completed"


def test_weights_shape_the_shares_under_a_flood(tmp_path):
    run = P.simulate(
        "everyone floods", fair=True, queues="mail:3,webhooks:2,reports:4", duration_s=60, folder=tmp_path
    )
    shares = run.shares()
    assert shares["reports"] == pytest.approx(4 / 9, abs=0.03)
    assert shares["mail"] == pytest.approx(3 / 9, abs=0.03)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"mix": "no such mix"},
        {"workers": 0},
        {"service_s": 0},
        {"queues": "mail,reports"},
        {"queues": "mail:x,webhooks,reports"},
        {"fair": "yes"},
    ],
)
def test_bad_settings_are_named(tmp_path, kwargs):
    kwargs = {"fair": True, **kwargs}
    with pytest.raises(InvalidArgument):
        P.simulate(folder=tmp_path, **kwargs)


def test_fairness_panel_reruns_one_mode(tmp_path):
    runs = P.compare(folder=tmp_path, duration_s=20.0)
    panel = P.fairness_panel(initial=runs, folder=tmp_path)
    controls, status, picture, _waits, table = panel.children
    (_mix, workers), (mode, queues, button) = (box.children for box in controls.children)
    assert "strict" in table.value and "fair" in table.value and picture.value
    before = picture.value
    mode.value, workers.value = "strict", 2
    button.click()
    assert status.value.startswith("<b>strict</b>") and "2 workers" in status.value
    assert picture.value != before and "fair" not in table.value
    queues.value = "mail"
    mode.value = "fair"
    button.click()
    assert status.value.startswith("<b>not run</b>")


def test_latency_panel_shows_the_run_above(tmp_path):
    table = P.measure_claims(P.SMALL, claims=3, folder=tmp_path, progress=False)
    panel = P.latency_panel(initial=table, folder=tmp_path)
    assert "the run above" in panel.children[1].value and panel.children[3].value


def test_race_with_priorities_has_no_duplicates_and_no_inversions(tmp_path):
    result = priority_race.race(600, folder=tmp_path)
    assert (result.claims, result.distinct, result.duplicates, result.inversions) == (600, 600, 0, 0)
    assert sum(result.by_racer.values()) == 600


def test_inversions_are_counted_per_racer_and_queue():
    rows = [("a", 0, 1, "mail", 10), ("a", 1, 2, "mail", 5), ("a", 2, 3, "mail", 10), ("b", 0, 4, "mail", 0)]
    assert priority_race.inversions(rows) == 1
    assert priority_race.inversions([("a", 0, 1, "mail", 0), ("a", 1, 2, "reports", 10)]) == 0


CASES = [
    pytest.param(name, what, kwargs, id=f"{name}-{what}")
    for name in nb15.CHECKERS
    for what, kwargs in [
        ("answer", nb15.ANSWERS[name]),
        ("starter", nb15.STARTERS[name]),
        *((f"wrong {i}", wrong) for i, wrong in enumerate(nb15.WRONG[name])),
        ("nonsense", dict.fromkeys(nb15.STARTERS[name])),
    ]
]


@pytest.mark.parametrize(("name", "what", "kwargs"), CASES)
def test_checker_accepts_only_the_answer(name, what, kwargs):
    verdict = nb15.CHECKERS[name](**kwargs)
    assert isinstance(verdict, Verdict) and verdict.message
    assert verdict.passed == (what == "answer"), str(verdict)


def test_every_exercise_has_a_starter_an_answer_and_a_wrong_version():
    assert set(nb15.CHECKERS) == set(nb15.STARTERS) == set(nb15.ANSWERS) == set(nb15.WRONG)
    assert all(nb15.WRONG[name] for name in nb15.CHECKERS)


def test_sql_that_does_not_run_is_not_yet():
    assert "did not run" in nb15.check_claim_order("no_such_column DESC").message
