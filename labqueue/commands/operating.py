"""labqueue requeue-dead, cancel, purge, pause, resume and migrate: an operator's changes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from .. import listing
from ..errors import CannotCancel, JobNotFound
from ..redaction import redact
from . import PROG, UsageError, open_existing


def _check_selection(args: argparse.Namespace) -> None:
    """A bulk command names its jobs by ID, or selects them with --queue/--kind/--all: one
    of the two, before the queue is opened."""
    filters = args.queue is not None or args.kind is not None
    if args.ids and (filters or args.all):
        raise UsageError("name jobs by ID or select them with --queue/--kind/--all, not both")
    if not (args.ids or filters or args.all):
        raise UsageError("say which jobs: their IDs, --queue NAME and/or --kind KIND, or --all")


def _selected(args: argparse.Namespace, q: Any, states: Sequence[str]) -> list[int] | None:
    """The ids a bulk command acts on when none were named: the jobs in `states` that
    --queue/--kind/--all select (None when IDs were named: the caller reports on each)."""
    if args.ids:
        return None
    return [r.id for r in q.jobs(state=list(states), kind=args.kind, queue=args.queue)]


def requeue_dead(args: argparse.Namespace) -> int:
    """Put dead jobs of the queue DB back in the queue. Their attempts are reset; the
    ones with the given IDs, those of --queue and/or --kind, or --all. Prints the ids
    requeued, one per line. A named job that was not requeued (not dead, or no such
    job) gets a line on stderr and the exit code is 1, as for cancel."""
    _check_selection(args)
    with open_existing(args.db) as q:
        selected = _selected(args, q, ["dead"])
        done = q.requeue_dead(args.ids if selected is None else selected)
        missed = sorted(set(args.ids) - set(done))
        for job_id in missed:
            record = q.job(job_id)
            why = "no job has this id" if record is None else f"it is {record.state}, not dead"
            print(f"{PROG} requeue-dead: job {job_id} not requeued: {why}", file=sys.stderr)
    for job_id in done:
        print(job_id)
    if selected is not None and not done:
        print("no dead job matched: nothing was requeued", file=sys.stderr)
    return 1 if missed else 0


def cancel(args: argparse.Namespace) -> int:
    """Cancel jobs of the queue DB. The ones with the given IDs, or the queued and
    running jobs of --queue and/or --kind, or --all of them. A queued job will never
    run; a running job's worker is refused at its next heartbeat or report, and its
    effect never commits. Prints each id and the state it was cancelled in. A named job
    that is finished or unknown gets a line on stderr and is left as it was (exit
    code 1, as for requeue-dead)."""
    _check_selection(args)
    failed = False
    with open_existing(args.db) as q:
        selected = _selected(args, q, ["queued", "running"])
        for job_id in args.ids if selected is None else selected:
            try:
                print(f"{job_id} cancelled (was {q.cancel(job_id)})")
            except (CannotCancel, JobNotFound) as exc:
                print(f"{PROG} cancel: {exc}", file=sys.stderr)
                failed = failed or selected is None  # a job selected by filter may just have finished
        if selected == []:
            print("no queued or running job matched: nothing was cancelled", file=sys.stderr)
    return 1 if failed else 0


def purge(args: argparse.Namespace) -> int:
    """Remove old finished jobs from the queue DB. Those that finished more than
    --older-than ago (90s, 15m, 2h, 1d, 1w or seconds): done jobs, and dead or cancelled ones only when
    named with --state. Each batch of rows is a short transaction of its own, so workers
    carry on meanwhile. The newest row is always kept, so that ids are never handed out
    twice; purge says so when it kept one. --reclaim then hands the freed pages back to
    the file system (files made by labqueue; --vacuum rebuilds an older file once so
    that it can, and needs the queue quiet)."""
    states = args.state or ["done"]
    with open_existing(args.db) as q:
        result = q.purge(args.older_than, states=states, batch=args.batch, archive=args.archive)
        kept = " (archived in jobs_archive)" if args.archive else ""
        print(
            f"removed {result.removed} job(s){kept} in {result.batches} transaction(s), "
            f"the longest {result.longest_hold_s * 1000:.1f} ms"
        )
        newest = q.latest_jobs(limit=1)
        cut = q.server_time() - args.older_than
        last = newest[0] if newest else None
        if (
            last is not None
            and last.state in states
            and last.finished_at is not None
            and last.finished_at <= cut
        ):
            print(f"kept the newest row, id {newest[0].id}, so ids are never reused")
        if args.vacuum:
            q.vacuum()
            print("vacuumed: the file was rebuilt")
        if args.reclaim or args.vacuum:
            freed = q.reclaim_space()
            space = q.space()
            pages, size = space["page_count"], space["page_size"]
            print(f"freed {freed} page(s); the file has {pages} pages of {size} bytes")
    return 0


def pause(args: argparse.Namespace) -> int:
    """Pause a named queue, so that workers leave its jobs alone.

    No worker takes a job of --queue until `labqueue resume`. Jobs running now finish;
    queued ones wait, untouched; producers can still enqueue. Every worker sees the pause
    within a second. Exits 1 if the queue was paused already."""
    with open_existing(args.db) as q:
        if not q.pause(args.queue, reason=args.reason):
            since = listing.utc(q.paused()[args.queue]["paused_at"])
            print(
                f"{PROG} pause: queue {args.queue!r} was paused already (since {since} UTC)", file=sys.stderr
            )
            return 1
    print(f"paused queue {args.queue!r}: workers leave its jobs alone until '{PROG} resume'")
    return 0


def resume(args: argparse.Namespace) -> int:
    """Resume a paused queue, so that workers take its jobs again.

    Idle workers are woken. Exits 1 if --queue was not paused."""
    with open_existing(args.db) as q:
        if not q.resume(args.queue):
            print(f"{PROG} resume: queue {args.queue!r} was not paused", file=sys.stderr)
            return 1
    print(f"resumed queue {args.queue!r}")
    return 0


def migrate(args: argparse.Namespace) -> int:
    """Upgrade the queue's schema DB to this labqueue's, while it runs. Opening a queue
    never migrates it: a queue older than this labqueue runs on is refused, naming this
    command. Each step waits at most --lock-timeout for a lock, then backs off and tries
    again; on PostgreSQL indexes are built CONCURRENTLY and each version is recorded in the
    schema's labqueue_migrations table. --dry-run prints what it would do, --status what is
    applied and pending. Expand steps (the default) leave the queue usable by the labqueue
    version before this one; --contract also takes the steps that do not, once every
    producer and worker runs this version (docs/package/howto/upgrades.md)."""
    from .. import migrate as migrating

    if args.status or args.dry_run:
        plan = migrating.migrate(args.db, dry_run=True, contract=args.contract, schema=args.schema)
        for line in plan.lines():
            print(redact(line, args.db))
        return 0
    plan = migrating.migrate(
        args.db,
        contract=args.contract,
        lock_timeout=args.lock_timeout,
        schema=args.schema,
        say=lambda line: print(redact(line, args.db), flush=True),
    )
    print(redact(plan.summary(), args.db))
    return 0
