"""Notebook 17's lab: the same queue on PostgreSQL, for workers on several machines.

A throwaway server (labqueue.postgres.server, or the one LABQUEUE_PG_URL names) listens
on 127.0.0.1, so the worker processes here connect over TCP as workers on other machines
would. The experiments: the files that tie SQLite's WAL to one host, the claim statement
in both dialects, notebook 01's claim race on PostgreSQL, the drain rate by number of
workers on both backends, and two machines whose clocks disagree.
"""

from __future__ import annotations

import atexit
import contextlib
import html
import os
import re
import tempfile
import textwrap
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..drivers.sqlite import sql as sqlite_sql
from ..procs import run_together
from ..queue import JobQueue
from .assets import data_file, figure_png, new_figure
from .scratch import work_folder

DEFAULT_RACE_JOBS = 500
DEFAULT_RACE_WORKERS = 4
DEFAULT_DRAIN_JOBS = 500
DEFAULT_PROCS = (1, 2, 4)
TUTORIAL_JOBS = 10_000  # the benchmark's size (data/bench_pg.json has 5,000 per drain)
START_TIMEOUT_SECONDS = 120.0
RESULT_TIMEOUT_SECONDS = 300.0

# -- the server -------------------------------------------------------------------------------


@dataclass
class Server:
    """A running PostgreSQL: its URL (over TCP to 127.0.0.1 when the lab started it),
    how long it took to be ready, and its version."""

    url: str = field(repr=False)  # may carry a password: never in a repr
    seconds_to_start: float
    version: str
    stack: contextlib.ExitStack

    def stop(self) -> None:
        """Stop the server and delete its folder (a server named by LABQUEUE_PG_URL is left running)."""
        self.stack.close()

    def line(self) -> str:
        from ..redaction import redact

        return f"PostgreSQL {self.version} ready in {self.seconds_to_start:.1f} s at {redact(self.url)}"


_current: Server | None = None


def start_server() -> Server:
    """Start a throwaway PostgreSQL listening on 127.0.0.1 (or use LABQUEUE_PG_URL's) and
    make it this kernel's server; a second call returns the one already running."""
    global _current
    if _current is not None:
        return _current
    import psycopg

    from ..postgres.server import throwaway_server

    stack = contextlib.ExitStack()
    started = time.perf_counter()
    try:
        url = stack.enter_context(throwaway_server(tcp=True, watchdog=True))  # gone with the kernel
        with psycopg.connect(url) as db:
            version = db.execute("SHOW server_version").fetchone()[0]
    except BaseException:
        stack.close()
        raise
    _current = Server(url, time.perf_counter() - started, version, stack)
    stack.callback(_forget)
    # A kernel that exits normally stops its server itself, while its modules are still
    # there (left to the interpreter's shutdown, the cleanup failed); a killed kernel's
    # server is stopped by the watchdog.
    atexit.register(stack.close)
    stack.callback(atexit.unregister, stack.close)
    return _current


def _forget() -> None:
    global _current
    _current = None


def server_url() -> str:
    """The running server's URL, starting one if there is none (it stops when Python exits)."""
    if _current is None:
        import atexit

        atexit.register(stop_server)
    return start_server().url


def stop_server() -> None:
    if _current is not None:
        _current.stop()


@contextlib.contextmanager
def scratch_schema(url: str, prefix: str) -> Iterator[str]:
    """A fresh schema name for one experiment, dropped with everything in it afterwards."""
    from ..postgres import drop_schema

    schema = f"{prefix}_{uuid.uuid4().hex[:8]}"
    try:
        yield schema
    finally:
        drop_schema(url, schema)


# -- why SQLite stays on one host ---------------------------------------------------------------


