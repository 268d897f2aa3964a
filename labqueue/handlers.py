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
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from . import validate
from .core import KIND_LIMITS
from .errors import HandlersNotLoaded, InvalidArgument, NoHandlers
from .queue import Effect, Job, JobQueue
from .renewal import time_limit

Handler = Callable[[Job, JobQueue], "Effect | None"]

HANDLERS: dict[str, Handler] = {}
# kind: its time limit in seconds, for the kinds registered with one (labqueue.renewal)
TIMEOUTS: dict[str, float] = {}


def handler(
    kind: str,
    *,
    timeout: float | None = None,
    concurrency_limit: int | None = None,
    concurrency_key: Callable[[Any], str] | None = None,
) -> Callable[[Handler], Handler]:
    """Register the decorated function as the handler for `kind`. With `timeout` (seconds
    above zero), a worker stops a run of it after that long, instead of its own
    --job-timeout: the job is failed, "timed out after N s", and retried elsewhere
    after a backoff (dead on its last attempt), and the worker process is replaced.

    With `concurrency_limit`, at most that many jobs of the kind run at once, across every
    worker: per key when `concurrency_key(payload)` names one (a customer, an account),
    else for the kind as a whole. It applies to jobs enqueued, without a key or limit of
    their own, in a process where this handler is registered: import the handlers'
    module where jobs are enqueued too."""
    limit = time_limit(timeout)
    most = None if concurrency_limit is None else validate.concurrency_limit(concurrency_limit)
    if concurrency_key is not None and not callable(concurrency_key):
        raise InvalidArgument(
            f"concurrency_key must be a function of the payload, got {concurrency_key!r:.80}"
        )
    if concurrency_key is not None and most is None:
        raise InvalidArgument(f"{kind!r}: concurrency_key needs a concurrency_limit")

    def register(fn: Handler) -> Handler:
        HANDLERS[kind] = fn
        if limit is None:
            TIMEOUTS.pop(kind, None)
        else:
            TIMEOUTS[kind] = limit
        if most is None:
            KIND_LIMITS.pop(kind, None)
        else:
            KIND_LIMITS[kind] = (most, concurrency_key)
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


def import_failure(exc: BaseException) -> str:
    """Why an import failed, on one line: the error, its message, and where it was raised
    (a SyntaxError's message already names its file and line)."""
    message = " ".join(str(exc).split())
    text = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith("<frozen") and frame.filename not in (__file__, importlib.__file__)
    ]
    if isinstance(exc, SyntaxError) or not frames:
        return text
    return f"{text} ({frames[-1].filename}, line {frames[-1].lineno})"


def load_for_worker(modules: Sequence[str], *, folder: str | None = None) -> list[str]:
    """What a worker does before it claims anything: put `folder` (the current folder)
    first on sys.path, as rq and huey's consumer do, so ``--handlers myapp.jobs`` finds
    the application it was started beside; import the modules; and refuse to go on with
    no handler registered (NoHandlers). A module that cannot be imported (not found, a
    syntax error, an exception while it runs) is HandlersNotLoaded, one line naming the
    module and the cause. Returns every registered kind, sorted."""
    folder = os.getcwd() if folder is None else folder
    if sys.path[:1] != [folder]:
        sys.path.insert(0, folder)
    for name in modules:
        try:
            load_module(name)
        except Exception as exc:  # whatever the module's own code raised, SyntaxError included
            raise HandlersNotLoaded(f"cannot import handler module {name!r}: {import_failure(exc)}") from exc
    if not HANDLERS:
        named = f"{', '.join(modules)} registered none" if modules else "no --handlers module was named"
        raise NoHandlers(
            f"no job handlers are registered ({named}): name the module that registers your "
            "kinds with @labqueue.handler, e.g. --handlers myapp.jobs; nothing was claimed"
        )
    return sorted(HANDLERS)
