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
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from . import validate
from .errors import NoHandlers
from .queue import Effect, Job, JobQueue

Handler = Callable[[Job, JobQueue], "Effect | None"]

HANDLERS: dict[str, Handler] = {}
# kind: its time limit in seconds, for the kinds registered with one (labqueue.renewal)
TIMEOUTS: dict[str, float] = {}


def handler(kind: str, *, timeout: float | None = None) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler for `kind`. With `timeout` (seconds
    above zero), a worker stops a run of it after that long, instead of its own
    --job-timeout: the job is failed, "timed out after N s", and retried elsewhere
    after a backoff (dead on its last attempt), and the worker process is replaced."""
    limit = None if timeout is None else validate.positive("timeout", timeout)

    def register(fn: Handler) -> Handler:
        HANDLERS[kind] = fn
        if limit is None:
            TIMEOUTS.pop(kind, None)
        else:
            TIMEOUTS[kind] = limit
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


def load_for_worker(modules: Sequence[str], *, folder: str | None = None) -> list[str]:
    """What a worker does before it claims anything: put `folder` (the current folder)
    first on sys.path, as rq and huey's consumer do, so ``--handlers myapp.jobs`` finds
    the application it was started beside; import the modules; and refuse to go on with
    no handler registered (NoHandlers). Returns every registered kind, sorted."""
    folder = os.getcwd() if folder is None else folder
    if sys.path[:1] != [folder]:
        sys.path.insert(0, folder)
    for name in modules:
        load_module(name)
    if not HANDLERS:
        named = f"{', '.join(modules)} registered none" if modules else "no --handlers module was named"
        raise NoHandlers(
            f"no job handlers are registered ({named}): name the module that registers your "
            "kinds with @labqueue.handler, e.g. --handlers myapp.jobs; nothing was claimed"
        )
    return sorted(HANDLERS)
