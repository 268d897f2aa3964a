"""A --handlers module that cannot be imported ends the worker with one line naming the module
and the cause, exit code 2: never a traceback, and nothing is opened or claimed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from cli_helpers import labqueue, one_line_error

from labqueue import HandlersNotLoaded, LabqueueError
from labqueue import handlers as registry

# module name: (its source, what the one line must say about the cause)
BROKEN = {
    "raises_on_import": (
        "x = 1\nraise RuntimeError('the config file is missing')\n",
        "RuntimeError: the config file is missing",
    ),
    "bad_syntax": ("def handler(:\n    pass\n", "SyntaxError"),
    "missing_dependency": ("import no_such_dependency_here\n", "No module named 'no_such_dependency_here'"),
}


@pytest.fixture
def app(tmp_path, monkeypatch):
    """A folder holding the broken modules, and an environment that can import them."""
    folder = tmp_path / "app"
    folder.mkdir()
    for name, (source, _) in BROKEN.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    monkeypatch.syspath_prepend(str(folder))
    paths = [str(folder), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths)}


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_load_for_worker_names_the_module_and_the_cause(app, module, tmp_path):
    with pytest.raises(HandlersNotLoaded) as err:
        registry.load_for_worker([module], folder=str(tmp_path))
    message = str(err.value)
    assert f"cannot import handler module {module!r}" in message
    assert BROKEN[module][1] in message
    assert "\n" not in message
    assert isinstance(err.value, ImportError) and isinstance(err.value, LabqueueError)


def test_a_runtime_error_on_import_says_where_it_was_raised(app, tmp_path):
    with pytest.raises(HandlersNotLoaded, match=r"raises_on_import\.py, line 2\)"):
        registry.load_for_worker(["raises_on_import"], folder=str(tmp_path))


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_labqueue_worker_is_one_line_and_exit_2(app, module, tmp_path):
    db = tmp_path / "jobs.db"
    result = labqueue("worker", db, "--handlers", module, "--idle-exit", "0", env=app)
    line = one_line_error(result, 2)
    assert f"cannot import handler module {module!r}" in line and BROKEN[module][1] in line
    assert not db.exists()  # refused before the queue was opened


@pytest.mark.parametrize("module", sorted(BROKEN))
def test_python_dash_m_labqueue_worker_is_one_line_and_exit_2(app, module, tmp_path):
    db = tmp_path / "jobs.db"
    command = [sys.executable, "-m", "labqueue.worker", str(db), "w1", "5", "0", "--handlers", module]
    result = subprocess.run(command, env=app, capture_output=True, text=True, timeout=60)
    line = one_line_error(result, 2)
    assert f"cannot import handler module {module!r}" in line and BROKEN[module][1] in line
    assert not db.exists()
