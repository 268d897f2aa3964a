"""A worker process keeps the top of its heap, instead of handing it back after every statement.

glibc's malloc returns the top of the heap to the kernel (brk) as soon as more than
128 KiB of it is free, and asks for it again at the next allocation, each page faulted
in afresh. SQLite opens a temporary b-tree for a statement's RETURNING rows and for an
`IN (SELECT ...)` list, and each one allocates about 86 KiB of page cache (20 pages) that
it frees when the statement ends. When those blocks sit at the top of the heap, which
depends on what the process allocated before, every claim and every batch completion
shrinks the heap and grows it again: measured here, a worker draining no-op jobs took
10.4 page faults per job and ran at half its speed, and another run of the same code,
its heap laid out otherwise, took none. A top pad of a few MiB (M_TOP_PAD: what glibc
keeps when it trims, and adds when it grows) ends the cycle: 0.002 faults per job.

`labqueue worker` sets it once, when its process starts (labqueue.worker.main); a
library call such as worker.run() leaves the allocator of the process it runs in alone.
Elsewhere (macOS, Windows, musl) there is no such cycle to end, and nothing is changed.
"""

from __future__ import annotations

import os

from . import validate

__all__ = ["TOP_PAD", "keep_top"]

M_TOP_PAD = -2  # mallopt's parameter number, from glibc's malloc.h
TOP_PAD = 4 << 20  # bytes: well above what a batch's statements allocate and free at once
MAX_PAD = 2**31 - 1


def keep_top(pad: int = TOP_PAD) -> bool:
    """Ask glibc's malloc to keep `pad` bytes at the top of the heap when it trims, and
    to grow it by as much. Returns whether the setting took (False off glibc). It holds
    for the whole process, so call it where a process starts, not from a library."""
    pad = validate.whole("pad", pad, low=0, high=MAX_PAD, why="mallopt takes a C int")
    if not _is_glibc():
        return False
    import ctypes  # here, not at the top: `import labqueue.worker` need not load it

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    return mallopt(M_TOP_PAD, pad) == 1  # glibc answers 1 on success


def _is_glibc() -> bool:
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")  # None: not known
    except (AttributeError, ValueError, OSError):  # no confstr (Windows), or not glibc
        return False
