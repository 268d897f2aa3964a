"""The benchmark runs and reports honestly. Smoke tests only: nothing here asserts a speed."""

from __future__ import annotations

import dataclasses
import json
import queue
import sqlite3

import matplotlib.pyplot as plt
import pytest

from labqueue import InvalidArgument
from labqueue.bench import contenders
from labqueue.bench import report as bench_report
from labqueue.bench import run as bench
from labqueue.bench.contenders import CONTENDERS
from labqueue.bench.profile import profile
from labqueue.drivers.sqlite import sql
from labqueue.procs import collect_reports


@pytest.mark.parametrize("key", sorted(CONTENDERS))
def test_every_contender_drains_every_job_once_in_one_process(tmp_path, key):
    contender = CONTENDERS[key]
    contender.load(tmp_path, 30)
    seen = contender.drain(contender.open(tmp_path), "w0")
    assert sorted(seen) == list(range(30))
    assert contender.left(tmp_path) == 0  # the store itself holds every job as finished
    assert contender.drain(contender.open(tmp_path), "w1") == []  # nothing left, nothing redelivered


@pytest.mark.parametrize(
    "key",
    ["labqueue_b10", "tutorial_l1", "tutorial_code", "huey", "huey_worker", "persist_queue", "litequeue"],
)
def test_the_store_check_counts_what_a_drain_left(tmp_path, key):
    contender = CONTENDERS[key]
    contender.load(tmp_path, 5)
    assert contender.left(tmp_path) == 5


