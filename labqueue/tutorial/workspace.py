"""The learner's copy of the tutorial's modules, kept in step with the notebook's cells.

A Part 1 notebook calls `follow()` once. From then on, every cell that starts with
`# jobqueue.py` (or `# worker.py`, `# race.py`, `# keepalive.py`) and runs without an error
is also saved into that module's file in the workspace, in place of the course's version
of the same definitions. The real worker processes of the experiments load those files
(`labqueue.tutorial.process`), so they run the code as the learner last ran it: edit a
cell, run it, run the experiment again.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from ..demo.scratch import work_folder
from .sections import MODULES, Section, join, package_text, replace, saved_cell, split


class Workspace:
    """A folder holding one file per tutorial module: the course's text, with every saved
    cell the learner has run in place of the course's cell of the same name."""

    def __init__(self, folder: str | os.PathLike[str], notebook: str = "this notebook") -> None:
        self.folder = Path(folder)
        self.notebook = notebook
        self.folder.mkdir(parents=True, exist_ok=True)
        self._course = {m: split(package_text(m)) for m in MODULES}
        self._sections: dict[str, list[Section]] = {m: list(s) for m, (_, s) in self._course.items()}
        for module in MODULES:
            self._write(module)

    def path(self, module: str) -> Path:
        return self.folder / f"{module}.py"

    def save(self, source: str) -> str | None:
        """Save a cell if it is one of the tutorial's; returns the module it went to."""
        saved = saved_cell(source)
        if saved is None:
            return None
        module, body = saved
        self._sections[module] = replace(self._sections[module], self.notebook, body)
        self._write(module)
        return module

    def changes(self) -> str:
        """What the workspace's modules say that the course's do not, as a unified diff
        (empty when the learner's cells are the course's)."""
        lines: list[str] = []
        for module in MODULES:
            ours = join(self._course[module][0], self._sections[module]).splitlines(keepends=True)
            course = package_text(module).splitlines(keepends=True)
            lines += difflib.unified_diff(course, ours, f"course/{module}.py", f"yours/{module}.py")
        return "".join(lines)

    def _write(self, module: str) -> None:
        header = self._course[module][0]
        self.path(module).write_text(join(header, self._sections[module]), encoding="utf-8")


_following: dict[str, Any] = {}


def follow(notebook: str = "this notebook", folder: str | os.PathLike[str] | None = None) -> Workspace:
    """Start a workspace for this kernel and save every tutorial cell run from now on.
    Calling it again (re-running the first cell) starts afresh from the course's code."""
    from IPython import get_ipython

    shell = get_ipython()
    where = Path(folder) if folder is not None else work_folder() / "yourqueue" / f"kernel-{os.getpid()}"
    workspace = Workspace(where, notebook)

    def after_cell(result: Any) -> None:
        info = getattr(result, "info", None)
        if info is not None and result.success:
            workspace.save(info.raw_cell or "")

    if shell is not None:
        if "hook" in _following:
            shell.events.unregister("post_run_cell", _following["hook"])
        shell.events.register("post_run_cell", after_cell)
        _following["hook"] = after_cell
    return workspace
