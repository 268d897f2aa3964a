"""Fixtures for the browser test: one throwaway JupyterLab and one headless Chromium per run."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_lab import CHROMIUM, CHROMIUM_ARGS, LabServer, LabWindow, scratch_folder


@pytest.fixture(scope="session")
def lab_server() -> Iterator[LabServer]:
    scratch = scratch_folder()
    server = LabServer(scratch)
    try:
        server.start()
        print(f"\nJupyterLab on port {server.port}, started with: {' '.join(server.command[:4])} ...")
        yield server
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.skip(f"{CHROMIUM} is missing (python tasks.py test installs it with apt on Debian)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        # Debian's Chromium, never a downloaded browser.
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()


@pytest.fixture(scope="session")
def lab_window(browser, lab_server: LabServer) -> Iterator[LabWindow]:
    """JupyterLab loaded once; each notebook opens in it as a tab."""
    window = LabWindow(lab_server, browser)
    try:
        yield window
    finally:
        window.close()
