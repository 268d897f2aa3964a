"""Stop flags that a signal handler may set: StopEvent, for a wait, and StopFlag, for the
worker loop (a warm stop on the first signal, ForcedShutdown on the second).

`threading.Event.set()` must not be called from a signal handler: the handler runs in the
main thread between two bytecodes, possibly while that thread holds the event's own lock
inside `Event.wait()` (before it starts sleeping), and `set()` then waits for that lock for
ever. `labqueue stats --watch` hung so on Ctrl-C, once in many runs. `StopEvent.set()` takes
no lock: it sets a boolean and writes a byte to a pipe, and `wait()` sleeps in `select()` on
that pipe, so a stop that arrives at any moment ends the wait at once.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
from collections.abc import Callable
from types import FrameType


class StopEvent:
    """`is_set()`, `set()` and `wait(timeout)` as `threading.Event`, and safe to set from a
    signal handler. The byte is never read, so every wait after set() returns at once, in
    any thread."""

    def __init__(self) -> None:
        self._stopped = False
        self._read, self._write = os.pipe()
        os.set_blocking(self._write, False)

    def set(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):  # the pipe is full (it is already set) or closed
            os.write(self._write, b"\0")

    def is_set(self) -> bool:
        return self._stopped

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep until set or `timeout` seconds pass; returns whether it is set. A set()
        between the check and the sleep left a byte in the pipe, so select returns at once."""
        if not self._stopped:
            select.select([self._read], [], [], timeout)
        return self._stopped

    def close(self) -> None:
        for fd in (self._read, self._write):
            with contextlib.suppress(OSError):
                os.close(fd)


def stop_on(*signals: signal.Signals) -> StopEvent:
    """A StopEvent that each of `signals` sets (instead of raising KeyboardInterrupt or
    ending the process), so a loop can finish its step and clean up."""
    stop = StopEvent()

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    for sig in signals:
        signal.signal(sig, handler)
    return stop


class ForcedShutdown(BaseException):
    """Raised by the second stop signal. A BaseException, so that a handler's
    `except Exception` cannot swallow it; the open transaction rolls back."""


class StopFlag:
    """Signal handlers only set flags; the loop looks at them between jobs."""

    def __init__(self) -> None:
        self.requested = False
        # Called on the first signal: the loop sets it to end an idle wait at once.
        self.on_request: Callable[[], None] | None = None

    def __call__(self, signum: int, frame: FrameType | None) -> None:
        if self.requested:
            raise ForcedShutdown(f"second stop signal ({signal.Signals(signum).name})")
        self.requested = True
        if self.on_request is not None:
            self.on_request()

    def install(self) -> None:
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self)

