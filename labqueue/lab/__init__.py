"""Experiment harnesses, widgets and plots that the notebooks call, one module per topic."""

from __future__ import annotations

import inspect
import textwrap
from typing import Any


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
