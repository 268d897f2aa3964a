"""labqueue stats, jobs and job: read a queue, for people and scripts."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time

from .. import listing, metrics
from ..errors import JobNotFound
from ..redaction import redact
from ..signals import StopEvent, stop_on
from . import open_existing


def stats(args: argparse.Namespace) -> int:
    """Print what to watch on the queue DB. Jobs queued, running, ready now, the age of the
    oldest ready job, and dead jobs; then the same per named queue (live jobs only).
    --watch refreshes every few seconds until Ctrl-C. --format json prints one JSON object
    per reading, with "at" (seconds since the epoch) and "at_utc"; --format prometheus the
    Prometheus text exposition (labqueue metrics serves it over HTTP)."""
    output = "json" if args.json else args.format
    # Ctrl-C (or SIGTERM) only sets a flag that the loop reads between readings: an interrupt
    # raised inside SQLite's callbacks could be swallowed there and the watch would go on.
    stop = stop_on(signal.SIGINT, signal.SIGTERM) if args.watch is not None else StopEvent()
    with open_existing(args.db) as q:
        while not stop.is_set():
            if output == "prometheus":
                print(metrics.prometheus_text(metrics.read(q)), end="", flush=True)
            else:
                at = time.time()
                numbers = q.stats()
                per_queue = q.queue_stats()
                paused = q.paused()
                waiting = q.waiting_on_keys()
                if output == "json":
                    stamp = {"at": round(at, 3), "at_utc": listing.iso_utc(at)}
                    whole = {
                        **stamp,
                        **numbers,
                        "queues": per_queue,
                        "paused": paused,
                        "waiting_on_keys": waiting,
                    }
                    print(json.dumps(whole), flush=True)
                else:
                    if args.watch is not None:
                        clear = "\x1b[H\x1b[2J" if sys.stdout.isatty() else "\n"  # a screen, or a log
                        every = f"every {args.watch:g} s; Ctrl-C to stop"
                        where = listing.printable(redact(args.db))
                        print(f"{clear}{where} at {listing.utc(at)} UTC ({every})")
                    width = max(map(len, numbers))
                    lines = [f"{name:<{width}}  {value:>8}" for name, value in numbers.items()]
                    lines += [
                        f"paused: {listing.printable(name)} since {listing.utc(info['paused_at'])} UTC"
                        + (f" ({listing.printable(str(info['reason']))})" if info["reason"] else "")
                        for name, info in paused.items()
                    ]
                    lines += _key_waits(waiting)
                    print("\n".join(lines + _queue_table(per_queue)), flush=True)
            if args.watch is None or stop.wait(args.watch):
                break
    return 0


SHOWN_KEYS = 5  # the keys with most jobs waiting that stats names


def _key_waits(waiting: dict[str, int]) -> list[str]:
    """stats' line on jobs held back by a full concurrency key: how many, and the keys
    with most of them."""
    if not waiting:
        return []
    most = ", ".join(
        f"{listing.printable(listing.cut(k, 40))} {n}" for k, n in list(waiting.items())[:SHOWN_KEYS]
    )
    more = f", and {len(waiting) - SHOWN_KEYS} more keys" if len(waiting) > SHOWN_KEYS else ""
    return [f"waiting on a full concurrency key: {sum(waiting.values())} ({most}{more})"]


def _queue_table(per_queue: dict[str, dict[str, float | int]]) -> list[str]:
    """stats' second table: one line per named queue with live jobs."""
    if not per_queue:
        return []
    heads = ("queue", "queued", "running", "ready_now", "oldest_ready_age_s")
    rows = [heads] + [(listing.printable(name), *map(str, row.values())) for name, row in per_queue.items()]
    widths = [max(len(row[i]) for row in rows) for i in range(len(heads))]
    lines = [""]
    for row in rows:
        pairs = enumerate(zip(row, widths, strict=True))
        lines.append("  ".join(cell.rjust(w) if i else cell.ljust(w) for i, (cell, w) in pairs))
    return lines


def jobs(args: argparse.Namespace) -> int:
    """List the jobs stored in the queue DB, newest first. --oldest: oldest first;
    filtered by --state, --kind, --queue and --key: a table with when each was created and
    finished (UTC), or with --json one JSON object per line, its payload as JSON.
    'labqueue job DB ID' shows one job whole."""
    with open_existing(args.db) as q:
        read = q.jobs if args.oldest else q.latest_jobs
        records = read(
            state=args.state or None,
            kind=args.kind,
            queue=args.queue,
            limit=args.limit,
            concurrency_key=args.key,
        )
    if args.json:
        for record in records:
            print(listing.as_json(record))
    else:
        print("\n".join(listing.table(records)))
    return 0


def job(args: argparse.Namespace) -> int:
    """Show one job of the queue DB whole. Every field, times in UTC, the payload as
    indented JSON and the last error in full (--json: one JSON object). An unknown id
    is an error (exit code 1)."""
    with open_existing(args.db) as q:
        record = q.job(args.id)
    if record is None:
        raise JobNotFound(f"no job has id {args.id} (it never existed, or a purge removed it)")
    print(listing.as_json(record) if args.json else "\n".join(listing.whole(record)))
    return 0
