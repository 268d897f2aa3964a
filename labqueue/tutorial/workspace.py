"""The learner's copy of the tutorial's modules, kept in step with the notebook's cells.

A Part 1 notebook calls `follow()` in its first cell. It starts from the course's code in
both places that run it: the kernel (`kernel.reset`) and a folder of files for its worker
processes. From then on, every cell that starts with `# jobqueue.py` (or `# worker.py`,
`# race.py`, `# keepalive.py`) and runs without an error is also saved into that module's
file, in place of the course's version of the same definitions. The real worker processes
of the experiments load those files (`labqueue.tutorial.process`), so they run the code as
the learner last ran it. Edits stay in that notebook: every notebook's first cell starts
from the course's code again, and re-running it is the reset.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

from ..demo.scratch import work_folder
from . import kernel
from .sections import MODULES, Section, join, package_text, replace, saved_cell, split


class Workspace:
    """A folder holding one file per tutorial module: the course's text, with every saved
    cell the learner has run in place of the course's cell of the same name."""

    def __init__(
        self,
        folder: str | os.PathLike[str],
        notebook: str = "this notebook",
        namespace: dict[str, Any] | None = None,
    ) -> None:
        self.folder = Path(folder)
        self.notebook = notebook
        self.namespace = namespace  # the kernel's names, when a kernel follows this workspace
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
        """How the code the worker processes load, and the code the kernel holds, differ
        from the course's, as unified diffs (empty when both are the course's)."""
        lines: list[str] = []
        for module in MODULES:
            ours = join(self._course[module][0], self._sections[module]).splitlines(keepends=True)
            course = package_text(module).splitlines(keepends=True)
            lines += difflib.unified_diff(course, ours, f"course/{module}.py", f"your workers' {module}.py")
        if self.namespace is not None:
            lines.append(kernel.differences(self.namespace, self.notebook))
        return "".join(lines)

    def _write(self, module: str) -> None:
        header = self._course[module][0]
        self.path(module).write_text(join(header, self._sections[module]), encoding="utf-8")


_following: dict[str, Any] = {}


def follow(notebook: str = "this notebook", folder: str | os.PathLike[str] | None = None) -> Workspace:
    """Start this notebook from the course's code, in the kernel and in a workspace for its
    worker processes, and save every tutorial cell run from now on. Calling it again
    (re-running the first cell) is the reset: both go back to the course's code."""
    from IPython import get_ipython

    shell = get_ipython()
    where = Path(folder) if folder is not None else work_folder() / "yourqueue" / f"kernel-{os.getpid()}"
    namespace = shell.user_ns if shell is not None else None
    if namespace is not None:
        kernel.reset(namespace, notebook)
    workspace = Workspace(where, notebook, namespace)

    def after_cell(result: Any) -> None:
        info = getattr(result, "info", None)
        if info is not None and result.success:
            workspace.save(info.raw_cell or "")

    if shell is not None:
        if _following.get("hook") in shell.events.callbacks["post_run_cell"]:  # not a new shell's
            shell.events.unregister("post_run_cell", _following["hook"])
        shell.events.register("post_run_cell", after_cell)
        _following["hook"] = after_cell
    return workspace
