"""The dashboard's open queues: one per serving thread (labqueue.serving runs a fixed few),
opened at its first request and reused by the next ones, instead of a connection opened and
closed for every request. A queue whose read failed is closed and opened afresh by the next
request (a server restarted, a file replaced); so is one whose file is no longer the file at
its path (removed, or replaced by another: the next request opens what is there now).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import Any


class Connections:
    """`open_queue()` gives a context manager whose __enter__ is the queue (JobQueue and
    PgJobQueue are their own); it is entered once per thread and left when dropped."""

    def __init__(self, open_queue: Callable[[], Any]) -> None:
        self.open_queue = open_queue
        self.local = threading.local()
        self.opened = 0  # how many times a queue was opened (for tests and the benchmark)

    def get(self) -> Any:
        """This thread's queue, opened now if it has none (or its file changed)."""
        held = getattr(self.local, "held", None)
        if held is not None and file_identity(held[1]) != held[2]:
            self.drop()
            held = None
        if held is None:
            opened = self.open_queue()
            q = opened.__enter__()
            self.opened += 1
            self.local.held = held = (opened, q, file_identity(q))
        return held[1]

    def drop(self) -> None:
        """Close this thread's queue, if it has one (the next get() opens another)."""
        held = getattr(self.local, "held", None)
        self.local.held = None
        if held is not None:
            with contextlib.suppress(Exception):  # a broken connection: nothing left to do with it
                held[0].__exit__(None, None, None)


def file_identity(q: Any) -> tuple[int, int] | None:
    """The device and inode of the queue's file (None for a server's queue, or when the path
    holds no file now): what tells a file replaced at the same path."""
    path = getattr(q, "path", None)
    if path is None:
        return None
    try:
        found = os.stat(path)
    except OSError:
        return (-1, -1)
    return (found.st_dev, found.st_ino)
