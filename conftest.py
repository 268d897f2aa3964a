"""Run-wide settings for pytest, notebooks included.

The suite runs on several processes (pytest-xdist, `--dist loadfile`: every file, and so
every notebook, on one process in order). The notebooks and the labs put their scratch
databases in labqueue.lab.scratch.work_folder(), by name; each test process gets a
folder of its own there, so two notebooks that both use "jobs.db" never share it.
Kernels started by nbval inherit the setting."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def pytest_configure(config) -> None:
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and not os.environ.get("LABQUEUE_WORK"):
        os.environ["LABQUEUE_WORK"] = str(ROOT / "work" / f"pytest-{worker}")
