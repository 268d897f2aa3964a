"""Waking idle workers on one machine: a hint that a job was enqueued, never the truth.

A folder beside the database file, ``jobs.db.wake/`` (mode 0o700, ours alone), holds one
Unix datagram socket per waiting worker, ``<random id>.sock``. A Waiter binds its socket
when it opens and removes it when it closes. A producer, once its enqueue has COMMITted,
calls notify(db_path): one byte to every socket in the folder, without blocking. A worker
killed with SIGKILL leaves its socket file behind; it refuses the byte, and the producer
that finds it so removes it.

Why a hint is safe: the database stays the only truth. A hint only ends a wait early; the
worker then looks (JobQueue.any_ready) and claims in a transaction, exactly as after a
poll. A duplicated hint costs a read (two workers woken for one job: one claims it, the
other finds nothing). A lost hint (a full socket buffer, a worker busy when it came, a
folder removed under a running worker) costs at most one safety interval, because workers
still look every SAFETY_POLL seconds. Jobs that become ready by time rather than by an
enqueue (a delay, a retry's backoff, an expired lease) are found by that look too.

Where it cannot work, it falls back to polling: Waiter.wait(timeout) sleeps for the
timeout and notify() sends nothing. That happens without AF_UNIX datagram sockets
(Windows), for a location that is not a file (a postgresql:// URL), when the folder cannot
be created (read-only), is not ours alone (another owner, a symlink, group or world
access) or refuses a socket (some network and FUSE file systems).

A second folder, ``jobs.db.done/``, works the same way for producers waiting for a job to
finish (Queue.wait): a worker's settle notifies it once it has finished jobs, after COMMIT,
and the waiter reads its job again (FolderHints). While nobody waits, it costs the worker
one access() call per batch.

Socket paths are limited to about 104 bytes (sun_path: 108 on Linux, 104 on macOS). When
the folder beside the database would make them longer, the folder is
``<tempdir>/labqueue-wake-<uid>-<hash>`` instead, where hash is 16 hex digits of the SHA-256
of the database file's real path: every process of one user that opens the same file, by
any path or symlink, finds the same folder, provided they share TMPDIR (if not, they poll).
Each process resolves a path's folder once.

One machine only: on a shared network file system a producer elsewhere cannot reach these
sockets, takes them for stale and removes them; a worker whose socket was removed binds a
new one at its next timeout.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import secrets
import socket
import stat
import time
from collections.abc import Callable
from pathlib import Path
from time import sleep as real_sleep

__all__ = ["FINISHED_SUFFIX", "SAFETY_POLL", "FolderHints", "Waiter", "notify", "wake_folder"]

# How often a worker that can be woken still looks for work on its own.
SAFETY_POLL = 1.0
FOLDER_SUFFIX = ".wake"
FINISHED_SUFFIX = ".done"  # the folder of producers waiting for jobs to finish
SOCKET_SUFFIX = ".sock"
ID_HEX_DIGITS = 16
# Longest socket path in bytes: macOS's sun_path holds 104 bytes including the final NUL.
MAX_SOCKET_PATH = 103
HINT = b"\x01"
# None where the platform has no Unix sockets; tests set it to None to try the fallback.
AF_UNIX: int | None = getattr(socket, "AF_UNIX", None)

log = logging.getLogger(__name__)
_sender: socket.socket | None = None


def wake_folder(db_path: str | os.PathLike[str], suffix: str = FOLDER_SUFFIX) -> Path | None:
    """The folder that holds the sockets of this database's waiting workers (or, with
    FINISHED_SUFFIX, producers), or None where there can be none (a URL, or a temp dir too
    long for socket paths)."""
    text = os.fsdecode(os.fspath(db_path))
    if not text or "://" in text or text == ":memory:":
        return None
    real = os.path.realpath(text)
    beside = real + suffix
    if _fits_socket_paths(beside):
        return Path(beside)
    import tempfile  # only for long paths: keeps `import labqueue` light

    digest = hashlib.sha256(os.fsencode(real)).hexdigest()[:16]
    label = "wake" if suffix == FOLDER_SUFFIX else suffix.strip(".")
    short = os.path.join(tempfile.gettempdir(), f"labqueue-{label}-{_uid()}-{digest}")
    return Path(short) if _fits_socket_paths(short) else None


class Waiter:
    """An idle worker's ear: wait(timeout) returns early when a producer notifies.

    Use as a context manager: entering binds the socket (or quietly stays inactive, see
    the module's fallbacks), leaving removes it. `sleep` is what an inactive waiter calls
    instead, so tests and fake clocks can pass their own."""

    def __init__(
        self,
        db_path: str | os.PathLike[str],
        *,
        sleep: Callable[[float], object] = real_sleep,
        suffix: str = FOLDER_SUFFIX,
    ) -> None:
        self.folder = wake_folder(db_path, suffix)
        self.path: Path | None = None
        self._sleep = sleep
        self._sock: socket.socket | None = None

    @property
    def active(self) -> bool:
        """Whether a notify() can reach this waiter (False: it only sleeps)."""
        return self._sock is not None

    def open(self) -> Waiter:
        """Bind this waiter's socket, or stay inactive (it will poll)."""
        folder = self.folder
        if self._sock is not None or folder is None or not _has_unix_datagrams():
            return self
        if _make_private_folder(folder):
            self._bind()
        return self

    def wait(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds; True if a hint came. Every hint already queued
        is drained, so a burst of enqueues wakes the worker once. A False answer says
        nothing about the queue: look anyway, that is the safety poll. A signal whose
        handler only sets a flag does not end the wait (PEP 475 resumes it), so a warm
        stop is seen at the latest `timeout` seconds later."""
        if self._sock is None:
            self._sleep(timeout)
            return False
        hinted = self._receive(max(timeout, 0.0))
        if hinted:
            self._drain()
        elif self._sock is not None:
            self._rebind_if_removed()
        return hinted

    def poke(self) -> None:
        """End this waiter's current (or next) wait early: a hint to itself. Safe in a
        signal handler (one non-blocking send), so a warm stop is not held up by a wait."""
        if self.path is not None:
            _hint(_sending_socket(), str(self.path))

    def close(self) -> None:
        """Close the socket and remove its file. The folder stays: removing it could
        race with another worker binding in it."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.path is not None:
            with contextlib.suppress(OSError):
                self.path.unlink()
            self.path = None

    def __enter__(self) -> Waiter:
        return self.open()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        where = self.path if self.active else "inactive: polls"
        return f"Waiter({str(self.folder)!r}, {where})"

    def _bind(self) -> None:
        assert self.folder is not None and AF_UNIX is not None
        path = self.folder / f"{secrets.token_hex(ID_HEX_DIGITS // 2)}{SOCKET_SUFFIX}"
        try:
            sock = socket.socket(AF_UNIX, socket.SOCK_DGRAM)
        except OSError as exc:
            log.debug("no Unix datagram socket (%s): polling", exc)
            return
        try:
            sock.bind(str(path))
        except OSError as exc:
            sock.close()
            log.warning("cannot bind a wake-up socket in %s (%s): this worker polls", self.folder, exc)
            return
        self._sock, self.path = sock, path

    def _receive(self, timeout: float) -> bool:
        assert self._sock is not None
        self._sock.settimeout(timeout)  # 0 makes it non-blocking
        try:
            self._sock.recv(64)
        except (TimeoutError, BlockingIOError):
            return False
        except OSError as exc:  # never expected; polling is always correct
            log.warning("wake-up socket %s failed (%s): this worker polls from now on", self.path, exc)
            self.close()
            self._sleep(timeout)
            return False
        return True

    def _drain(self) -> None:
        assert self._sock is not None
        self._sock.setblocking(False)
        with contextlib.suppress(OSError):
            while True:
                self._sock.recv(64)

    def _rebind_if_removed(self) -> None:
        """A socket file someone removed (a folder cleaned up, a producer on another
        machine) can never be reached again: bind a new one."""
        if self.path is not None and not self.path.exists():
            self.close()
            self.open()


def notify(db_path: str | os.PathLike[str], suffix: str = FOLDER_SUFFIX) -> int:
    """Tell every waiting worker of this database that a job may be ready. Call it after
    the enqueue's COMMIT, never inside the transaction. Returns how many live sockets
    took (or already held) a hint. Never raises, never blocks; without the folder it
    costs a lookup and an lstat."""
    if AF_UNIX is None:
        return 0
    try:
        folder = _folder_of(os.path.abspath(db_path), suffix)
        if folder is None or not _is_private_folder(folder):
            return 0
        with os.scandir(folder) as entries:
            paths = [entry.path for entry in entries if entry.name.endswith(SOCKET_SUFFIX)]
        sender = _sending_socket()
    except OSError:
        return 0
    return sum(_hint(sender, path) for path in paths)


class FolderHints:
    """notify() for one folder resolved once (wake_folder), for a caller that hints after
    every batch: a worker telling producers waiting for jobs (FINISHED_SUFFIX) that some
    finished. While nobody has waited on this machine there is no folder, and a hint costs
    one access() call; a folder whose last scan found no socket is not scanned again until
    it changes (a socket bound or removed changes its mtime)."""

    __slots__ = ("_empty", "folder")

    def __init__(self, folder: Path | None) -> None:
        self.folder = "" if folder is None or AF_UNIX is None else str(folder)
        self._empty: int | None = None  # the folder's mtime when a scan found no socket

    def notify(self) -> int:
        """Hint every waiter in the folder; returns how many took it. Never raises."""
        folder = self.folder
        if not folder or not os.access(folder, os.F_OK):
            return 0
        try:
            changed = os.stat(folder).st_mtime_ns
            if changed == self._empty:
                return 0
            with os.scandir(folder) as entries:
                paths = [entry.path for entry in entries if entry.name.endswith(SOCKET_SUFFIX)]
            # A folder changed within the last second may change again within the same tick
            # of its file system's clock (a socket bound just after this scan): scan it again.
            settled = changed < time.time_ns() - 1_000_000_000
            self._empty = changed if settled and not paths else None
            if not paths or not _is_private_folder(Path(folder)):
                return 0
            sender = _sending_socket()
        except OSError:
            return 0
        return sum(_hint(sender, path) for path in paths)


def _hint(sender: socket.socket, path: str) -> int:
    """Send one hint: 1 if a live waiter has it, 0 otherwise. A socket nobody listens on
    any more (its worker was killed) is removed."""
    try:
        sender.sendto(HINT, path)
    except (BlockingIOError, InterruptedError):  # its buffer is full of hints already
        return 1
    except ConnectionRefusedError:
        with contextlib.suppress(OSError):
            os.unlink(path)
        return 0
    except OSError:  # vanished meanwhile, not a socket, no buffer space: a hint may be lost
        return 0
    return 1


@functools.lru_cache(maxsize=64)
def _folder_of(absolute_path: str, suffix: str = FOLDER_SUFFIX) -> Path | None:
    """wake_folder(), resolved once per path per process: producers call it per enqueue."""
    return wake_folder(absolute_path, suffix)


def _sending_socket() -> socket.socket:
    """One unbound, non-blocking datagram socket per process for all notify() calls."""
    global _sender
    if _sender is None:
        assert AF_UNIX is not None
        sock = socket.socket(AF_UNIX, socket.SOCK_DGRAM)
        sock.setblocking(False)
        _sender = sock
    return _sender


def _has_unix_datagrams() -> bool:
    return AF_UNIX is not None and hasattr(os, "getuid")


def _make_private_folder(folder: Path) -> bool:
    """Create the folder 0o700 if it is missing; True if it is ours alone."""
    try:
        folder.mkdir(mode=0o700)
    except FileExistsError:
        pass
    except OSError as exc:
        log.warning("cannot create the wake-up folder %s (%s): workers poll", folder, exc)
        return False
    if _is_private_folder(folder):
        return True
    log.warning("the wake-up folder %s is not a folder of this user's alone (0o700): workers poll", folder)
    return False


def _is_private_folder(folder: Path) -> bool:
    """A real folder (not a symlink), owned by this user, closed to group and others:
    only then are the sockets in it our workers' own."""
    try:
        info = os.lstat(folder)
    except OSError:
        return False
    return stat.S_ISDIR(info.st_mode) and info.st_uid == _uid() and not info.st_mode & 0o077


def _fits_socket_paths(folder: str) -> bool:
    longest = os.path.join(folder, "f" * ID_HEX_DIGITS + SOCKET_SUFFIX)
    return len(os.fsencode(longest)) <= MAX_SOCKET_PATH


def _uid() -> int:
    return os.getuid() if hasattr(os, "getuid") else -1