def test_the_tutorial_code_contender_runs_on_the_tutorials_own_table(tmp_path):
    """Schema version 1 as the tutorial creates it: no priority or queue column, its states
    CHECK an IN list, its three indexes; and its jobs are frozen dataclasses."""
    contender = CONTENDERS["tutorial_code"]
    contender.load(tmp_path, 3)
    db = sqlite3.connect(tmp_path / contenders.DB_FILE)
    columns = {row[1] for row in db.execute("SELECT * FROM pragma_table_info('jobs')")}
    create = db.execute(sql.JOBS_OBJECT).fetchone()[1]
    indexes = {
        row[0]
        for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
    }
    db.close()
    assert "priority" not in columns and "queue" not in columns
    assert "CHECK (state IN ('queued', 'running', 'done', 'dead'))" in create
    assert indexes == {"jobs_ready", "jobs_exhausted", "jobs_dead"}
    q = contender.open(tmp_path)
    (job,) = q.claim("w", 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        job.attempts = 9
    assert (job.id, job.payload, job.attempts) == (1, {"n": 0}, 1)
    assert q.complete(job) and not q.complete(job)  # fenced: the second report is refused


def test_the_tutorial_code_contender_reads_its_clock_and_rolls_back_a_failed_transaction(tmp_path):
    CONTENDERS["tutorial_code"].load(tmp_path, 2)
    q = contenders.TutorialCode(tmp_path / contenders.DB_FILE, clock=lambda: 2e9)
    (first,) = q.claim("w", 1)
    assert first.lease_expires_at == 2e9 + contenders.LEASE_SECONDS
    with pytest.raises(ZeroDivisionError), q._tx() as db:
        db.execute("UPDATE jobs SET state = 'dead' WHERE id = 2")
        raise ZeroDivisionError("a failure inside the transaction")
    assert not q.db.in_transaction
    assert q.complete(first)
    states = [r[0] for r in q.db.execute("SELECT state || ' ' || COALESCE(finished_at, '-') FROM jobs")]
    assert states == ["done 2000000000.0", "queued -"]
    q.db.close()


def test_every_race_process_keeps_its_heaps_top_whatever_it_races(tmp_path, monkeypatch):
    kept = []
    monkeypatch.setattr(contenders.heap, "keep_top", lambda *args: kept.append(args) or True)
    results = queue.Queue()
    for key in ("tutorial_code", "huey"):
        (tmp_path / key).mkdir()
        CONTENDERS[key].load(tmp_path / key, 3)
        contenders.child(
            key, str(tmp_path / key), "w0", type("Barrier", (), {"wait": lambda self: None})(), results
        )
    assert len(kept) == 2
    assert [sorted(results.get()[3]) for _ in range(2)] == [[0, 1, 2], [0, 1, 2]]


def fake_run(key, procs, jobs_per_s, deliveries=100, distinct=100, round=1):
    return {
        "contender": key,
        "procs": procs,
        "round": round,
        "jobs": 100,
        "deliveries": deliveries,
        "distinct": distinct,
        "missed": 100 - distinct,
        "seconds": distinct / jobs_per_s,
        "jobs_per_s": jobs_per_s,
    }


def test_summary_takes_medians_and_paired_per_round_ratios():
    runs = [fake_run("tutorial_l1", 1, v, round=r) for r, v in enumerate((90.0, 100.0, 500.0), 1)]
    runs += [fake_run("labqueue_b10", 1, v, round=r) for r, v in enumerate((270.0, 250.0, 1000.0), 1)]
    runs += [fake_run("persist_queue", 1, 50.0, deliveries=103)]
    rows = {r["contender"]: r for r in bench.summarize(runs)}
    assert rows["tutorial_l1"]["median_jobs_per_s"] == 100.0
    # rounds: 270/90 = 3.0, 250/100 = 2.5, 1000/500 = 2.0: the median of the paired ratios
    assert rows["labqueue_b10"]["ratio_rounds"] == [3.0, 2.5, 2.0]
    assert rows["labqueue_b10"]["ratio_to_tutorial"] == 2.5
    assert rows["persist_queue"]["duplicates"] == 3  # reported, not hidden


def fake_results(worker_ratio=2.0, poll_ratio=5.0, growth=1.1, duplicates=0):
    return {
        "summary": [
            {
                "contender": "labqueue_b10",
                "label": CONTENDERS["labqueue_b10"].label,
                "procs": 1,
                "median_jobs_per_s": 200.0 * worker_ratio,
                "ratio_to_tutorial": worker_ratio,
                "duplicates": duplicates,
            },
            {
                "contender": "tutorial_l1",
                "label": CONTENDERS["tutorial_l1"].label,
                "procs": 1,
                "median_jobs_per_s": 200.0,
                "ratio_to_tutorial": 1.0,
                "duplicates": 0,
            },
        ],
        "empty_poll": {"ratio": poll_ratio, "labqueue_claim_while_writer_holds_lock": True},
        "claim_latency": {"growth": growth, "sizes": [{"finished": 10_000}, {"finished": 1_000_000}]},
    }


def test_targets_say_met_or_missed_with_the_measured_value():
    met = {t["target"]: t for t in bench_report.targets(fake_results(worker_ratio=2.0))}
    assert met["worker loop vs the tutorial's statements, 1 proc"] == {
        "target": "worker loop vs the tutorial's statements, 1 proc",
        "value": 2.0,
        "goal": ">= 5.0",
        "met": False,
    }
    assert met["empty claim: tutorial / labqueue"]["met"]
    assert met["claim with 1,000,000 vs 10,000 finished"]["met"]
    assert not bench_report.targets(fake_results(growth=1.6))[-1]["met"]


def test_the_tutorial_code_target_is_the_median_of_paired_round_ratios():
    results = fake_results(worker_ratio=4.0)
    results["summary"].append({"contender": "tutorial_code", "procs": 1, "median_jobs_per_s": 1.0})
    results["runs"] = [
        {"contender": key, "procs": 1, "round": rnd, "jobs_per_s": speed}
        for rnd, pair in enumerate(((6000.0, 1000.0), (5000.0, 1000.0), (4000.0, 1000.0)), 1)
        for key, speed in zip(("labqueue_b10", "tutorial_code"), pair, strict=True)
    ]
    met = {t["target"]: t for t in bench_report.targets(results)}
    assert met["worker loop vs the tutorial's code, 1 proc"] == {
        "target": "worker loop vs the tutorial's code, 1 proc",
        "value": 5.0,
        "goal": ">= 5.0",
        "met": True,
    }
    assert not met["worker loop vs the tutorial's statements, 1 proc"]["met"]  # both are reported


def test_the_huey_target_is_the_median_of_paired_round_ratios():
    results = fake_results(worker_ratio=6.0)
    results["summary"].append({"contender": "huey_worker", "procs": 1, "median_jobs_per_s": 1.0})
    # Round 1 ran on a slow spell (both drains slower); each round's own ratio counts.
    results["runs"] = [
        {"contender": "labqueue_b10", "procs": 1, "round": 1, "jobs_per_s": 3000.0},
        {"contender": "huey_worker", "procs": 1, "round": 1, "jobs_per_s": 1000.0},
        {"contender": "labqueue_b10", "procs": 1, "round": 2, "jobs_per_s": 8000.0},
        {"contender": "huey_worker", "procs": 1, "round": 2, "jobs_per_s": 2000.0},
        {"contender": "labqueue_b10", "procs": 1, "round": 3, "jobs_per_s": 7000.0},
        {"contender": "huey_worker", "procs": 1, "round": 3, "jobs_per_s": 3500.0},
    ]
    met = {t["target"]: t for t in bench_report.targets(results)}
    assert met["worker loop vs huey's worker path, 1 proc"] == {
        "target": "worker loop vs huey's worker path, 1 proc",
        "value": 3.0,  # the rounds' ratios are 3.0, 4.0 and 2.0
        "goal": ">= 3.0",
        "met": True,
    }


def test_plot_comparison_draws_labelled_bars_and_marks_duplicates():
    fig = bench_report.plot_comparison(fake_results(duplicates=4))
    (ax,) = fig.axes
    assert "jobs/s" in ax.get_xlabel()
    assert len(ax.patches) == 2
    assert any("4 duplicate deliveries" in t.get_text() for t in ax.texts)
    assert ax.get_yticklabels()[0].get_text() == CONTENDERS["labqueue_b10"].label
    plt.close(fig)


def test_summary_frame_lists_the_fastest_first():
    results = fake_results()
    for row in results["summary"]:
        row.update(deliveries=100, distinct=100, finish="lease + fenced complete")
    frame = bench_report.summary_frame(results)
    assert list(frame["label"]) == [CONTENDERS["labqueue_b10"].label, CONTENDERS["tutorial_l1"].label]
    assert list(frame["ratio_to_tutorial"]) == [2.0, 1.0]


def test_the_profile_counts_statements_transactions_and_frames_per_job(tmp_path):
    rows = {r["contender"]: r for r in profile(100, 1, tmp_path)}
    one, ten, tutorial = rows["labqueue_b1"], rows["labqueue_b10"], rows["tutorial_l1"]
    # a batch of one: BEGIN, COMPLETE_MANY (of one), READY_ROWS, CLAIM_IDS, COMMIT (READY_ROWS
    # says that no lease on a last attempt ran out, so RETIRE_EXHAUSTED does not run)
    assert one["statements_per_job"] == pytest.approx(5, abs=0.1)
    assert one["write_transactions_per_job"] == pytest.approx(1, abs=0.05)
    # a batch of ten: the same five statements once per ten jobs (and the first claim_batch)
    assert ten["statements_per_job"] == pytest.approx(0.5, abs=0.1)
    assert ten["write_transactions_per_job"] == pytest.approx(0.1, abs=0.02)
    assert tutorial["statements_per_job"] == pytest.approx(7, abs=0.1)
    assert tutorial["write_transactions_per_job"] == pytest.approx(2, abs=0.05)
    assert 0 < ten["wal_frames_per_job"] < one["wal_frames_per_job"] < tutorial["wal_frames_per_job"]
    assert all(r["cpu_us_per_job"] > 0 for r in rows.values())


def test_bad_sizes_are_refused_by_name():
    with pytest.raises(InvalidArgument, match="jobs must be a whole number of at least 1, got 0"):
        bench.Sizes(jobs=0)
    with pytest.raises(InvalidArgument, match="procs"):
        bench.Sizes(procs=(1, -4))
    with pytest.raises(SystemExit):
        bench.main(["--rounds", "0"])
    with pytest.raises(InvalidArgument, match="contenders must include 'tutorial_l1'"):
        bench.run_bench(bench.Sizes(**bench.QUICK), keys=["labqueue_b10"])


def test_a_worker_that_dies_without_reporting_ends_the_run():
    class Dead:
        exitcode = 1

    with pytest.raises(RuntimeError, match="labqueue_b10: a process exited with code 1 before reporting"):
        collect_reports(queue.Queue(), [Dead()], "labqueue_b10", timeout=60)


def test_load_results_names_a_missing_file(tmp_path):
    with pytest.raises(InvalidArgument, match="no bench results at"):
        bench_report.load_results(tmp_path / "none.json")


@pytest.mark.slow
def test_quick_mode_runs_every_contender_end_to_end(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("LABQUEUE_WORK", str(tmp_path / "work"))
    out = tmp_path / "results.json"
    assert bench.main(["--quick", "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert {r["contender"] for r in results["summary"]} == set(CONTENDERS)
    ours = ("labqueue_b1", "labqueue_b10", "labqueue_b100", "tutorial_l1", "tutorial_l10", "tutorial_code")
    ours += ("floor_one_tx",)
    for row in results["summary"]:  # the peers' losses and duplicates are reported, not tested
        if row["contender"] in ours:
            assert row["distinct"] == row["rounds"] * results["meta"]["sizes"]["jobs"], row
            assert row["duplicates"] == 0 and row["missed"] == 0 and row["left_in_store"] == 0, row
    assert results["empty_poll"]["labqueue_claim_while_writer_holds_lock"] is True
    assert results["empty_poll"]["tutorial_claim_while_writer_holds_lock"] is False
    assert {r["contender"] for r in results["profile"]} >= {"labqueue_b10", "tutorial_l1"}
    assert "targets:" in capsys.readouterr().out
    assert bench_report.load_results(out) == results


def test_a_missing_peer_library_is_named_before_anything_runs(monkeypatch, capsys):
    real = bench.importlib.util.find_spec
    monkeypatch.setattr(
        bench.importlib.util, "find_spec", lambda name: None if name == "huey" else real(name)
    )
    assert bench.missing_peers(["labqueue_b10", "tutorial_l1", "huey", "litequeue"]) == ["huey"]
    with pytest.raises(SystemExit) as exited:
        bench.main(["--quick"])
    assert exited.value.code == 2
    assert "huey not installed" in capsys.readouterr().err


def test_the_bare_floors_claim_through_the_ready_index_without_sorting(tmp_path):
    from labqueue import JobQueue
    from labqueue.bench.contenders import FLOOR_CLAIM, FLOOR_TAKE

    with JobQueue(tmp_path / "plan.db") as q:
        for statement, params in ((FLOOR_TAKE, (1.0,)), (FLOOR_CLAIM, (1.0, 2.0, "t", "w"))):
            plan = " | ".join(row[3] for row in q.db.execute("EXPLAIN QUERY PLAN " + statement, params))
            assert "jobs_ready" in plan and "TEMP B-TREE" not in plan, plan


def test_every_bench_races_round_robin_starting_one_place_further_each_round():
    from labqueue.bench.tally import race_rounds

    order, lines = [], []

    def race(key: str, procs: int) -> dict:
        order.append((key, procs))
        return {"jobs_per_s": 10.0, "deliveries": 5}

    runs = race_rounds(3, (1, 4), ("a", "bb", "c"), race, lines.append)
    assert order[:6] == [("a", 1), ("bb", 1), ("c", 1), ("a", 4), ("bb", 4), ("c", 4)]
    assert order[6:9] == [("bb", 1), ("c", 1), ("a", 1)]  # round 2 starts one place on
    assert order[12:15] == [("c", 1), ("a", 1), ("bb", 1)]
    assert [run["round"] for run in runs] == [1] * 6 + [2] * 6 + [3] * 6
    assert lines[0] == "round 1/3  1 proc  a          10 jobs/s  5 deliveries"
    order.clear()
    race_rounds(2, (1,), ("sqlite", "postgres"), race)
    assert order == [("sqlite", 1), ("postgres", 1), ("postgres", 1), ("sqlite", 1)]  # two swap places
