"""A learner breaks a saved cell in a real kernel, as notebooks 02 and 04 invite: the kernel
and the worker processes both run the edit, the diff cell says so, and the Check names the
broken rule. Re-running the first cell, then the cells below the edited one (the reset as
notebook 00 teaches it), puts both back to the course's code and the Check back to green. The
next notebook starts from the course's code whatever the last one was left holding."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
COURSE = "this kernel and your worker processes run the course's code, line for line"

# What a worker process started on the workspace loads as `complete` and `fail`.
WORKERS_SEE = """
import subprocess, sys
_probe = (
    "import inspect, sys; from labqueue.tutorial import process; process.load(sys.argv[1]); "
    "from labqueue.tutorial.jobqueue import FAIL, JobQueue; "
    "print(inspect.getsource(JobQueue.complete)); print(FAIL)"
)
print(subprocess.run([sys.executable, "-c", _probe, str(ws.folder)], capture_output=True, text=True,
                     check=True).stdout)
"""
# What the kernel runs: its class's `complete`, and the `FAIL` its `fail` reads (once it has one).
KERNEL_SEES = """
import inspect
print(inspect.getsource(JobQueue.complete))
if hasattr(JobQueue, "fail"):
    print(JobQueue.fail.__globals__["FAIL"])
"""


class Learner:
    """One notebook open in a kernel, its cells run one at a time as a learner runs them."""

    def __init__(self, name: str, scratch: Path) -> None:
        self.nb = nbformat.read(NOTEBOOKS / name, as_version=4)
        os.environ["LABQUEUE_WORK"] = str(scratch)
        self.client = NotebookClient(
            self.nb,
            timeout=300,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(NOTEBOOKS)}},
        )

    def index(self, starts: str) -> int:
        cells = self.nb.cells
        (found,) = [i for i, c in enumerate(cells) if c.cell_type == "code" and c.source.startswith(starts)]
        return found

    def first(self) -> int:
        return next(i for i, c in enumerate(self.nb.cells) if c.cell_type == "code")

    def run(self, index: int) -> tuple[str, str]:
        """(what the cell printed, its error's text or '')."""
        cell = self.client.execute_cell(self.nb.cells[index], index)
        printed = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
        errors = [f"{o.ename}: {o.evalue}" for o in cell.outputs if o.output_type == "error"]
        return printed, "\n".join(errors)

    def run_code(self, source: str) -> str:
        self.nb.cells.append(nbformat.v4.new_code_cell(source))
        printed, error = self.run(len(self.nb.cells) - 1)
        assert not error, error
        return printed

    def run_from(self, first: int) -> dict[int, tuple[str, str]]:
        code = [i for i in range(first, len(self.nb.cells)) if self.nb.cells[i].cell_type == "code"]
        return {i: self.run(i) for i in code}

    def edit(self, index: int, old: str, new: str) -> None:
        assert old in self.nb.cells[index].source
        self.nb.cells[index].source = self.nb.cells[index].source.replace(old, new)


def break_and_reset(learner: Learner, edited: int, old: str, new: str, check: int, broken_rule: str):
    """Run the notebook, break cell `edited`, run what follows; then the reset. Returns what
    the kernel and the workers showed, broken and after the reset."""
    with learner.client.setup_kernel():
        learner.run_from(0)
        learner.edit(edited, old, new)
        learner.run(edited)
        broken = learner.run_from(edited + 1)
        diff = next(out for out, _ in broken.values() if "course/jobqueue.py" in out)
        assert broken_rule in broken[check][1], f"the Check passed a broken queue: {broken[check]}"
        assert "+++ your workers' jobqueue.py" in diff and "+++ this kernel's jobqueue.py" in diff, diff
        seen_broken = learner.run_code(WORKERS_SEE), learner.run_code(KERNEL_SEES)

        learner.run(learner.first())  # the first code cell: the reset
        learner.edit(edited, new, old)  # not run: the reset alone must do it; the learner undoes too
        fixed = learner.run_from(edited + 1)
        seen_fixed = learner.run_code(WORKERS_SEE), learner.run_code(KERNEL_SEES)
    assert not fixed[check][1], f"after the reset the Check still fails: {fixed[check][1]}"
    assert any(COURSE in out for out, _ in fixed.values()), "the diff cell after the reset"
    return seen_broken, seen_fixed


# (notebook, the saved cell a learner breaks, the text removed, the Check, what it must name,
#  what the kernel and the workers then run)
BREAKS = [
    (
        "02_leases.ipynb",
        "# jobqueue.py\n@add_to_class(JobQueue)\ndef complete(",
        " AND lease_token = :token",
        "steps = ",
        "complete is not fenced by the token",
        "WHERE id = :id AND state = 'running'",
    ),
    (
        "04_zombie_workers.ipynb",
        "# jobqueue.py\n# A failure",
        "lease_token = :token AND ",
        "assert real.taken_over",
        "not fenced",
        "WHERE id = :id AND state = 'running'\nRETURNING state",
    ),
]


@pytest.mark.timeout(600)
@pytest.mark.parametrize(
    ("name", "cell", "removed", "check", "rule", "broken_text"), BREAKS, ids=["02", "04"]
)
def test_a_broken_cell_runs_in_kernel_and_workers_until_the_reset(
    tmp_path, name, cell, removed, check, rule, broken_text
):
    learner = Learner(name, tmp_path)
    edited = learner.index(cell)
    broken, fixed = break_and_reset(learner, edited, removed, "", learner.index(check), rule)
    for seen in broken:  # what the workers load, then what the kernel runs
        assert broken_text in seen, seen
    for seen in fixed:
        assert broken_text not in seen, seen


def test_the_next_notebook_starts_from_the_courses_code(tmp_path):
    """02 left broken in one kernel; 03, opened next, holds the course's code."""
    left = Learner("02_leases.ipynb", tmp_path)
    nxt = Learner("03_crash_recovery.ipynb", tmp_path)
    with left.client.setup_kernel(), nxt.client.setup_kernel():
        left.run_from(0)
        edited = left.index("# jobqueue.py\n@add_to_class(JobQueue)\ndef complete(")
        left.edit(edited, " AND lease_token = :token", "")
        assert not left.run(edited)[1]
        nxt.run(nxt.first())
        printed, error = nxt.run(nxt.index("print(ws.changes()"))
        assert not error and COURSE in printed, printed
        assert "AND lease_token = :token" in nxt.run_code(WORKERS_SEE)


def test_an_edit_of_an_earlier_notebooks_method_is_reported_and_reset(tmp_path):
    """Notebook 05's way: a new cell redefines `complete` on the package's own class; a
    variable that only shares a course name (09's exercise sets SYNCHRONOUS = "FULL") is
    neither reported nor touched."""
    from IPython.core.interactiveshell import InteractiveShell

    from labqueue.tutorial import jobqueue
    from labqueue.tutorial.workspace import follow

    course_complete = jobqueue.JobQueue.complete
    first_cell = "from labqueue.tutorial.jobqueue import Job, JobQueue, add_to_class\n"
    shell = InteractiveShell.instance()
    try:
        shell.run_cell(first_cell)
        ws = follow("notebooks/05_effect_in_transaction.ipynb", folder=tmp_path / "ws")
        shell.run_cell('SYNCHRONOUS = "FULL"')
        assert ws.changes() == ""
        edited = (
            "# jobqueue.py\n@add_to_class(JobQueue)\ndef complete(self, job, effect=None):\n    return True\n"
        )
        assert shell.run_cell(edited).success
        assert jobqueue.JobQueue.complete is not course_complete  # the kernel runs the edit
        changes = ws.changes()
        assert "+++ your workers' jobqueue.py" in changes and "+++ this kernel's jobqueue.py" in changes
        assert "-    with self._tx() as db:" in changes.split("+++ this kernel's jobqueue.py")[1]

        shell.run_cell(first_cell)
        ws = follow("notebooks/05_effect_in_transaction.ipynb", folder=tmp_path / "ws")  # the reset
        assert jobqueue.JobQueue.complete is course_complete
        assert shell.user_ns["complete"] is course_complete and shell.user_ns["SYNCHRONOUS"] == "FULL"
        assert ws.changes() == ""
    finally:
        InteractiveShell.clear_instance()
        from labqueue.tutorial import kernel

        kernel.restore_package()


def _course_cell(name: str) -> str:
    """The course's saved cell that defines `name`, as the notebooks print it for pasting."""
    from labqueue.tutorial.sections import package_text, split

    (body,) = [s.body for s in split(package_text("jobqueue"))[1] if name in s.body]
    return "# jobqueue.py\n" + body


def _effect_first(cell: str) -> str:
    """05's break-it: the effect moved up, before the fenced UPDATE."""
    effect = "        if effect is not None:\n            effect(db)\n"
    assert effect in cell
    return cell.replace(effect, "").replace(
        "    with self._tx() as db:\n", "    with self._tx() as db:\n" + effect
    )


# Every other break-it, as its notebook words it: (notebook, the edited cell's first text and the
# edit, or None and the new cell pasted under "Break it on purpose", the cells the notebook says to
# run again, what the Check must then name). 01's race is chance, so its break-it is not here.
EDITED = [
    ("03_crash_recovery.ipynb", "# worker.py",
     ("JobQueue(path, lease_seconds=lease_seconds)", "JobQueue(path)"),
     "the lease length does not reach the worker's JobQueue"),
    ("06_heartbeat.ipynb", "# jobqueue.py\n@add_to_class(JobQueue)\ndef heartbeat(",
     (" AND lease_token = :token", ""), "heartbeat is not fenced by the lease token"),
]  # fmt: skip
PASTED = [
    ("05_effect_in_transaction.ipynb", _effect_first(_course_cell("def complete(")),
     ['print("--- effect passed to complete()'], "does not run the effect after the fence"),
    ("07_retries_and_poison.ipynb", _course_cell("CLAIM = ").replace("attempts = attempts + 1,", ""),
     ["rounds = retries.poison_rounds("], "attempts are not counted at claim"),
    ("09_throughput.ipynb", _course_cell("def claim(").replace('"limit": limit', '"limit": 1'),
     ["N_JOBS = "], "handed out one job at a time"),
    ("11_testing.ipynb", _course_cell("def heartbeat(").replace(" AND lease_token = :token", ""),
     ["yours = testing.run_tutorial_suite("], "test_a_heartbeat_after_a_takeover_is_refused"),
    ("12_chaos.ipynb",
     _course_cell("def complete(").replace(" AND lease_token = :token AND state = 'running'", ""),
     ["takeover_mix = "], "not fenced by the lease token"),
]  # fmt: skip


@contextlib.contextmanager
def _ran(name: str, scratch: Path) -> Iterator[Learner]:
    """The notebook run top to bottom in a kernel of its own, kept up for the test."""
    learner = Learner(name, scratch)
    with learner.client.setup_kernel():
        learner.run_from(0)
        yield learner


def _check(learner: Learner) -> int:
    (heading,) = [i for i, c in enumerate(learner.nb.cells) if c.source.startswith("## Check")]
    return heading + 1


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("name", "cell", "edit", "rule"), EDITED, ids=[e[0][:2] for e in EDITED])
def test_every_edited_cell_break_it_resets(tmp_path, name, cell, edit, rule):
    with _ran(name, tmp_path) as learner:
        edited, check = learner.index(cell), _check(learner)
        learner.edit(edited, *edit)
        assert not learner.run(edited)[1]
        assert rule in learner.run_from(edited + 1)[check][1]
        learner.run(learner.first())  # the reset, then the cells below the edit
        after = learner.run_from(edited + 1)
    assert not after[check][1], after[check]
    assert any(COURSE in out for out, _ in after.values())


@pytest.mark.timeout(900)
@pytest.mark.parametrize(("name", "pasted", "again", "rule"), PASTED, ids=[p[0][:2] for p in PASTED])
def test_every_pasted_cell_break_it_resets(tmp_path, name, pasted, again, rule):
    with _ran(name, tmp_path) as learner:
        (at,) = [i + 1 for i, c in enumerate(learner.nb.cells) if "## Break it on purpose" in c.source]
        learner.nb.cells.insert(at, nbformat.v4.new_code_cell(pasted))  # the learner's new cell
        check = _check(learner)
        reruns = [learner.index(starts) for starts in again]
        assert not learner.run(at)[1]
        for index in reruns:
            learner.run(index)
        assert rule in learner.run(check)[1]
        del learner.nb.cells[at]  # "delete your cell", then the reset and the cells the text names
        check, reruns = check - 1, [i - (i > at) for i in reruns]
        learner.run(learner.first())
        for index in reruns:
            assert not learner.run(index)[1]
        printed, error = learner.run(check)
    assert not error, error
    assert printed.strip()
