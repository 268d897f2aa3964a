"""The queue's numbers for Prometheus: text exposition, printed or served over HTTP.

``labqueue stats DB --format prometheus`` prints them once; ``labqueue metrics DB
--port 9187`` serves them at ``/metrics`` for a Prometheus server to scrape. The
server is the standard library's ``http.server``: a scrape every few seconds is one
small request, so it needs no framework and labqueue gains no dependency (nor the
``prometheus_client`` package: the plain text format is a few lines, written here).
Each scrape opens the queue, reads it and closes it, so the endpoint keeps working
when the database is replaced or restarted, and never holds a lock between scrapes.

The metrics (gauges: each is a reading, not a running total, so purges cannot make
them go backwards):

- ``labqueue_jobs{queue,state}`` live jobs (queued, running) per named queue;
- ``labqueue_ready_jobs{queue}`` jobs ready to run now;
- ``labqueue_oldest_ready_age_seconds{queue}`` how long the oldest ready job has waited;
- ``labqueue_longest_waiting_seconds`` how long the queued job created longest ago has
  waited, whatever keeps it (a kind no running worker handles, a paused queue, retries;
  0 when none): the oldest ready job's age misses a job given back again and again;
- ``labqueue_dead_jobs`` dead jobs (every queue; read through the dead-jobs index);
- ``labqueue_jobs_waiting_on_key`` jobs ready now that wait because their concurrency key
  is at its limit, and ``labqueue_keys_at_limit`` how many keys hold them (per key would
  be a series per customer: ``labqueue stats`` names the keys);
- ``labqueue_finished_last_minute{queue,state}`` jobs that finished (done, dead,
  cancelled) in the last 60 s by their ``finished_at``: the throughput. It reads the
  table once per scrape (there is no index on ``finished_at``), so keep finished jobs
  purged (``--purge-after``) and the scrape interval at 15 s or more on a big table.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from .errors import InvalidArgument
from .hosts import REFUSAL, AllowedHosts
from .serving import DEFAULT_THREADS, REQUEST_TIMEOUT, PooledHTTPServer, PooledHTTPServerV6
from .signals import StopEvent

THROUGHPUT_WINDOW = 60.0
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

log = logging.getLogger("labqueue.metrics")


@dataclass
class Reading:
    """One reading of a queue: what stats(), queue_stats() and finished_within() said, and when."""

    at: float
    stats: dict[str, Any]
    queues: dict[str, dict[str, Any]]
    finished: dict[str, dict[str, int]] = field(default_factory=dict)
    longest_waiting: float = 0.0
    waiting_on_keys: dict[str, int] = field(default_factory=dict)


def read(q: Any, *, clock: Callable[[], float] = time.time) -> Reading:
    return Reading(
        at=clock(),
        stats=q.stats(),
        queues=q.queue_stats(),
        finished=q.finished_within(THROUGHPUT_WINDOW),
        longest_waiting=(q.longest_waiting() or (None, 0.0))[1],
        waiting_on_keys=q.waiting_on_keys(),
    )


def _label(value: str) -> str:
    """A label value escaped as the text format asks: backslash, double quote, newline."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return repr(float(value)) if isinstance(value, float) else str(value)


def prometheus_text(reading: Reading) -> str:
    """The reading in Prometheus' text exposition format (version 0.0.4)."""
    out: list[str] = []

    def family(name: str, help_text: str, samples: list[tuple[dict[str, str], float]]) -> None:
        out.append(f"# HELP {name} {help_text}")
        out.append(f"# TYPE {name} gauge")
        for labels, value in samples:
            pairs = ",".join(f'{k}="{_label(v)}"' for k, v in labels.items())
            out.append(f"{name}{{{pairs}}} {_number(value)}" if pairs else f"{name} {_number(value)}")

    queues = reading.queues
    family(
        "labqueue_jobs",
        "Live jobs by named queue and state.",
        [
            ({"queue": q, "state": s}, row[s])
            for q, row in sorted(queues.items())
            for s in ("queued", "running")
        ],
    )
    family(
        "labqueue_ready_jobs",
        "Jobs ready to run now, by named queue.",
        [({"queue": q}, row["ready_now"]) for q, row in sorted(queues.items())],
    )
    family(
        "labqueue_oldest_ready_age_seconds",
        "How long the oldest ready job has waited, by named queue.",
        [({"queue": q}, float(row["oldest_ready_age_s"])) for q, row in sorted(queues.items())],
    )
    family(
        "labqueue_longest_waiting_seconds",
        "How long the queued job created longest ago has waited, whatever keeps it.",
        [({}, float(reading.longest_waiting))],
    )
    family("labqueue_dead_jobs", "Dead jobs in every queue.", [({}, reading.stats["dead"])])
    family(
        "labqueue_jobs_waiting_on_key",
        "Jobs ready now that wait because their concurrency key is at its limit.",
        [({}, sum(reading.waiting_on_keys.values()))],
    )
    family(
        "labqueue_keys_at_limit",
        "Concurrency keys at their limit with jobs waiting on them.",
        [({}, len(reading.waiting_on_keys))],
    )
    family(
        "labqueue_finished_last_minute",
        "Jobs that finished in the last 60 s by named queue and final state (throughput).",
        [
            ({"queue": q, "state": s}, n)
            for q, states in sorted(reading.finished.items())
            for s, n in sorted(states.items())
        ],
    )
    return "\n".join(out) + "\n"