def wal_files(folder: str | Path | None = None) -> Any:
    """The files one SQLite queue in WAL mode keeps while it is open, and what each is for."""
    import pandas as pd

    with tempfile.TemporaryDirectory(dir=folder) as where:
        path = Path(where) / "jobs.db"
        with JobQueue(path) as q:
            q.enqueue_many("noop", [{"n": i} for i in range(100)])
            sizes = {p.name: p.stat().st_size for p in sorted(Path(where).iterdir())}
    purpose = {
        "jobs.db": "the database pages: every process reads them",
        "jobs.db-wal": "committed changes not yet copied back: readers look here first",
        "jobs.db-shm": "the WAL's index, memory-mapped by every process: shared memory, so one host",
    }
    return pd.DataFrame(
        [
            {"file": name, "bytes": size, "what it is for": purpose.get(name, "")}
            for name, size in sizes.items()
        ]
    ).set_index("file")


# -- the claim in two dialects ----------------------------------------------------------------------

# Characters per line of a claim column: two columns side by side fit a wide notebook's output area.
SQL_COLUMN_WIDTH = 76
# JupyterLab breaks an output's <pre> anywhere (word-break: break-all), which cut "%(now)s" in
# two; these lines are wrapped here, between tokens, and the browser keeps them as they are.
SQL_PRE_STYLE = (
    "font-family: var(--jp-code-font-family, monospace); font-size: 11px; text-align: left;"
    " white-space: pre; word-break: normal; overflow-wrap: normal"
)
# A word of SQL: a run of characters up to a space; a quoted string, spaces and all, and the
# type name "double precision" are pieces of one word.
SQL_WORD = re.compile(r"(?:'[^']*'|\bdouble precision\b|[^\s'])+", re.I)


