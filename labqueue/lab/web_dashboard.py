"""Notebook 10's web dashboard: `labqueue dashboard` on the notebook's queue, run as its own
process (the very command an operator types), read-only, on a free port of this machine. The
process ends with stop(), and also when the kernel that started it ends in any way (its stdin,
a pipe from the kernel, closes), so no dashboard outlives its notebook.

JupyterLab on Binder runs on a machine the learner's browser cannot reach directly, so the
link it shows goes through the lab's own server at /proxy/PORT/ (jupyter-server-proxy, in the
course's environment); on your own machine the plain http://127.0.0.1:PORT/ works as well.
The dashboard's links are relative, so its pages work under that prefix.

The dashboard answers only the host names it serves (labqueue.hosts, against DNS rebinding),
and the lab's proxy forwards the lab's own Host. On your own machine that is localhost or
127.0.0.1, which it answers. On a JupyterHub (Binder) it is the hub's public name, which the
kernel cannot know: there the dashboard answers any name and needs a token instead, made
here, handed over in its environment, and carried once by the link (the dashboard swaps it
for a cookie and drops it from the address). Only the hub's proxy, which asks for the
learner's own login, reaches it from a browser."""

from __future__ import annotations

import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import urllib.request
import weakref
from collections import deque
from html import escape
from pathlib import Path

from ..dashboard.auth import TOKEN_VARIABLE
from ..pool import stop_processes

# What the command prints once it listens (labqueue.cli.dashboard).
LISTENING = re.compile(r" at (http://127\.0\.0\.1:(\d+)/) ")
STAT = re.compile(r'data-stat="([^"]+)">([^<]*)<')


class WebDashboard:
    """`labqueue dashboard PATH --port 0` in a process of its own; stop() ends it (and so
    does the kernel's exit)."""

    def __init__(self, path: str | os.PathLike[str], *, timeout: float = 30.0) -> None:
        self.path = Path(path).resolve()
        self.output: deque[str] = deque(maxlen=50)
        env = dict(os.environ)
        env.pop(TOKEN_VARIABLE, None)
        self.token: str | None = None
        if behind_a_hub():
            self.token = env[TOKEN_VARIABLE] = secrets.token_urlsafe(32)
        self.process = subprocess.Popen(
            # in the file's folder, so its pages name the file, not this machine's folders
            [sys.executable, "-m", __name__, self.path.name],
            cwd=self.path.parent,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE,
            text=True,
        )
        self._finalizer = weakref.finalize(self, stop_process, self.process)
        found = threading.Event()
        self.url = ""
        self.port = 0

        def read() -> None:  # keeps reading, so the pipe never fills while it serves
            assert self.process.stdout is not None
            for line in self.process.stdout:
                self.output.append(line.rstrip("\n"))
                started = LISTENING.search(line)
                if started and not found.is_set():
                    self.url, self.port = started[1], int(started[2])
                    found.set()
            found.set()  # the process ended: __init__ stops waiting

        threading.Thread(target=read, name="labqueue-dashboard-output", daemon=True).start()
        if not found.wait(timeout) or not self.url:
            said = " / ".join(self.output) or "nothing"
            self.stop()
            raise RuntimeError(f"labqueue dashboard {self.path} did not start within {timeout:g} s: {said}")

    @property
    def proxy_link(self) -> str:
        """The dashboard through JupyterLab's own server (the way on Binder): relative to
        the lab's origin, under JupyterHub's prefix when there is one."""
        prefix = os.environ.get("JUPYTERHUB_SERVICE_PREFIX", "/")
        link = f"{prefix.rstrip('/')}/proxy/{self.port}/"
        return link if self.token is None else f"{link}?token={self.token}"

    def read(self, page: str = "") -> str:
        """One page of the dashboard, as a browser gets it (`page`: '', 'jobs', 'dead' ...)."""
        headers = {} if self.token is None else {"Authorization": f"Bearer {self.token}"}
        request = urllib.request.Request(self.url + page, headers=headers)
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.read().decode("utf-8")

    def overview_numbers(self) -> dict[str, int | float]:
        """The overview's five figures as the page shows them (the numbers of `stats()`)."""
        shown = dict(STAT.findall(self.read()))
        return {key: float(value) if "." in value else int(value) for key, value in shown.items()}

    def stop(self) -> int | None:
        """End the dashboard (SIGTERM, as Ctrl-C would; a hard kill if it lingers)."""
        self._finalizer.detach()
        return stop_process(self.process)

    @property
    def running(self) -> bool:
        return self.process.poll() is None

    def _repr_html_(self) -> str:
        if not self.running:
            return f"<p>The dashboard of <code>{escape(self.path.name)}</code> has stopped.</p>"
        return (
            f"<p>The dashboard of <code>{escape(self.path.name)}</code> is running (read-only). "
            f'Open it in JupyterLab: <a href="{escape(self.proxy_link)}" target="_blank">'
            f"{escape(self.proxy_link)}</a>, or on your own machine at "
            f'<a href="{escape(self.url)}" target="_blank">{escape(self.url)}</a>.</p>'
        )

    def __repr__(self) -> str:
        state = f"at {self.url}" if self.running else "stopped"
        return f"<labqueue dashboard of {self.path.name} {state}>"


def behind_a_hub() -> bool:
    """Is this kernel's lab served by a JupyterHub (Binder is one)? Its browser is then on
    another machine and reaches the dashboard through the hub's proxy, under the hub's name."""
    return bool(os.environ.get("JUPYTERHUB_SERVICE_PREFIX"))


def stop_process(process: subprocess.Popen, grace: float = 5.0) -> int | None:
    """End the dashboard as a pool ends a worker (SIGTERM, then a hard kill after `grace`)."""
    stop_processes([process], grace)
    return process.returncode


def serve_while_parent_lives(path: str) -> int:
    """`labqueue dashboard PATH --port 0` until SIGTERM, or until stdin closes: the kernel
    that holds the other end of the pipe has gone, however it went."""
    from .. import cli

    def watch_parent() -> None:
        while os.read(0, 4096):  # b"" at EOF: the parent closed the pipe or died
            pass
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch_parent, name="parent-watch", daemon=True).start()
    # behind a hub the Host is the hub's name, unknown here: any name, with the token
    hub = ["--allow-host", "*"] if os.environ.get(TOKEN_VARIABLE) else []
    return cli.main(["dashboard", path, "--port", "0", *hub])


if __name__ == "__main__":
    sys.exit(serve_while_parent_lives(sys.argv[1]))
