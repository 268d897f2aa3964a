"""The course: experiment harnesses, widgets and plots that the notebooks call, one module
per topic, with the demo handlers, the fake-clock walks and scratch databases they share.

The queue itself (``labqueue``) imports nothing from here."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any

from .demo_handlers import DEMO_HANDLERS, start_demo_worker
from .scratch import db_path, work_folder

__all__ = ["DEMO_HANDLERS", "db_path", "show_source", "source_of", "start_demo_worker", "work_folder"]


def source_of(obj: Any) -> str:
    """The source code of a function, class or SQL constant, dedented."""
    if isinstance(obj, str):
        return textwrap.dedent(obj).strip("\n")
    return textwrap.dedent(inspect.getsource(obj)).rstrip("\n")


def show_source(obj: Any, language: str | None = None) -> Any:
    """Display code from the package in a notebook, highlighted: where the code is the
    lesson, the learner reads the very function the experiment runs."""
    from IPython.display import Code

    lang = language or ("sql" if isinstance(obj, str) else "python")
    return Code(source_of(obj), language=lang)