def wrap_sql(text: str, width: int = SQL_COLUMN_WIDTH) -> str:
    """SQL with each line longer than `width` broken at a space between two tokens, never
    inside a name, a parameter or a quoted string. Of the spaces in the second half of the
    line that fit, it takes one after a comma, else one outside brackets, else the last one
    (a line with no such space breaks at the last that fits); continuation lines are indented eight
    spaces past the line they continue. A line that fits is kept as it is, and so is a single
    token too long for any line."""
    lines = []
    for line in text.splitlines():
        if len(line) <= width:
            lines.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip())]
        words = SQL_WORD.findall(line)
        # How good a break after each word is: 2 after a comma, 1 outside brackets, 0 elsewhere.
        depth, rank = 0, []
        for word in words:
            bare = re.sub(r"'[^']*'", "", word)
            depth += bare.count("(") - bare.count(")")
            rank.append(2 if word.endswith(",") else 1 if depth <= 0 else 0)
        start = 0
        while start < len(words):
            lead = indent if start == 0 else indent + " " * 8
            end, length = start + 1, len(lead) + len(words[start])
            while end < len(words) and length + 1 + len(words[end]) <= width:
                length, end = length + 1 + len(words[end]), end + 1
            if end < len(words):  # the line is full: its best break in its second half
                fits = range(start + 1, end + 1)
                half = [k for k in fits if len(lead + " ".join(words[start:k])) > width // 2]
                end = max(half, key=lambda k: (rank[k - 1], k), default=end)
            lines.append(lead + " ".join(words[start:end]))
            start = end
    return "\n".join(lines)


def claim_statements() -> Any:
    """The SQLite and PostgreSQL drivers' CLAIM (labqueue.drivers.sqlite.sql, labqueue.drivers.postgres.sql)
    side by side, as the code holds them, long lines wrapped between tokens. In an output area
    too narrow for both, the PostgreSQL column moves below the SQLite one; a column too wide
    for it scrolls sideways."""
    from IPython.display import HTML

    from ..drivers.postgres import sql as pg_sql

    def column(title: str, text: str) -> str:
        return (
            "<div style='flex: 0 0 auto; max-width: 100%; overflow-x: auto; text-align: left'>"
            f"<b>{html.escape(title)}</b>"
            f"<pre style='{SQL_PRE_STYLE}'>{html.escape(wrap_sql(text.strip()))}</pre></div>"
        )

    sqlite_side = sqlite_sql.RETIRE_EXHAUSTED.strip() + ";\n\n" + sqlite_sql.CLAIM.strip()
    cells = column("SQLite: labqueue/drivers/sqlite/sql.py (RETIRE_EXHAUSTED; CLAIM)", sqlite_side)
    cells += column("PostgreSQL: labqueue/drivers/postgres/sql.py (CLAIM)", pg_sql.CLAIM)
    side_by_side = "display: flex; flex-wrap: wrap; gap: 1em 2em; align-items: flex-start"
    return HTML(f"<div style='{side_by_side}'>{cells}</div>")


# -- the claim race on PostgreSQL -----------------------------------------------------------------

RACE_NAIVE_LOOK = "SELECT id FROM jobs WHERE state = 'queued' ORDER BY id LIMIT 1"
RACE_NAIVE_TAKE = "UPDATE jobs SET state = 'running', worker = %s WHERE id = %s"
STRATEGIES = {
    "naive": "look, then claim (two statements, notebook 01's naive claim)",
    "skip_locked": "one statement, FOR UPDATE SKIP LOCKED (PgJobQueue.claim)",
}


def race_worker(url: str, schema: str, strategy: str, name: str, barrier: Any, results: Any) -> None:
    """One racer: claim jobs one at a time until none is left, then report their ids."""
    from ..postgres import PgJobQueue

    taken: list[int] = []
    with PgJobQueue(url, schema=schema, lease_seconds=600) as q:
        barrier.wait()
        while True:
            if strategy == "skip_locked":
                job = q.claim_next(name)
                job_id = None if job is None else job.id
            else:
                row = q.db.execute(RACE_NAIVE_LOOK).fetchone()
                job_id = None if row is None else row[0]
                if job_id is not None:
                    q.db.execute(RACE_NAIVE_TAKE, (name, job_id))
            if job_id is None:
                break
            taken.append(job_id)
    results.put((name, taken))


@dataclass(frozen=True)
class RaceResult:
    strategy: str
    jobs: int
    workers: int
    claims: int
    distinct: int
    per_worker: tuple[int, ...]
    seconds: float

    @property
    def duplicates(self) -> int:
        return self.claims - self.distinct

    @property
    def missed(self) -> int:
        return self.jobs - self.distinct


def claim_race(
    url: str, jobs: int = DEFAULT_RACE_JOBS, workers: int = DEFAULT_RACE_WORKERS
) -> list[RaceResult]:
    """Notebook 01's race on PostgreSQL: `workers` processes claim `jobs` jobs one by one,
    once with the naive look-then-claim and once with the queue's own claim."""
    from ..postgres import PgJobQueue

    results = []
    for strategy in STRATEGIES:
        with scratch_schema(url, "race") as schema:
            with PgJobQueue(url, schema=schema) as q:
                q.enqueue_many("race", ({"n": i} for i in range(jobs)))
            args = [(url, schema, strategy, f"w{i}") for i in range(workers)]
            reports, released = run_together(
                race_worker,
                args,
                f"race ({strategy})",
                start_timeout=START_TIMEOUT_SECONDS,
                result_timeout=RESULT_TIMEOUT_SECONDS,
            )
            seconds = time.time() - released
        taken = [job_id for _, ids in reports for job_id in ids]
        per_worker = tuple(len(ids) for _, ids in sorted(reports))
        results.append(RaceResult(strategy, jobs, workers, len(taken), len(set(taken)), per_worker, seconds))
    return results


def race_table(results: Sequence[RaceResult]) -> Any:
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "claim": STRATEGIES[r.strategy],
                "jobs": r.jobs,
                "claims": r.claims,
                "duplicates": r.duplicates,
                "missed": r.missed,
                "claims per worker": ", ".join(map(str, r.per_worker)),
            }
            for r in results
        ]
    ).set_index("claim")


# -- throughput by number of workers ---------------------------------------------------------------


