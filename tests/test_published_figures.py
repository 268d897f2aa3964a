"""Every benchmark figure the guide's benchmarks page (docs/package/benchmarks.md) publishes is
the saved run's, as labqueue.bench.published writes it from data/: a figure typed by hand, or
left behind by a new run, fails here."""

from __future__ import annotations

import json
import shutil

import pytest

from labqueue.bench import published


def test_the_benchmarks_page_publishes_every_figure_paragraph():
    assert set(published.blocks(published.PAGE.read_text())) == set(published.FILES)


@pytest.mark.parametrize("name", sorted(published.FILES))
def test_each_published_paragraph_is_what_its_data_file_says(name):
    body = published.blocks(published.PAGE.read_text())[name]
    assert body == published.render(name), (
        f"{published.PAGE.name}'s {name} figures differ from data/{published.FILES[name]}: "
        "python -m labqueue.bench figures --page rewrites them"
    )


def test_a_new_run_rewrites_only_the_paragraph_whose_data_changed(tmp_path):
    data = tmp_path / "data"
    shutil.copytree(published.DATA, data)
    page = tmp_path / "benchmarks.md"
    page.write_text(published.PAGE.read_text())
    assert published.rewrite(page, data) == []  # nothing new: nothing rewritten

    results = json.loads((data / "bench_pg.json").read_text())
    results["summary"][0]["postgres_jobs_per_s"] = 123_456.0
    (data / "bench_pg.json").write_text(json.dumps(results))
    assert published.rewrite(page, data) == ["bench_pg"]
    text = page.read_text()
    assert "PostgreSQL 123,456 /" in text.replace("\n", " ")
    assert published.blocks(text)["bench"] == published.blocks(published.PAGE.read_text())["bench"]


def test_the_peers_paragraph_names_procrastinate_only_when_the_run_raced_it(tmp_path):
    results = json.loads((published.DATA / "bench_pg_peers.json").read_text())
    results["summary"] = [row for row in results["summary"] if row["contender"] != "procrastinate"]
    results["meta"].pop("procrastinate", None)

    def paragraph() -> str:
        (tmp_path / published.FILES["bench_pg_peers"]).write_text(json.dumps(results))
        return published.render("bench_pg_peers", tmp_path).replace("\n", " ")

    assert "procrastinate" not in paragraph()  # a run from before the bench raced it
    results["summary"] += [
        {**row, "contender": "procrastinate", "median_jobs_per_s": 1234.0, "labqueue_ratio": 3.21}
        for row in results["summary"]
        if row["contender"] == "pgqueuer"
    ]
    results["meta"]["procrastinate"] = "3.99.0"
    text = paragraph()
    assert "procrastinate 3.99.0's worker, which fetches one job at a time, 1,234 / 1,234" in text
    assert "(labqueue 3.21x / 3.21x it," in text


def test_the_bench_paragraph_gives_each_loops_wal_frames_per_job_from_the_profile(tmp_path):
    results = json.loads((published.DATA / "bench_results.json").read_text())

    def paragraph() -> str:
        (tmp_path / published.FILES["bench"]).write_text(json.dumps(results))
        return published.render("bench", tmp_path).replace("\n", " ")

    for row in results["profile"]:
        row["wal_frames_per_job"] = {"tutorial_l1": 4.5, "labqueue_b10": 0.25}.get(row["contender"], 9.0)
    assert "write 4.50 WAL frames (pages) per job, labqueue's loop 0.25 (the profile" in paragraph()
    results.pop("profile")
    assert "WAL frames" not in paragraph()  # a run from before the bench profiled both


def test_the_bench_paragraph_says_which_processes_kept_their_heaps_top(tmp_path):
    results = json.loads((published.DATA / "bench_results.json").read_text())

    def paragraph() -> str:
        (tmp_path / published.FILES["bench"]).write_text(json.dumps(results))
        return published.render("bench", tmp_path).replace("\n", " ")

    results["meta"]["heap"] = "every contender"
    assert "in processes that all kept their heap's top" in paragraph()
    results["meta"].pop("heap")  # a run from before every race process kept it
    assert "the others ran with their allocator's defaults" in paragraph()