def listen_host(host: str) -> str:
    """The address to listen on, checked: never empty, which the socket layer would take
    for every interface without anyone having said so (0.0.0.0 or :: says it)."""
    if not isinstance(host, str) or not host.strip():
        raise InvalidArgument(
            "an empty host would listen on every interface: give an address (127.0.0.1 is the "
            f"default), or 0.0.0.0 or :: to mean every interface, got {host!r}"
        )
    return host


def serve(
    open_reader: Callable[[], Any],
    host: str = "127.0.0.1",
    port: int = 9187,
    *,
    ready: Callable[[PooledHTTPServer], None] | None = None,
    stop: threading.Event | StopEvent | None = None,
    allow_hosts: Iterable[str] = (),
) -> None:
    """Serve /metrics until `stop` is set. `open_reader()` opens the queue for one
    scrape (a context manager). `ready(server)` is called once it listens (its port is
    server.server_address[1], useful with port 0). An IPv6 `host` (::, ::1) listens on
    IPv6; HEAD answers as GET does, without the body. A request whose Host header names
    another host than localhost, a loopback address, `host` or one of `allow_hosts` gets
    421 and no metric (labqueue.hosts: a DNS-rebinding page reads nothing)."""
    host = listen_host(host)
    hosts = AllowedHosts(host, allow_hosts)

    class Handler(BaseHTTPRequestHandler):
        timeout = REQUEST_TIMEOUT

        def do_GET(self) -> None:
            self._answer(with_body=True)

        def do_HEAD(self) -> None:
            self._answer(with_body=False)

        def _answer(self, with_body: bool) -> None:
            if not hosts.admits(self.headers.get("Host")):
                self._send(421, REFUSAL + "\n", with_body)
                return
            if self.path.split("?")[0] != "/metrics":
                self._send(404, "labqueue serves its metrics at /metrics\n", with_body)
                return
            try:
                with open_reader() as q:
                    body = prometheus_text(read(q))
            except Exception as exc:  # the queue cannot be read: say so in one line, stay up
                log.warning("metrics scrape failed: %s: %s", type(exc).__name__, exc)
                said = f"cannot read the queue ({type(exc).__name__}; the server's log says why)\n"
                self._send(503, said, with_body)
                return
            self._send(200, body, with_body)

        def _send(self, status: int, body: str, with_body: bool) -> None:
            data = body.encode("utf-8")
            self.send_response(status)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if with_body:
                self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # scrapes are routine: DEBUG
            log.debug("%s %s", self.address_string(), format % args)

    run_server(Handler, host, port, ready=ready, stop=stop)


def run_server(
    handler: type[BaseHTTPRequestHandler],
    host: str,
    port: int,
    *,
    ready: Callable[[PooledHTTPServer], None] | None = None,
    stop: threading.Event | StopEvent | None = None,
    threads: int = DEFAULT_THREADS,
    on_thread_exit: Callable[[], None] | None = None,
) -> None:
    """Serve `handler` on `host`:`port` (on `threads` threads: labqueue.serving; IPv6 when
    `host` is one) until `stop` is set: the metrics endpoint's server, and the dashboard's
    (labqueue.dashboard)."""
    stop = stop or threading.Event()
    server_class = PooledHTTPServerV6 if ":" in host else PooledHTTPServer
    with server_class((host, port), handler, threads=threads, on_thread_exit=on_thread_exit) as server:
        if ready is not None:
            ready(server)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)
        thread.start()
        stop.wait()
        server.shutdown()
        thread.join()