def drain_by_workers(
    url: str,
    procs: Sequence[int] = DEFAULT_PROCS,
    jobs: int = DEFAULT_DRAIN_JOBS,
    rounds: int = 1,
    folder: str | Path | None = None,
    progress: Callable[[str], object] = lambda line: None,
) -> Any:
    """labqueue.bench.pg's drains at notebook size: no-op jobs drained by N worker
    processes on a fresh SQLite file and on a fresh PostgreSQL database. One row per drain."""
    import pandas as pd

    from ..bench import pg as bench

    sizes = bench.Sizes(jobs=jobs, rounds=rounds, procs=tuple(procs))
    where = Path(folder) if folder is not None else work_folder() / "pg_drain"
    with bench.server_database(url) as database:
        runs = bench.drain_rates(where, database, sizes, progress)
    return pd.DataFrame(runs)


def drain_summary(runs: Any) -> Any:
    """Median jobs/s per backend and number of workers, with the PostgreSQL / SQLite ratio."""
    table = runs.pivot_table(index="procs", columns="backend", values="jobs_per_s", aggfunc="median")
    table = table.rename(columns={"sqlite": "SQLite jobs/s", "postgres": "PostgreSQL jobs/s"})
    table = table[["SQLite jobs/s", "PostgreSQL jobs/s"]]
    ratio = (table["PostgreSQL jobs/s"] / table["SQLite jobs/s"]).round(2)
    table = table.round(0).astype("Int64")  # whole jobs per second (Int64: a missing drain shows as <NA>)
    table["PostgreSQL / SQLite"] = ratio
    table.index.name = "workers"
    table.columns.name = None
    return table


def _saved(name: str) -> dict[str, Any] | None:
    """A saved bench run from data/, or None when there is none."""
    import json

    try:
        return json.loads(data_file(name).read_text())
    except FileNotFoundError:
        return None


def published_drains() -> Any:
    """The full-size run saved in data/bench_pg.json (python -m labqueue.bench.pg), or None."""
    import pandas as pd

    results = _saved("bench_pg.json")
    if results is None:
        return None
    return pd.DataFrame(results["summary"]).set_index("procs"), results["meta"]


def published_latency() -> Any:
    """The saved run's pick-up latency on PostgreSQL, LISTEN/NOTIFY against polling, or None."""
    import pandas as pd

    results = _saved("bench_pg.json")
    if results is None:
        return None
    rows = [
        {
            "an idle worker waits by": row["label"],
            "jobs picked up": f"{row['picked']}/{row['jobs']}",
            "median ms": round(row["median_ms"], 1),
            "95th percentile ms": round(row["p95_ms"], 1),
            "max ms": round(row["max_ms"], 1),
        }
        for row in results["latency"]
    ]
    return pd.DataFrame(rows).set_index("an idle worker waits by")


def published_peers() -> Any:
    """The saved `labqueue bench pg-peers` run: each contender's median jobs/s with 1 and 4
    workers, labqueue's paired ratio to it, and what it promises about a job; or None."""
    import pandas as pd

    results = _saved("bench_pg_peers.json")
    if results is None:
        return None
    rows = [
        {
            "contender": row["label"],
            "workers": row["procs"],
            "jobs/s": round(row["median_jobs_per_s"]),
            "labqueue / it": "-" if row["labqueue_ratio"] is None else f"{row['labqueue_ratio']:.2f}x",
            "what it promises about a job": row["guarantee"],
        }
        for row in sorted(results["summary"], key=lambda r: (r["procs"], -r["median_jobs_per_s"]))
    ]
    return pd.DataFrame(rows).set_index(["workers", "contender"])


COLOURS = {"sqlite": "#1f77b4", "postgres": "#c44e52"}


