"""A TCP proxy that delays every byte by a set time each way: a network between the workers
and the PostgreSQL server, on one machine, so a benchmark says what round trips cost where
they matter (issue 41). Order is kept: each chunk is passed on `delay` seconds after it
arrived, in arrival order, so a round trip costs at least twice the delay.

    with DelayProxy(url, delay=0.0005) as proxy:
        proxy.url   # the same database, reached through the proxy on 127.0.0.1

The server may listen on TCP or on a Unix socket (the throwaway server does); the proxy
listens on 127.0.0.1 only. The URL's password stays in it: nothing here prints or logs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any
from urllib.parse import quote, unquote, urlsplit

CHUNK = 65536


def target_of(url: str) -> tuple[str, int] | str:
    """Where a postgresql:// URL's server listens: (host, port), or a Unix socket's path."""
    from psycopg.conninfo import conninfo_to_dict

    params = conninfo_to_dict(url)
    host = str(params.get("host") or "/tmp")
    port = int(params.get("port") or 5432)
    if host.startswith("/"):
        return f"{host}/.s.PGSQL.{port}"
    return host, port


def via(url: str, port: int) -> str:
    """`url` with its host and port replaced by 127.0.0.1:`port` (user, password, database and
    other parameters kept; a `host` or `port` parameter in the query dropped)."""
    parts = urlsplit(url)
    user = parts.username or ""
    password = f":{quote(unquote(parts.password), safe='')}" if parts.password is not None else ""
    credentials = f"{quote(unquote(user), safe='')}{password}@" if user or password else ""
    query = "&".join(
        pair for pair in parts.query.split("&") if pair and pair.split("=", 1)[0] not in ("host", "port")
    )
    return f"{parts.scheme}://{credentials}127.0.0.1:{port}{parts.path}" + (f"?{query}" if query else "")


class DelayProxy:
    """The proxy, serving in a thread of its own until the block ends (or close())."""

    def __init__(self, url: str, delay: float) -> None:
        if not delay >= 0:
            raise ValueError(f"delay must be 0 or more seconds, got {delay!r}")
        self.target, self.delay = target_of(url), delay
        self.server_url = url
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="delay-proxy", daemon=True)
        self._server: Any = None

    @property
    def url(self) -> str:
        return via(self.server_url, self.port)

    def __enter__(self) -> DelayProxy:
        self._thread.start()
        if not self._ready.wait(10) or not self.port:
            raise RuntimeError("the delay proxy did not start")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def start() -> None:
            self._server = await asyncio.start_server(self._client, "127.0.0.1", 0)
            self.port = self._server.sockets[0].getsockname()[1]

        self._loop.run_until_complete(start())
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            left = asyncio.all_tasks(self._loop)  # connections still open: end them, then the loop
            for task in left:
                task.cancel()
            self._loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            self._loop.close()

    async def _client(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            if isinstance(self.target, str):
                up_reader, up_writer = await asyncio.open_unix_connection(self.target)
            else:
                up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        try:
            await asyncio.gather(self._pipe(reader, up_writer), self._pipe(up_reader, writer))
        except asyncio.CancelledError:  # the proxy is closing: end this connection quietly
            for end in (writer, up_writer):
                end.close()

    async def _pipe(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Pass on what `reader` sends, each chunk `delay` seconds after it came, in order."""
        pending: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def send() -> None:
            while True:
                due, data = await pending.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
                writer.write(data)
                await writer.drain()
            writer.close()

        sender = asyncio.ensure_future(send())
        try:
            while data := await reader.read(CHUNK):
                pending.put_nowait((time.monotonic() + self.delay, data))
        except (ConnectionError, OSError):
            pass
        pending.put_nowait((0.0, b""))
        with contextlib.suppress(ConnectionError, OSError):
            await sender
