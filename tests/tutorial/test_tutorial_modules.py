"""labqueue.tutorial's machinery: the package's modules are the notebooks' saved cells, a
learner's workspace follows the cells they run, and worker processes run that copy."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import pytest

from labqueue.tutorial import build, kernel, process
from labqueue.tutorial.jobqueue import JobQueue
from labqueue.tutorial.sections import (
    MODULES,
    Section,
    defined_names,
    join,
    package_text,
    replace,
    saved_cell,
    split,
)
from labqueue.tutorial.workspace import Workspace, follow

# A learner's edit of complete(): it still checks the token, and also leaves a mark.
MARKED_COMPLETE = '''# jobqueue.py
@add_to_class(JobQueue)
def complete(self, job, effect=None):
    with self._tx() as db:
        cur = db.execute(
            "UPDATE jobs SET state = 'done', last_error = 'edited by the learner'"
            " WHERE id = ? AND lease_token = ? AND state = 'running'",
            (job.id, job.lease_token),
        )
        return cur.rowcount == 1
'''


def test_the_package_modules_are_the_notebooks_saved_cells():
    assert build.differing() == [], "run python -m labqueue.tutorial.build"


@pytest.mark.parametrize("module", MODULES)
def test_every_module_splits_into_its_cells_and_joins_back(module):
    header, sections = split(package_text(module))
    assert sections, f"{module} has no saved cells"
    assert header.startswith('"""') and all(s.notebook.startswith("notebooks/") for s in sections)
    assert join(header, sections) == package_text(module)


def test_every_saved_cell_stays_short():
    long = {(m, s.notebook, len(s.body.splitlines())) for m in MODULES for s in split(package_text(m))[1]
            if len(s.body.splitlines()) > 40}
    assert long == set()


def test_a_saved_cell_is_named_by_its_first_line():
    assert saved_cell("# jobqueue.py\nX = 1\n") == ("jobqueue", "X = 1")
    assert saved_cell("x = 1\n# jobqueue.py") is None
    assert saved_cell("# notes.py\nX = 1") is None  # not one of the tutorial's modules
    assert saved_cell("# jobqueue.pyc\nX = 1") is None


def test_a_cell_replaces_the_one_that_defines_the_same_names():
    sections = [Section("notebooks/a.ipynb", "A = 1"), Section("notebooks/b.ipynb", "def f():\n    pass")]
    edited = replace(sections, "here", "def f():\n    return 2")
    assert edited == [sections[0], Section("notebooks/b.ipynb", "def f():\n    return 2")]
    assert replace(sections, "here", "B = 3")[-1] == Section("here", "B = 3")
    assert defined_names("def (:") == frozenset()


def test_a_workspace_starts_as_the_course_and_shows_the_learners_edits(tmp_path):
    ws = Workspace(tmp_path / "ws")
    assert all(ws.path(m).read_text() == package_text(m) for m in MODULES)
    assert ws.changes() == ""
    assert ws.save("print('not saved')") is None
    assert ws.save(MARKED_COMPLETE) == "jobqueue"
    assert "edited by the learner" in ws.path("jobqueue").read_text()
    assert "+            \"UPDATE jobs SET state = 'done', last_error" in ws.changes()
    compile(ws.path("jobqueue").read_text(), "jobqueue.py", "exec")


def test_worker_processes_run_the_workspace_copy(tmp_path):
    ws = Workspace(tmp_path / "ws")
    ws.save(MARKED_COMPLETE)
    for code, expected in ((ws.folder, "edited by the learner"), (None, None)):
        path = tmp_path / f"jobs-{expected is None}.db"
        q = JobQueue(path)
        q.enqueue("noop", {})
        worker = process.start_worker(path, "w1", 5.0, idle_exit=0.2, code=code)
        assert worker.wait(timeout=60) == 0
        assert tuple(q.db.execute("SELECT state, last_error FROM jobs").fetchone()) == ("done", expected)
        q.db.close()


def test_the_worker_command_refuses_bad_arguments(tmp_path):
    run = subprocess.run([sys.executable, "-m", "labqueue.tutorial.process", "worker", "x.db", "w", "soon"],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and "LEASE and IDLE_EXIT are seconds" in run.stderr


def test_follow_saves_each_tutorial_cell_a_notebook_runs(tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_cell(package_text("jobqueue"))  # a class of the shell's own, not the package's
        ws = follow("notebooks/99_test.ipynb", folder=tmp_path / "ws")
        shell.run_cell(MARKED_COMPLETE)
        assert "edited by the learner" in ws.path("jobqueue").read_text()
        shell.run_cell("# jobqueue.py\nTABLE = 1 / 0\n")  # raises: the file keeps what it had
        assert "CREATE TABLE IF NOT EXISTS jobs" in ws.path("jobqueue").read_text()
        again = follow("notebooks/99_test.ipynb", folder=tmp_path / "again")  # a re-run starts afresh
        shell.run_cell("# race.py\nOLDEST_QUEUED = 'SELECT 1'\n")
        assert "SELECT 1" in again.path("race").read_text()
        assert "SELECT 1" not in ws.path("race").read_text()
    finally:
        InteractiveShell.clear_instance()
        kernel.restore_package()  # the cells above set methods on the package's own class


def test_the_learners_queue_file_opens_a_queue(tmp_path):
    ws = Workspace(tmp_path / "ws")
    namespace: dict = {}
    exec(compile(ws.path("jobqueue").read_text(), "jobqueue.py", "exec"), namespace)
    q = namespace["JobQueue"](tmp_path / "q.db")
    assert q.enqueue("t", {}) == 1
    assert isinstance(q.db, sqlite3.Connection)