def plot_throughput(runs: Any, published: Any = None):
    """Jobs per second against worker processes, both backends on one axis (log scale):
    this run as solid lines, the saved full-size run as dashed ones."""
    fig, ax = new_figure()
    for backend, label in (("sqlite", "SQLite"), ("postgres", "PostgreSQL")):
        mine = runs[runs["backend"] == backend].groupby("procs")["jobs_per_s"].median()
        ax.plot(mine.index, mine.values, "o-", color=COLOURS[backend], label=f"{label}, this run")
        if published is not None:
            summary, meta = published
            column = summary[f"{backend}_jobs_per_s"]
            ax.plot(
                column.index,
                column.values,
                "s--",
                color=COLOURS[backend],
                alpha=0.5,
                label=f"{label}, {meta['sizes']['jobs']:,} jobs (data/bench_pg.json)",
            )
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    low, high = ax.get_ylim()
    ax.set_ylim(low / 4, high * 1.5)  # room for the legend under the lines
    ticks = sorted(set(runs["procs"]) | (set(published[0].index) if published is not None else set()))
    ax.set_xticks(ticks, [str(t) for t in ticks])
    ax.set_xlabel("worker processes")
    ax.set_ylabel("no-op jobs drained per second")
    ax.set_title("Drain rate by number of workers")
    ax.legend(fontsize=7, loc="lower center", ncol=2)
    ax.grid(True, which="major", alpha=0.3)
    return fig


# -- the server goes away --------------------------------------------------------------------

DEFAULT_SURVIVAL_JOBS = 200
LEDGER_PG = "CREATE TABLE IF NOT EXISTS ledger (job_id BIGINT NOT NULL, attempt BIGINT NOT NULL)"
TERMINATE_OTHERS = """
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
 WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()
"""


@dataclass(frozen=True)
class SurvivalRun:
    """What `labqueue worker` processes did while their sessions were terminated and
    the server restarted under them, read back from the database and their log."""

    jobs: int
    workers: int
    sessions_terminated: int
    restart_outage_s: float
    done: int
    dead: int
    ledger_rows: int
    not_once: int  # jobs whose ledger row count is not exactly 1
    log: list[str]
    seconds: float

    @property
    def reconnects(self) -> int:
        return sum("reconnected after" in line for line in self.log)

    def table(self) -> Any:
        import pandas as pd

        rows = {
            "credit jobs enqueued": self.jobs,
            "worker processes": self.workers,
            "sessions terminated mid-run": self.sessions_terminated,
            "server restarts (s without a server)": f"1 ({self.restart_outage_s:g} s)",
            "reconnects the workers logged": self.reconnects,
            "jobs done": self.done,
            "jobs dead": self.dead,
            "ledger rows": self.ledger_rows,
            "jobs without exactly one ledger row": self.not_once,
        }
        return pd.DataFrame({"value": [str(v) for v in rows.values()]}, index=list(rows))

    def log_excerpt(self) -> None:
        """The worker log's lines about the connection, each message whole, wrapped for reading
        (the logger's name and the database's location left out)."""
        for line in self.log:
            if "connection" in line or "reconnected" in line:
                time_part, _, message = line.partition(" labqueue.worker")
                message = message.split(": ", 1)[-1]
                message = message.split("): ", 1)[-1] if "(schema" in message else message  # the URL
                stamp = time_part[11:23]
                print(
                    textwrap.fill(f"{stamp} {message}", width=100, subsequent_indent=" " * (len(stamp) + 1))
                )


