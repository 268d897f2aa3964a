"""Run-wide settings for pytest, notebooks included.

The suite runs on several processes (pytest-xdist, `--dist loadfile`: every file, and so
every notebook, on one process in order), the longest files first (see
pytest_collection_modifyitems). The notebooks and the labs put their scratch
databases in labqueue.lab.scratch.work_folder(), by name; each test process gets a
folder of its own there, so two notebooks that both use "jobs.db" never share it.
Kernels started by nbval inherit the setting."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent


def pytest_configure(config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and not os.environ.get("LABQUEUE_WORK"):
        os.environ["LABQUEUE_WORK"] = str(ROOT / "work" / f"pytest-{worker}")


def file_rank(item: pytest.Item) -> int:
    """Where a test's file goes in the run: the browser tests of the notebooks (each file runs
    half the notebooks in JupyterLab, minutes each), then the other browser tests, then the
    notebooks (nbval, up to a minute each), then everything else."""
    path = item.nodeid.split("::")[0]
    if path.startswith("tests/browser/"):
        return 0 if "notebooks" in path else 1
    return 2 if path.startswith("notebooks/") else 3


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest files first, so no long file starts last and runs on alone while the other test
    processes sit idle (tasks.py passes --no-loadscope-reorder, which keeps this order; by
    default pytest-xdist orders files by how many tests they hold). The sort is stable: the
    tests of a file keep their order."""
    items.sort(key=file_rank)
