"""Stop a throwaway server whose owner died without stopping it.

    python -m labqueue.postgres.watchdog OWNER_PID FOLDER

A notebook's kernel that is killed (not shut down) runs no cleanup, and the server it
started, a daemon of its own, would run on. `throwaway_server(watchdog=True)` starts this
process in a session of its own beside the server: it waits for the owner to end, then
stops the server in FOLDER/data (a fast shutdown: SIGINT to the postmaster, then SIGKILL
if it lingers) and deletes FOLDER. A normal end of the block stops the watchdog first.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

LOOK_EVERY = 0.5  # seconds between looks at the owner
STOP_WAIT = 10.0  # seconds a fast shutdown may take before the hard kill


def owner_alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def postmaster(folder: Path) -> psutil.Process | None:
    """The server process named in FOLDER/data/postmaster.pid, if it still runs."""
    try:
        pid = int((folder / "data" / "postmaster.pid").read_text().split()[0])
        return psutil.Process(pid)
    except (OSError, ValueError, IndexError, psutil.NoSuchProcess):
        return None


def stop_server(folder: Path) -> None:
    server = postmaster(folder)
    if server is not None:
        with contextlib.suppress(psutil.NoSuchProcess):
            server.send_signal(signal.SIGINT)  # PostgreSQL's fast shutdown
            try:
                server.wait(STOP_WAIT)
            except psutil.TimeoutExpired:
                server.kill()
    shutil.rmtree(folder, ignore_errors=True)


def start(owner: int, folder: Path) -> subprocess.Popen:
    """The watchdog for `folder`'s server, owned by process `owner`, in a session of its own
    (so a signal to the owner's process group does not end it too)."""
    return subprocess.Popen(
        [sys.executable, "-m", "labqueue.postgres.watchdog", str(owner), str(folder)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or not args[0].isdigit():
        print("usage: python -m labqueue.postgres.watchdog OWNER_PID FOLDER", file=sys.stderr)
        return 2
    owner, folder = int(args[0]), Path(args[1])
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the owner's normal end stops us with SIGTERM
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a Ctrl+C meant for the owner is not for us
    while owner_alive(owner) and folder.exists():
        time.sleep(LOOK_EVERY)
    if folder.exists():
        stop_server(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