def survive_server(
    url: str, *, jobs: int = DEFAULT_SURVIVAL_JOBS, workers: int = 2, outage: float = 1.0
) -> SurvivalRun:
    """In a fresh database on the server `url`: `jobs` credit jobs (each writes one ledger
    row in its completing transaction), drained by `labqueue worker --concurrency workers`.
    A quarter of the way through, every worker session is terminated; halfway, the server
    is stopped and, `outage` seconds later, started again (postgres.server.restart). The
    workers reconnect with backoff on their own; nothing is retried by hand."""
    import subprocess
    import sys

    import psycopg

    from ..backends import open_queue
    from ..environment import DB_VARIABLE
    from ..postgres.server import fresh_database, restart
    from .demo_handlers import DEMO_HANDLERS

    def done_now(database: str) -> int:
        with open_queue(database) as q:
            return q.counts()["done"]

    def wait_until(condition: Callable[[], bool], seconds: float = 120.0) -> None:
        give_up = time.monotonic() + seconds
        while not condition():
            if time.monotonic() > give_up:
                raise TimeoutError("the workers stopped making progress")
            time.sleep(0.05)

    started = time.perf_counter()
    log_path = work_folder() / "pg_survival.log"
    with fresh_database(url, prefix="survival") as database:
        with open_queue(database) as q:
            q.db.execute(LEDGER_PG)
            q.enqueue_many("credit", [{"n": i} for i in range(jobs)])
        # The database's URL goes in LABQUEUE_DB, never on a command line (docs/package/howto/workers.md)
        command = [
            sys.executable,
            "-m",
            "labqueue",
            "worker",
            "--handlers",
            DEMO_HANDLERS,
            "--concurrency",
            str(workers),
            "--idle-exit",
            "3",
            "--lease",
            "5",
            "--backoff-cap",
            "1",
        ]
        with open(log_path, "w+") as log:
            env = {**os.environ, DB_VARIABLE: database}
            proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
            try:
                wait_until(lambda: done_now(database) >= jobs // 4)
                with psycopg.connect(database, autocommit=True) as admin:
                    terminated = len(admin.execute(TERMINATE_OTHERS).fetchall())
                wait_until(lambda: done_now(database) >= jobs // 2)
                restart(url, stopped_for=outage)
                proc.wait(120)
            finally:
                if proc.poll() is None:
                    proc.kill()
            log.seek(0)
            lines = log.read().splitlines()
        with open_queue(database) as q:
            counts = q.counts()
            per_job = dict(q.db.execute("SELECT job_id, COUNT(*) FROM ledger GROUP BY job_id").fetchall())
    ids = range(1, jobs + 1)
    return SurvivalRun(
        jobs=jobs,
        workers=workers,
        sessions_terminated=terminated,
        restart_outage_s=outage,
        done=counts["done"],
        dead=counts["dead"],
        ledger_rows=sum(per_job.values()),
        not_once=sum(per_job.get(i, 0) != 1 for i in ids),
        log=lines,
        seconds=time.perf_counter() - started,
    )


# -- clocks that disagree ----------------------------------------------------------------------


@dataclass(frozen=True)
class SkewRow:
    deadlines: str  # whose clock the lease deadlines come from
    ahead_takes_live_job: bool  # B (clock ahead) took a job whose lease A still held
    behind_takes_expired_job: bool  # B (clock behind) took a crashed A's job once its lease ran out


SKEW_CASES = {
    "sqlite": "SQLite: each machine's own clock",
    "pg_local": "PostgreSQL, each machine's clock passed in (clock=)",
    "pg_server": "PostgreSQL: the server's clock",
}


def clock_skew(
    url: str, skew: float = 60.0, lease: float = 1.0, folder: str | Path | None = None
) -> list[SkewRow]:
    """Two machines, A with the right time and B with a clock `skew` seconds off, share a
    queue. Ahead: A claims a job and B claims at once; does B get A's live job? Behind: A
    claims a job and dies; once the lease has run out (real time), does B take it over?
    On SQLite each connection reads its own machine's clock; on PostgreSQL without clock=
    every deadline comes from the server's."""
    from ..postgres import PgJobQueue

    def machine_clock(offset: float) -> Callable[[], float]:
        return lambda: time.time() + offset

    with contextlib.ExitStack() as stack:
        where = Path(stack.enter_context(tempfile.TemporaryDirectory(dir=folder)))

        def opener(case: str, scenario: str) -> Callable[[float | None], Any]:
            if case == "sqlite":
                path = where / f"{scenario}.db"
                return lambda offset: stack.enter_context(
                    JobQueue(path, lease_seconds=lease, clock=machine_clock(offset or 0.0))
                )
            schema = stack.enter_context(scratch_schema(url, f"skew_{scenario}"))
            local = case == "pg_local"
            return lambda offset: stack.enter_context(
                PgJobQueue(
                    url,
                    schema=schema,
                    lease_seconds=lease,
                    clock=machine_clock(offset or 0.0) if local else None,
                )
            )

        ahead, behind = {}, {}
        for case in SKEW_CASES:
            make = opener(case, "ahead")
            a, b = make(0.0), make(skew)
            a.enqueue("work", {})
            assert a.claim_next("A") is not None
            ahead[case] = b.claim_next("B") is not None
        pending = {}
        for case in SKEW_CASES:
            make = opener(case, "behind")
            a, b = make(0.0), make(-skew)
            a.enqueue("work", {})
            assert a.claim_next("A") is not None  # ... and A dies holding it
            pending[case] = b
        time.sleep(lease + 0.3)  # real time: A's lease has run out on every honest clock
        for case, b in pending.items():
            behind[case] = b.claim_next("B") is not None
    return [SkewRow(SKEW_CASES[c], ahead[c], behind[c]) for c in SKEW_CASES]


def skew_table(rows: Sequence[SkewRow], skew: float = 60.0) -> Any:
    import pandas as pd

    def word(value: bool, good: bool) -> str:
        return ("yes" if value else "no") + ("" if value == good else "  <- wrong")

    return pd.DataFrame(
        [
            {
                "deadlines from": r.deadlines,
                f"B {skew:g} s ahead takes A's live job": word(r.ahead_takes_live_job, False),
                f"B {skew:g} s behind takes dead A's job after the lease": word(
                    r.behind_takes_expired_job, True
                ),
            }
            for r in rows
        ]
    ).set_index("deadlines from")


# -- the widget ------------------------------------------------------------------------------------


def panel(initial: Any = None, folder: str | Path | None = None, url: str | None = None):
    """Choose the jobs per drain and the worker counts, press Run: both backends drain at
    each count and the plot is redrawn. TUTORIAL_JOBS with 1, 2, 4, 8 is the benchmark's size.
    Without `url`, Run uses this kernel's server, starting one again if it was stopped."""
    import ipywidgets as w

    jobs = w.Dropdown(
        options=[250, DEFAULT_DRAIN_JOBS, 1_000, 5_000, TUTORIAL_JOBS],
        value=DEFAULT_DRAIN_JOBS,
        description="jobs",
    )
    procs = w.SelectMultiple(options=[1, 2, 4, 8], value=DEFAULT_PROCS, description="workers", rows=4)
    button = w.Button(description="Run", button_style="primary", icon="play")
    status = w.HTML("Choose the size and press Run; the chart shows the last run until then.")
    published = published_drains()
    image = w.Image(format="png")
    if initial is not None:
        image.value = figure_png(plot_throughput(initial, published))

    def on_click(_: Any) -> None:
        button.disabled = True
        counts = tuple(sorted(procs.value)) or DEFAULT_PROCS
        try:
            status.value = (
                f"draining {jobs.value:,} jobs with {', '.join(map(str, counts))} workers on both ..."
            )
            where = url or server_url()
            runs = drain_by_workers(where, counts, jobs.value, folder=folder, progress=lambda line: None)
            image.value = figure_png(plot_throughput(runs, published))
            best = runs.groupby("backend")["jobs_per_s"].max()
            status.value = (
                f"best: SQLite {best['sqlite']:,.0f} jobs/s, PostgreSQL {best['postgres']:,.0f} jobs/s; "
                f"duplicates {int(runs['duplicates'].sum())}"
            )
        except Exception as exc:  # shown in the panel: a callback's traceback is easy to miss
            status.value = f"<b>failed:</b> {html.escape(type(exc).__name__)}: {html.escape(str(exc))}"
        finally:
            button.disabled = False

    button.on_click(on_click)
    box = w.VBox([w.HBox([jobs, procs, button]), status, image])
    box.controls = {"jobs": jobs, "procs": procs}
    box.button, box.status, box.image = button, status, image
    return box
