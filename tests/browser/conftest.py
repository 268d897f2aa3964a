"""Fixtures for the browser test: one throwaway JupyterLab and one headless Chromium per run."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from browser_lab import (
    CHROMIUM,
    CHROMIUM_ARGS,
    LabServer,
    LabWindow,
    NotebookPage,
    build_lab_env,
    scratch_folder,
)
from panels import find_notebook

HERE = Path(__file__).resolve().parent


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "drives(number): uses the widgets of notebook <number> on the page its clean run left"
        " open, and runs right after that run",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move each test marked drives("NN") to just after test_notebook_runs_clean[NN_...], so a
    notebook's page is used as soon as it has run and then closed, so one or two kernels are
    up at a time rather than one per driven notebook (Binder gives a session 2 GB, and the
    clean runs check their peak against it). Every other test keeps its place."""

    def driven(item: pytest.Item) -> str | None:
        mark = item.get_closest_marker("drives")
        return mark.args[0] if mark and Path(item.path).resolve().parent == HERE else None

    def ran(item: pytest.Item) -> str | None:
        callspec = getattr(item, "callspec", None)
        if getattr(item, "originalname", "") != "test_notebook_runs_clean" or callspec is None:
            return None
        return Path(callspec.params["notebook"]).name[:2]

    runs = {ran(item) for item in items} - {None}
    movers = [item for item in items if driven(item) in runs]
    ordered: list[pytest.Item] = []
    for item in items:
        if item in movers:
            continue
        ordered.append(item)
        ordered += [m for m in movers if driven(m) == ran(item)]
    items[:] = ordered


@pytest.fixture(scope="session")
def lab_server() -> Iterator[LabServer]:
    build_lab_env()
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


@pytest.fixture(scope="session")
def ran_pages(lab_window: LabWindow) -> Iterator[dict[str, NotebookPage]]:
    """Pages already run by test_notebook_runs_clean, kept for the tests that drive widgets."""
    pages: dict[str, NotebookPage] = {}
    yield pages
    for page in pages.values():
        page.close()


@pytest.fixture
def open_notebook(lab_window: LabWindow) -> Callable[[Path], NotebookPage]:
    def opener(notebook: Path, window: LabWindow = lab_window) -> NotebookPage:
        page = NotebookPage(window, notebook)
        try:
            page.open()
        except BaseException:
            page.close()
            raise
        return page

    return opener


@pytest.fixture
def ran_notebook(open_notebook, ran_pages) -> Iterator[Callable[[str], NotebookPage]]:
    """The notebook numbered `number`, opened and run clean (reusing an earlier run's page);
    closed, with its kernel, when the test is over."""
    used: list[str] = []

    def get(number: str) -> NotebookPage:
        used.append(number)
        if number not in ran_pages:
            page = open_notebook(find_notebook(number))
            ran_pages[number] = page
            state = page.run_all()
            assert page.problems(state) == []
        return ran_pages[number]

    yield get
    for number in used:
        page = ran_pages.pop(number, None)
        if page is not None:
            page.close()
