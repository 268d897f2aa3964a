"""The HTTP server under `labqueue metrics` and `labqueue dashboard`: the standard library's
HTTPServer answering on a fixed number of threads, so open browser tabs or a scraper gone
wild cannot make it start a thread (and open a database connection) per request.

Accepted connections wait in a short line for one of the `threads`; when the line is full,
a connection is answered 503 at once (Retry-After: 1) and closed. Each thread may keep
what it opened between requests (the dashboard keeps its queue); `on_thread_exit` runs in
each thread as it ends, to close it there (an SQLite connection is closed by the thread
that opened it). A request's socket times out after REQUEST_TIMEOUT seconds of silence, so
a client that sends nothing holds a thread no longer.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

DEFAULT_THREADS = 4
LINE_PER_THREAD = 8  # connections that may wait per thread before one is turned away
REQUEST_TIMEOUT = 10.0
TOO_BUSY = (
    b"HTTP/1.0 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
)


class PooledHTTPServer(HTTPServer):
    """HTTPServer with `threads` threads answering, and a line of LINE_PER_THREAD each."""

    def __init__(
        self,
        address: tuple[Any, ...],
        handler: type[BaseHTTPRequestHandler],
        *,
        threads: int = DEFAULT_THREADS,
        on_thread_exit: Callable[[], None] | None = None,
    ) -> None:
        super().__init__(address, handler)
        self.line: queue.Queue[tuple[Any, Any] | None] = queue.Queue(maxsize=threads * LINE_PER_THREAD)
        self.on_thread_exit = on_thread_exit
        self.turned_away = 0
        self.threads = [
            threading.Thread(target=self._answer, name=f"labqueue-http-{n}", daemon=True)
            for n in range(threads)
        ]
        for thread in self.threads:
            thread.start()

    def process_request(self, request: Any, client_address: Any) -> None:
        try:
            self.line.put_nowait((request, client_address))
        except queue.Full:
            self.turned_away += 1
            with contextlib.suppress(OSError):  # the client left already
                request.sendall(TOO_BUSY)
            self.shutdown_request(request)

    def _answer(self) -> None:
        try:
            while (waiting := self.line.get()) is not None:
                request, client_address = waiting
                try:
                    self.finish_request(request, client_address)
                except Exception:
                    self.handle_error(request, client_address)
                finally:
                    self.shutdown_request(request)
        finally:
            if self.on_thread_exit is not None:
                self.on_thread_exit()

    def server_close(self) -> None:
        super().server_close()
        for _ in self.threads:
            self.line.put(None)  # each thread ends after the connections before it
        for thread in self.threads:
            thread.join(REQUEST_TIMEOUT + 5)


class PooledHTTPServerV6(PooledHTTPServer):
    address_family = socket.AF_INET6
