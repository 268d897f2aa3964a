"""The handler registry: which function runs a job of a given kind.

A worker runs the handler registered in code for a job's kind. A row only ever
names a kind to look up here, never a module or function to import: whoever can
write a row must not be able to choose what code runs. The registry starts empty;
an application registers its kinds with ``@handler("kind")`` in a module that the
worker imports (``labqueue worker jobs.db --handlers myapp.jobs``).

A handler is ``handler(job, queue)``. It may return an effect, a function of the
database connection that the worker passes to ``complete`` so it commits in the
same transaction as the completion.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from .queue import Effect, Job, JobQueue

Handler = Callable[[Job, JobQueue], "Effect | None"]

HANDLERS: dict[str, Handler] = {}


def handler(kind: str) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler for `kind`."""

    def register(fn: Handler) -> Handler:
        HANDLERS[kind] = fn
        return fn

    return register


def load_module(name: str) -> list[str]:
    """Import a module of the caller's own handlers (named by the operator on the
    command line, never by a row). It registers with @handler, or defines a
    HANDLERS dict that is merged in. Returns the kinds it added or replaced."""
    before = dict(HANDLERS)
    module = importlib.import_module(name)
    extra: Any = getattr(module, "HANDLERS", None)
    if isinstance(extra, dict) and extra is not HANDLERS:
        HANDLERS.update(extra)
    return sorted(k for k, fn in HANDLERS.items() if before.get(k) is not fn)
