"""labqueue.website.docstrings: a plain-text docstring becomes reStructuredText that docutils
reads without a warning and that says the same (the site is built with warnings as errors).

In a folder of its own: it imports docutils, which the site needs and the course does not (the
tests in tests/ itself are offered to learners on Binder, whose pins hold only what those import)."""

from __future__ import annotations

import importlib
import inspect
import io

import docutils.core
import docutils.utils

import labqueue
from labqueue.website import reference
from labqueue.website.docstrings import as_rst, inline

EXAMPLE = """Whether `job`, whose handler runs in this worker process, has been cancelled.

A handler that may run long checks it between steps and returns (or raises) when it
is True; a *args handler, a name_ and a pipe | are plain text here.

    @handler("export")
    def export(job, q):
        for page in pages(job.payload):
            if labqueue.cancelled(job):
                return None

What it does:
- one thing, and a long line that wraps
  onto the next
- another ``already code`` thing
Example::
"""


def problems(rst: str) -> list[str]:
    """docutils' warnings and errors for `rst` (level 2 and up)."""
    stream = io.StringIO()
    docutils.core.publish_doctree(
        rst, settings_overrides={"warning_stream": stream, "report_level": 2, "halt_level": 5}
    )
    return [line for line in stream.getvalue().splitlines() if line.strip()]


def test_the_raw_example_is_what_breaks_a_strict_build():
    assert problems(inspect.cleandoc(EXAMPLE)) != []


def test_a_docstring_becomes_rst_that_says_the_same_without_a_warning():
    rst = "\n".join(as_rst(inspect.cleandoc(EXAMPLE).splitlines()))
    assert problems(rst) == []
    assert rst.startswith("Whether ``job``, whose handler runs in this worker process, has been cancelled.\n")
    assert "a \\*args handler, a name\\_ and a pipe \\| are plain text here." in rst
    assert '::\n\n    @handler("export")\n    def export(job, q):\n        for page in' in rst
    assert "What it does:\n\n- one thing, and a long line that wraps onto the next\n" in rst
    assert "- another ``already code`` thing Example:\n" in rst


def test_code_spans_and_escapes():
    assert inline("`a_b` and a_ and `` `x` `` and 2*3") == "``a_b`` and a\\_ and `` `x` `` and 2\\*3"
    assert inline(r"a regex \d+") == r"a regex \\d+"


def test_every_documented_docstring_reads_without_a_warning():
    """Every docstring the reference renders, through the same conversion."""
    objects = [getattr(labqueue, name) for name in labqueue.__all__]
    for module_name, names in reference.MODULES.items():
        module = importlib.import_module(module_name)
        objects += [module, *(getattr(module, name) for name in names)]
    found = []
    for obj in objects:
        members = [obj]
        if inspect.isclass(obj):
            members += [value for name, value in inspect.getmembers(obj) if not name.startswith("_")]
        for member in members:
            doc = inspect.getdoc(member) if inspect.getdoc(member) != inspect.getdoc(type(member)) else None
            if doc:
                said = problems("\n".join(as_rst(doc.splitlines())))
                if said:
                    found.append(f"{getattr(member, '__qualname__', member)}: {said[:2]}")
    assert found == []
