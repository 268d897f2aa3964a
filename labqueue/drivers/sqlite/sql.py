"""Every SQL statement the queue runs, in SQLite's dialect.

Keeping them in one module lets another backend (labqueue/drivers/postgres/sql.py) supply its
own set and pass the same behavioural tests. Values always travel as parameters; no
value is ever formatted into a statement (a few statements are assembled from the
constants below once, at import, and COMPLETE_MANY once per number of ids).
"""

import functools
import re

from ...core import LAST_ATTEMPT_EXPIRED, MAX_ERROR_CHARS
from ...validate import STATES

__all__ = ["LAST_ATTEMPT_EXPIRED", "MAX_ERROR_CHARS"]  # the rules' constants, used in the SQL below

# MAX_ERROR_CHARS: every statement that writes last_error cuts it to this length in SQL,
# whatever it prepends.

# A running job whose attempts are used up: when its lease ends it is retired as dead,
# not claimed again. Written once and spliced into the partial index jobs_exhausted and
# into the statements that use it: SQLite only uses a partial index when the query
# contains the index's WHERE terms, so the two must never drift apart.
EXHAUSTED = "state = 'running' AND attempts >= max_attempts"

# The table as schema version 1 made it (the tutorial's columns and states).
TABLE_V1 = """
CREATE TABLE IF NOT EXISTS jobs (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'queued'
                         CHECK (state IN ('queued', 'running', 'done', 'dead')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    visible_at   REAL    NOT NULL,
    lease_token  TEXT,
    worker       TEXT,
    last_error   TEXT,
    dedupe_key   TEXT UNIQUE,
    created_at   REAL    NOT NULL,
    finished_at  REAL
);
"""

INDEXES_V1 = f"""
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (visible_at, id)
    WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_exhausted ON jobs (visible_at)
    WHERE {EXHAUSTED};
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (id) WHERE state = 'dead';
"""

# Version 2 (Part 2 of the course): a priority and a named queue per job, and the
# 'cancelled' state. The new columns come last, so version 1's columns keep their places.
# {name} lets the migration build the new table beside the old one before the swap.
# {states} is the CHECK on the state column: versions 2 and 3 wrote it as an IN list;
# version 4 writes the same test as comparisons. SQLite codes a CHECK's IN list of more
# than two constants as a temporary index that it builds again for every row an UPDATE
# writes, where comparisons cost next to nothing: measured here, the worker's lease and
# completion (two UPDATEs of ten rows per batch) each took a quarter less time without it.
STATES_IN_LIST = "state IN ('queued', 'running', 'done', 'dead', 'cancelled')"  # as versions 2-3 stored it
STATES_COMPARED = " OR ".join(f"state = '{state}'" for state in STATES)
TABLE_TEMPLATE = """
CREATE TABLE IF NOT EXISTS {name} (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    state        TEXT    NOT NULL DEFAULT 'queued'
                         CHECK ({states}),
    attempts     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL DEFAULT 5,
    visible_at   REAL    NOT NULL,
    lease_token  TEXT,
    worker       TEXT,
    last_error   TEXT,
    dedupe_key   TEXT UNIQUE,
    created_at   REAL    NOT NULL,
    finished_at  REAL,
    priority     INTEGER NOT NULL DEFAULT 0,
    queue        TEXT    NOT NULL DEFAULT 'default'{extra}
);
"""
# Version 5's two columns, which ALTER TABLE adds to a table of version 4 (KEYS below).
KEY_COLUMNS = ",\n    concurrency_key   TEXT,\n    concurrency_limit INTEGER"
# Version 6's three columns (RESULTS below).
RESULT_COLUMNS = ",\n    started_at        REAL,\n    result            TEXT,\n    attempt_log       TEXT"
TABLE = TABLE_TEMPLATE.format(name="jobs", extra=KEY_COLUMNS + RESULT_COLUMNS, states=STATES_COMPARED)

# The jobs of a named queue (not the default one): jobs_queue_ready's WHERE term, written
# once and repeated word for word in the claims that use the index.
NAMED_QUEUE = "queue <> 'default'"

# Each partial index holds only the few rows one statement looks for, so a table
# full of finished jobs costs the claim nothing (notebook 08 measures this). The claim
# takes the highest priority first and then the tutorial's order (visible_at, id), so
# jobs_ready leads with priority; it ends with the queue, so that a claim from some
# queues filters on the index without reading the table. jobs_queue_ready serves a claim
# from one named queue (a worker taking turns between queues) in the same order. It
# leaves out the default queue: a queue that uses no named queues (the tutorial's) pays
# for one ready index, not two (a second one costs about a sixth of the worker's CPU).
INDEXES = f"""
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (priority DESC, visible_at, id, queue)
    WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_queue_ready ON jobs (queue, priority DESC, visible_at, id)
    WHERE state IN ('queued', 'running') AND {NAMED_QUEUE};
CREATE INDEX IF NOT EXISTS jobs_exhausted ON jobs (visible_at)
    WHERE {EXHAUSTED};
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (id) WHERE state = 'dead';
"""

# What purge() archives: the removed rows, as they were, and when they were archived.
ARCHIVE = """
CREATE TABLE IF NOT EXISTS jobs_archive (
    id           INTEGER PRIMARY KEY,
    kind         TEXT    NOT NULL,
    payload      TEXT    NOT NULL,
    state        TEXT    NOT NULL,
    attempts     INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    last_error   TEXT,
    dedupe_key   TEXT,
    created_at   REAL    NOT NULL,
    finished_at  REAL,
    priority     INTEGER NOT NULL,
    queue        TEXT    NOT NULL,
    archived_at  REAL    NOT NULL
);
"""

# Schema version 3: the named queues an operator paused (labqueue pause). A worker takes
# no job from a paused queue; its jobs wait, untouched, until it is resumed.
PAUSES = """
CREATE TABLE IF NOT EXISTS queue_pauses (
    queue     TEXT PRIMARY KEY,
    paused_at REAL NOT NULL,
    reason    TEXT
);
"""

# Schema version 5: a concurrency key and limit per job. The claim hands out a job whose
# key already has `concurrency_limit` running jobs with a live lease to no one (KEY_FREE);
# a lease that ran out frees its place. jobs_key_held counts a key's running jobs from the
# running rows alone. The columns come last and may be NULL, so ALTER TABLE adds them and
# nothing is rebuilt.
KEY_HELD_INDEX = """
CREATE INDEX IF NOT EXISTS jobs_key_held ON jobs (concurrency_key, visible_at)
    WHERE state = 'running' AND concurrency_key IS NOT NULL;
"""
KEYS = (
    """
ALTER TABLE jobs ADD COLUMN concurrency_key TEXT;
ALTER TABLE jobs ADD COLUMN concurrency_limit INTEGER;
"""
    + KEY_HELD_INDEX
)

# Schema version 6: what each job returned and how each of its attempts ended, kept on its
# row (as River and Oban keep a job's errors) rather than in a table of attempts, which
# would cost every job an INSERT and an index entry. `started_at`: when the claim of the
# current (or last) attempt leased it; `result`: the handler's return value as JSON text
# (NULL: it returned None, or the job is not done); `attempt_log`: a JSON array with one
# object per attempt that ended other than done (failed, timed out, lease lost, cancelled,
# given back), appended by the fenced statement that ends it. The done attempt is the row
# itself (attempts, worker, started_at, finished_at): a plain completion writes nothing
# more than before. jobs_archive keeps them (and the worker) too. The columns come last
# and may be NULL: ALTER TABLE adds them, and a worker of an older labqueue runs beside.
ARCHIVE_RESULT_COLUMNS = """
ALTER TABLE jobs_archive ADD COLUMN worker TEXT;
ALTER TABLE jobs_archive ADD COLUMN started_at REAL;
ALTER TABLE jobs_archive ADD COLUMN result TEXT;
ALTER TABLE jobs_archive ADD COLUMN attempt_log TEXT;
"""
RESULTS = (
    """
ALTER TABLE jobs ADD COLUMN started_at REAL;
ALTER TABLE jobs ADD COLUMN result TEXT;
ALTER TABLE jobs ADD COLUMN attempt_log TEXT;
"""
    + ARCHIVE_RESULT_COLUMNS
)
ARCHIVE_CURRENT = ARCHIVE.replace(
    "    archived_at  REAL    NOT NULL\n",
    "    archived_at  REAL    NOT NULL,\n    worker       TEXT,\n    started_at   REAL,\n"
    "    result       TEXT,\n    attempt_log  TEXT\n",
)

SCHEMA = TABLE + INDEXES + KEY_HELD_INDEX + ARCHIVE_CURRENT + PAUSES

# The queue's own transaction statements. Their texts are labqueue's alone, so that an
# effect's own "COMMIT" is never served from sqlite3's statement cache as one of these
# (see drivers/sqlite/effects.py, EffectGuard).
BEGIN = "BEGIN IMMEDIATE /* labqueue */"
COMMIT = "COMMIT /* labqueue */"
ROLLBACK = "ROLLBACK /* labqueue */"
# A read-only transaction (a dashboard page): one snapshot of the file, no lock a writer
# waits on (a WAL reader never blocks a writer); PRAGMA query_only refuses writes meanwhile.
BEGIN_READ = "BEGIN DEFERRED /* labqueue read */"

# -- schema versions -----------------------------------------------------------------
# The version lives in the file header (PRAGMA user_version). MIGRATIONS[n] takes a file
# from version n to n + 1, run in one write transaction with the new version number: a
# script, or the name of a step drivers/sqlite/schema.py runs (when it needs to read the file).
# Version 0 is a file labqueue has not versioned: a new or foreign file (no jobs table
# yet), or a queue made before versions existed, whose table has version 1's shape.
# Version 2 changes a CHECK constraint, which SQLite cannot ALTER: its step builds the
# new table beside the old one, copies every row (and any column another program added),
# and swaps them ("rebuild_jobs_v2": _rebuild_jobs in drivers/sqlite/schema.py, with the
# statements below).
# Version 3 only adds the queue_pauses table. Version 4 rebuilds the table in the same way
# to write the states CHECK as comparisons (TABLE_TEMPLATE says why); nothing else changes.
# Version 5 adds the concurrency key and limit (KEYS); version 6 results and attempts (RESULTS).
MIGRATIONS: tuple[str, ...] = (
    TABLE_V1 + INDEXES_V1,
    "rebuild_jobs_v2",
    PAUSES,
    "rebuild_jobs_v4",
    KEYS,
    RESULTS,
)
SCHEMA_VERSION = len(MIGRATIONS)
# What each step does, for `labqueue migrate --dry-run` and `--status` (MIGRATION_NAMES[n]
# takes a file from version n to n + 1).
MIGRATION_NAMES: tuple[str, ...] = (
    "the jobs table and its indexes",
    "priority, queue and the 'cancelled' state (the jobs table rebuilt, every row copied)",
    "the queue_pauses table",
    "the states CHECK as comparisons (the jobs table rebuilt, every row copied)",
    "the concurrency_key and concurrency_limit columns and the jobs_key_held index",
    "the started_at, result and attempt_log columns (jobs and jobs_archive)",
)
assert len(MIGRATION_NAMES) == len(MIGRATIONS), "a migration without its name"
LAST_IN_LIST_VERSION = 3  # the newest version whose states CHECK is STATES_IN_LIST
LAST_KEYLESS_VERSION = 4  # the newest version without the concurrency columns
LAST_RESULTLESS_VERSION = 5  # the newest version without the result columns

V1_COLUMNS = (
    "id, kind, payload, state, attempts, max_attempts, visible_at, lease_token, worker, "
    "last_error, dedupe_key, created_at, finished_at"
)
# A rebuild builds the new table as jobs_new, copies the rows, then swaps it in.
REBUILT = "jobs_new"
REBUILD_SWAP = f"""
DROP TABLE jobs;
ALTER TABLE {REBUILT} RENAME TO jobs;
{INDEXES}
{ARCHIVE}
"""
# What a rebuild must carry over besides rows: the triggers and indexes another program
# made on the table (DROP TABLE takes them with it); labqueue's own indexes, named in
# INDEXES, are made anew.
OWN_INDEXES = tuple(re.findall(r"CREATE INDEX IF NOT EXISTS (\w+)", INDEXES + KEY_HELD_INDEX))
OTHERS_ON_JOBS = f"""
SELECT sql FROM sqlite_master
 WHERE tbl_name = 'jobs' COLLATE NOCASE AND type IN ('index', 'trigger') AND sql IS NOT NULL
   AND name NOT IN ({", ".join(f"'{name}'" for name in OWN_INDEXES)})
 ORDER BY type, name
"""

USER_VERSION = "PRAGMA user_version"

# What a jobs table looks like, for the check that a file's table is labqueue's.
JOBS_OBJECT = "SELECT type, sql FROM sqlite_master WHERE name = 'jobs' COLLATE NOCASE"
# Both, read in one statement and so in one snapshot: read apart, another process could
# create the table and stamp the version between the two (no table, yet a version).
JOBS_OBJECT_AND_VERSION = """
SELECT (SELECT type FROM sqlite_master WHERE name = 'jobs' COLLATE NOCASE),
       (SELECT sql FROM sqlite_master WHERE name = 'jobs' COLLATE NOCASE),
       (SELECT user_version FROM pragma_user_version)
"""
TABLE_SHAPE = """
SELECT name, upper(type), "notnull", dflt_value, pk FROM pragma_table_info('jobs') ORDER BY cid
"""
UNIQUE_KEYS = """
SELECT (SELECT group_concat(name, ',') FROM pragma_index_info(il.name)) AS cols, il.partial
  FROM pragma_index_list('jobs') AS il
 WHERE il."unique"
"""

COLUMNS_V4: tuple[str, ...] = (  # what the version 4 rebuild copies
    "id",
    "kind",
    "payload",
    "state",
    "attempts",
    "max_attempts",
    "visible_at",
    "lease_token",
    "worker",
    "last_error",
    "dedupe_key",
    "created_at",
    "finished_at",
    "priority",
    "queue",
)
COLUMNS = (
    *COLUMNS_V4,
    "concurrency_key",
    "concurrency_limit",
    "started_at",
    "result",
    "attempt_log",
)  # a job's record

ENQUEUE = """
INSERT INTO jobs (kind, payload, max_attempts, visible_at, dedupe_key, created_at, priority, queue,
                  concurrency_key, concurrency_limit)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id
"""

ENQUEUE_MANY = """
INSERT INTO jobs (kind, payload, max_attempts, visible_at, created_at, priority, queue,
                  concurrency_key, concurrency_limit)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
"""


# -- the attempt log (schema version 6) ------------------------------------------------
# One ended attempt appended to the row's attempt_log: its number, worker and start from
# the row as it was (an UPDATE's expressions read the old row), with when and how it ended.
def logged(
    finished: str, outcome: str, error_class: str = "NULL", message: str = "NULL", trace: str = "NULL"
) -> str:
    """attempt_log with one attempt appended (each argument an SQL expression), in lines
    short enough for the course's side-by-side columns."""
    return (
        "json_insert(COALESCE(jobs.attempt_log, '[]'), '$[#]',\n"
        "           json_object(\n"
        "           'attempt', jobs.attempts, 'worker', jobs.worker,\n"
        f"           'started_at', jobs.started_at, 'finished_at', {finished},\n"
        f"           'outcome', {outcome}, 'exception_class_path', {error_class},\n"
        f"           'message', {message}, 'traceback', {trace}))"
    )


# A running row's attempt whose lease ran out, logged by whoever takes the job next (a
# claim) or retires it: unless a supervisor's crash note logged that attempt already.
NOTED = (
    "json_extract(jobs.attempt_log, '$[#-1].outcome')\n"
    "                = 'lease lost'\n"
    "                AND json_extract(jobs.attempt_log, '$[#-1].attempt')\n"
    "                = jobs.attempts"
)


def lease_lost(message: str = "NULL") -> str:
    """attempt_log with a running row's lost lease appended (NOTED: unless logged already)."""
    entry = logged("jobs.visible_at", "'lease lost'", message=message)
    return (
        f"CASE WHEN jobs.state <> 'running'\n            OR ({NOTED})\n"
        f"           THEN jobs.attempt_log\n           ELSE {entry} END"
    )


# A retired job's error: the reason, then the error it had before (the newest text
# first), cut to MAX_ERROR_CHARS however many times a job is requeued and retired.
RETIRED_ERROR = (
    "substr(CASE WHEN last_error IS NULL THEN :reason"
    f" ELSE :reason || '; previous error: ' || last_error END, 1, {MAX_ERROR_CHARS})"
)

# The WHERE clause holds jobs_exhausted's own terms word for word: SQLite only
# uses a partial index when it can see that the query implies the index's WHERE.
RETIRE_EXHAUSTED = f"""
UPDATE jobs
   SET state = 'dead', lease_token = NULL, finished_at = :now,
       last_error = {RETIRED_ERROR}, attempt_log = {lease_lost(":reason")}
 WHERE {EXHAUSTED} AND visible_at <= :now
"""

# Which queues a claim takes from. Every claim statement comes in three scopes, built
# once at import from one text: ALL queues (the tutorial's case, through jobs_ready), ONE
# named queue (:queue, through jobs_queue_ready, so a worker taking turns between queues
# never reads another queue's backlog; the index's own term is repeated for SQLite to see
# that it may use it), SOME named queues (:queues, a JSON array: SQLite reads each queue's
# head from jobs_queue_ready and stops, measured at under 100 steps with 60,000 ready jobs
# in them), the DEFAULT queue alone, or some queues with the default among them. The last
# two read jobs_ready in the claim's order and filter on its queue column (the unary +
# keeps SQLite on that index), so a flood in a named queue ahead in the order costs their
# claims a walk over the flood's index entries.
SCOPES = {
    "all": "",
    "one": f"\n                 AND queue = :queue AND {NAMED_QUEUE}",
    "some": f"\n                 AND queue IN (SELECT value FROM json_each(:queues)) AND {NAMED_QUEUE}",
    "default": "\n                 AND +queue = 'default'",
    "some_default": "\n                 AND +queue IN (SELECT value FROM json_each(:queues))",
    # Every queue but the paused ones: checked on jobs_ready's own queue column.
    "all_but": "\n                 AND queue NOT IN (SELECT value FROM json_each(:paused))",
}

# Highest priority first, then the tutorial's order: the oldest ready job first.
CLAIM_ORDER = "priority DESC, visible_at, id"

# A job whose concurrency key has room: it has no key, or its key has fewer running jobs
# with a live lease than its own limit and than the limit of every one of those running
# jobs (the strictest wins: a job's limit holds for as long as it runs, whatever limits
# the jobs of its key that start later carry). Every claim and look ends its test with
# this, so a key at its limit is passed over and the jobs behind it are taken. The count
# reads jobs_key_held (`held.concurrency_key = ...` implies the index's IS NOT NULL term)
# and each running row's limit. (Within one claim two jobs of a key may both pass, as may
# two workers' claims on PostgreSQL: the queue then keeps the first ones and gives the
# rest back, core.within_limits.)
KEY_FREE = """(concurrency_key IS NULL
                   OR (SELECT COUNT(*) < jobs.concurrency_limit
                          AND (COUNT(*) = 0
                               OR COUNT(*) < MIN(held.concurrency_limit))
                         FROM jobs AS held
                        WHERE held.concurrency_key = jobs.concurrency_key
                          AND held.state = 'running'
                          AND held.visible_at > :now))"""

# A keyed job's lease holds a place of its key, which the claim gives to another job of
# the key the moment the lease runs out. So for a keyed job the deadline is part of the
# fence: once it has passed, its holder can no longer renew, complete or fail it (the job
# runs again under a new claim). An unkeyed job keeps the tutorial's rule: a late report
# whose token still matches (nobody took the job over) is accepted. ?1 is the statement's
# first parameter, the time now.
LEASE_LIVE = "(concurrency_key IS NULL OR visible_at > ?1)"
LEASE_LIVE_NAMED = "(concurrency_key IS NULL OR visible_at > :now)"

_CLAIM = f"""
UPDATE jobs
   SET state = 'running', attempts = attempts + 1,
       visible_at = :lease_end, lease_token = :token, worker = :worker,
       started_at = :now,
       attempt_log = {lease_lost()}
 WHERE id IN (SELECT id FROM jobs
               WHERE state IN ('queued', 'running') AND visible_at <= :now{{scope}}
                 AND {{key_free}}
               ORDER BY {{order}}
               LIMIT :limit)
RETURNING id, kind, payload, attempts, max_attempts, lease_token,
          visible_at, concurrency_key, concurrency_limit
"""


# Group commit's claim (the worker loop's, claim_batch and claim_next), in the write
# transaction that will lease the batch: READY_ROWS reads the next ready rows in the
# claim's order, with what a job is made of (and whether RETIRE_EXHAUSTED must run, below:
# the rows it reads are never ones that statement retires); the driver picks the batch
# from their attempts (core.batch_size: a job handed out before, attempts > 0, its worker
# may have died on it, comes alone; otherwise the leading run of jobs never handed out),
# and CLAIM_IDS leases exactly those rows (its state test only says, in the statement itself,
# that it never takes a finished row). With the write lock held nothing can change them
# between the two statements, and what the lease writes is known (the token, the deadline
# and attempts + 1, which READY_ROWS computes as the UPDATE will), so the claim needs no
# RETURNING: SQLite collects RETURNING rows in a temporary table per statement, measured
# here at a quarter of the claim's time. (claim() keeps the tutorial's one UPDATE ...
# RETURNING, CLAIM above.)
def _ready_rows(columns: str) -> str:
    return f"""
SELECT {columns} FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at <= :now
   AND NOT ({EXHAUSTED}){{scope}}
   AND {KEY_FREE}
 ORDER BY {{order}}
 LIMIT :limit
"""


# Each row also says whether a lease on a last attempt has run out (RETIRE_EXHAUSTED has
# work to do): SQLite answers that subquery once per statement, through jobs_exhausted,
# so the claim runs the retiring UPDATE only when it will retire something.
_EXHAUSTED_DUE = f"EXISTS (SELECT 1 FROM jobs WHERE {EXHAUSTED} AND visible_at <= :now)"
_READY_ROWS = _ready_rows(
    f"id, kind, payload, attempts + 1, max_attempts, {_EXHAUSTED_DUE}, concurrency_key, concurrency_limit"
)
# The same rows with their text as raw bytes: only when a row's text could not be decoded
# as UTF-8, so that the row alone can be set aside.
_READY_ROWS_RAW = _ready_rows(
    "id, CAST(kind AS BLOB), typeof(kind), CAST(payload AS BLOB), typeof(payload), attempts + 1,"
    f" max_attempts, {_EXHAUSTED_DUE}, concurrency_key, concurrency_limit"
)

_CLAIM_IDS = f"""
UPDATE jobs
   SET state = 'running', attempts = attempts + 1, visible_at = ?, lease_token = ?, worker = ?,
       started_at = ?,
       attempt_log = {lease_lost()}
 WHERE id IN ({{ids}}) AND state IN ('queued', 'running')
"""


@functools.lru_cache(maxsize=64)
def claim_ids(count: int) -> str:
    """CLAIM_IDS for `count` ids: parameters (lease_end, token, worker, now, id, id, ...)."""
    return _CLAIM_IDS.format(ids=", ".join("?" * count))


CLAIM_IDS = claim_ids(1)  # its shape, as the course's tables show it

# CLAIM_IDS and COMPLETE_MANY for ids that are a run of consecutive integers, which a queue
# drained in order hands out batch after batch: the run goes in as its first and last id.
# `id BETWEEN first AND last` names exactly the rows the IN list would, so nothing changes
# but the work: SQLite builds a temporary index of an IN list's values and then seeks
# each one, where a range is one seek and a walk along the table.
CLAIM_ID_RUN = f"""
UPDATE jobs
   SET state = 'running', attempts = attempts + 1, visible_at = ?, lease_token = ?, worker = ?,
       started_at = ?,
       attempt_log = {lease_lost()}
 WHERE id BETWEEN ? AND ? AND state IN ('queued', 'running')
"""

# An idle worker's look before it claims: a read through the ready index, no write lock,
# so writers (producers, other workers) carry on while it looks. It is true exactly
# when a claim would change a row: a ready job in its queues, or an expired lease to retire.
_READY_PROBE = f"""
SELECT 1
 WHERE EXISTS (SELECT 1 FROM jobs
                WHERE state IN ('queued', 'running') AND visible_at <= :now{{scope}}
                  AND {KEY_FREE})
    OR EXISTS (SELECT 1 FROM jobs WHERE {EXHAUSTED} AND visible_at <= :now)
"""


def _scoped(template: str) -> dict[str, str]:
    return {
        name: template.format(scope=scope, order=CLAIM_ORDER, key_free=KEY_FREE)
        for name, scope in SCOPES.items()
    }


CLAIM_IN = _scoped(_CLAIM)
READY_ROWS_IN = _scoped(_READY_ROWS)
READY_ROWS_RAW_IN = _scoped(_READY_ROWS_RAW)
READY_PROBE_IN = _scoped(_READY_PROBE)
# Across all queues an expired lease is a running row already: the first arm finds it (a
# lease that ran out on a last attempt even when its key is at its limit: it is retired).
READY_PROBE_IN["all"] = f"""
SELECT 1 FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at <= :now
   AND ({KEY_FREE} OR attempts >= max_attempts)
 LIMIT 1
"""
# The statements as the tutorial's single queue runs them.
CLAIM = CLAIM_IN["all"]
READY_ROWS = READY_ROWS_IN["all"]
READY_PROBE = READY_PROBE_IN["all"]

# When the next job becomes ready (a delayed job, a retry's backoff, a lease's end): an
# idle worker that can be woken sleeps until then at most. Only live rows are read.
NEXT_DUE_IN = _scoped("""
SELECT MIN(visible_at) FROM jobs
 WHERE state IN ('queued', 'running'){scope}
""")

# The running jobs with a live lease of each concurrency key in :keys (a JSON array), and
# the strictest limit among them, from jobs_key_held: what a claim counts against each
# key's limit (core.within_limits). Rows leased under :token (the claim asking) are left out.
HELD = """
SELECT concurrency_key, COUNT(*), MIN(concurrency_limit) FROM jobs
 WHERE concurrency_key IN (SELECT value FROM json_each(:keys))
   AND state = 'running' AND visible_at > :now AND lease_token IS NOT :token
 GROUP BY concurrency_key
"""

# The ready jobs held back by a full key, per key (Queue.waiting_on_keys): through
# jobs_ready's live rows, as STATS_READY.
WAITING_ON_KEYS = f"""
SELECT concurrency_key, COUNT(*) FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at <= :now
   AND concurrency_key IS NOT NULL AND NOT {KEY_FREE}
 GROUP BY concurrency_key
 ORDER BY COUNT(*) DESC, concurrency_key
"""

# A claimed job the worker never started (a warm stop in the middle of a batch): back to
# queued and ready now, its attempt given back, as if it had never been claimed. Fenced.
RELEASE = f"""
UPDATE jobs
   SET state = 'queued', attempts = attempts - 1, visible_at = :now,
       lease_token = NULL, worker = NULL, attempt_log = {logged(":now", "'given back'")}
 WHERE id = :id AND lease_token = :token AND state = 'running'
"""

# The rows one claim leased (its token is new), read as raw bytes: when a claimed row's
# text could not be decoded as UTF-8, so that the row alone can be set aside. The claimed
# rows are live, so jobs_ready holds them all and the finished rows are never read.
CLAIMED_RAW = """
SELECT id, CAST(kind AS BLOB), typeof(kind), CAST(payload AS BLOB), typeof(payload),
       attempts, max_attempts, lease_token, visible_at, concurrency_key, concurrency_limit
  FROM jobs INDEXED BY jobs_ready
 WHERE state IN ('queued', 'running') AND visible_at = :lease_end
   AND state = 'running' AND lease_token = :token
 ORDER BY id
"""

# The rows leased under one claim's token, still running: what a claim whose reply was
# lost had taken (roles.settling: settle, again=True). Through jobs_ready's live rows; the
# rare path only.
_BY_TOKEN = """
  FROM jobs INDEXED BY jobs_ready
 WHERE state IN ('queued', 'running') AND state = 'running' AND lease_token = :token
 ORDER BY +id
"""
CLAIMED_BY_TOKEN = (
    "SELECT id, kind, payload, attempts, max_attempts, lease_token, visible_at,"
    " concurrency_key, concurrency_limit" + _BY_TOKEN
)
CLAIMED_BY_TOKEN_RAW = (  # as CLAIMED_RAW: for a row whose text is not UTF-8
    "SELECT id, CAST(kind AS BLOB), typeof(kind), CAST(payload AS BLOB), typeof(payload),"
    " attempts, max_attempts, lease_token, visible_at, concurrency_key, concurrency_limit" + _BY_TOKEN
)

# A claimed job whose row cannot be read (its payload is not JSON text, say): no retry
# can change that, so it goes straight to the dead letters, fenced like fail().
BURY = f"""
UPDATE jobs
   SET state = 'dead', lease_token = NULL, finished_at = :now,
       last_error = substr(:reason, 1, {MAX_ERROR_CHARS})
 WHERE id = :id AND lease_token = :token AND state = 'running'
"""

COMPLETE = f"""
UPDATE jobs
   SET state = 'done', finished_at = ?1, lease_token = NULL
 WHERE id = ?2 AND lease_token = ?3 AND state = 'running' AND {LEASE_LIVE}
"""
# A completion with a return value (schema version 6): the value stored with the done
# state, under the same fence; ?4 is the value as JSON text.
COMPLETE_RESULT = COMPLETE.replace("lease_token = NULL\n", "lease_token = NULL, result = ?4\n", 1)

# Group commit's plain completions: every job of one claim (one token) in one statement,
# each still fenced by the token; the ids come back for the ones that were still ours.
# The ids go in as one parameter each, an IN list of complete_many(count)'s placeholders
# (measured here: a third less time per job than handing SQLite a JSON array to json_each).
_COMPLETE_MANY = f"""
UPDATE jobs
   SET state = 'done', finished_at = ?, lease_token = NULL
 WHERE id IN ({{ids}}) AND lease_token = ? AND state = 'running' AND {LEASE_LIVE}
RETURNING id
"""
# The most ids one COMPLETE_MANY or CLAIM_IDS takes (SQLite allows 32,766 parameters
# since 3.32, 999 before).
IDS_PER_STATEMENT = 500


@functools.lru_cache(maxsize=64)
def complete_many(count: int) -> str:
    """COMPLETE_MANY for `count` ids: parameters (now, id, id, ..., token)."""
    return _COMPLETE_MANY.format(ids=", ".join("?" * count))


COMPLETE_MANY = complete_many(1)  # its shape, as the course's tables and plans show it

COMPLETE_ID_RUN = f"""
UPDATE jobs
   SET state = 'done', finished_at = ?, lease_token = NULL
 WHERE id BETWEEN ? AND ? AND lease_token = ? AND state = 'running' AND {LEASE_LIVE}
RETURNING id
"""


def id_run(ids: list[int]) -> tuple[int, int] | None:
    """(first, last) when `ids` are the consecutive integers first, first + 1, ..., last
    (two or more): then CLAIM_ID_RUN and COMPLETE_ID_RUN name exactly them. Else None."""
    if len(ids) < 2 or type(ids[0]) is not int:
        return None
    first = ids[0]
    last = first + len(ids) - 1
    return (first, last) if ids[-1] == last and ids == list(range(first, last + 1)) else None


# Out of attempts (or told not to retry): dead, keeping the error for a person.
# Otherwise back to queued, visible again at the backoff time.
FAIL = f"""
UPDATE jobs
   SET state       = CASE WHEN :final OR attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
       visible_at  = CASE WHEN :final OR attempts >= max_attempts THEN visible_at ELSE :retry_at END,
       finished_at = CASE WHEN :final OR attempts >= max_attempts THEN :now END,
       lease_token = NULL,
       last_error  = substr(:error, 1, {MAX_ERROR_CHARS}),
       attempt_log = {logged(":now", ":outcome", ":error_class", ":message", ":traceback")}
 WHERE id = :id AND lease_token = :token AND state = 'running' AND {LEASE_LIVE_NAMED}
RETURNING state
"""

# Parameters: the new deadline, the id, the token, the time now.
HEARTBEAT = """
UPDATE jobs SET visible_at = ?
 WHERE id = ? AND lease_token = ? AND state = 'running' AND (concurrency_key IS NULL OR visible_at > ?)
"""

REQUEUE_DEAD = """
UPDATE jobs
   SET state = 'queued', attempts = 0, visible_at = ?, finished_at = NULL
 WHERE state = 'dead'
RETURNING id
"""

# The ids travel as one JSON array parameter, so any number of them fits.
REQUEUE_DEAD_IDS = """
UPDATE jobs
   SET state = 'queued', attempts = 0, visible_at = ?, finished_at = NULL
 WHERE state = 'dead' AND id IN (SELECT value FROM json_each(?))
RETURNING id
"""

STATS_LIVE = """
SELECT state, COUNT(*) AS n FROM jobs
 WHERE state IN ('queued', 'running')
 GROUP BY state
"""

STATS_READY = """
SELECT COUNT(*) AS n, MIN(visible_at) AS oldest FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at <= ?
"""

STATS_DEAD = "SELECT COUNT(*) AS n FROM jobs WHERE state = 'dead'"

# Per named queue, live rows only (through jobs_queue_ready): queued, running, ready now,
# the oldest ready job's visible_at.
STATS_BY_QUEUE = """
SELECT queue,
       SUM(state = 'queued') AS queued,
       SUM(state = 'running') AS running,
       SUM(visible_at <= ?) AS ready_now,
       MIN(CASE WHEN visible_at <= ? THEN visible_at END) AS oldest
  FROM jobs
 WHERE state IN ('queued', 'running')
 GROUP BY queue
 ORDER BY queue
"""

# Every statement stats() runs, for the test that none of them scans finished rows.
STATS_QUERIES = (STATS_LIVE, STATS_READY, STATS_DEAD, STATS_BY_QUEUE)

# Reading jobs back (operators, tests, the course). Filters that are NULL match every
# row; the states travel as one JSON array parameter; LIMIT -1 means no limit. :before
# bounds the ids (the driver gives the largest id when there is no bound), so a page of a
# listing starts below the last id of the page before it, through the primary key.
JOB = "SELECT * FROM jobs WHERE id = ?"

JOBS = """
SELECT * FROM jobs
 WHERE (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
   AND (:kind IS NULL OR kind = :kind)
   AND (:queue IS NULL OR queue = :queue)
   AND (:concurrency_key IS NULL OR concurrency_key = :concurrency_key)
   AND id < :before
 ORDER BY id
 LIMIT :limit
"""

# JOBS and LATEST_JOBS when every state asked for is live, or the state is dead: the literal
# term lets SQLite read a partial index (jobs_ready's live rows, jobs_dead's ids) instead of
# walking the whole table for a few rows (the dashboard's running jobs and dead letters).
LIVE_STATES, DEAD_STATE = "state IN ('queued', 'running')", "state = 'dead'"


def narrowed(statement: str, term: str) -> str:
    narrow = statement.replace(" WHERE ", f" WHERE {term} AND ", 1)
    # the live rows are few: read them all through jobs_ready and sort, never walk the ids
    if term == LIVE_STATES:  # unary +: the id is not an index's key here
        narrow = narrow.replace("AND id < :before", "AND +id < :before").replace(
            "ORDER BY id", "ORDER BY +id"
        )
    return narrow


COUNTS = "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state"


# -- cancelling -------------------------------------------------------------------
# A job no longer wanted. Queued: it never runs. Running: its lease token goes, so its
# worker's next heartbeat, completion or failure is refused (and the effect of a late
# completion never commits); the worker reads the state to learn why. Finished jobs
# (done, dead, cancelled) are left as they are: the caller reads the state first, in the
# same write transaction.
JOB_STATE = "SELECT state FROM jobs WHERE id = ?"

CANCEL = f"""
UPDATE jobs
   SET state = 'cancelled', finished_at = :now, lease_token = NULL,
       attempt_log = CASE WHEN state = 'running' THEN {logged(":now", "'cancelled'")} ELSE attempt_log END
 WHERE id = :id AND state IN ('queued', 'running')
"""

# -- retention ----------------------------------------------------------------------
# purge() walks the table by id in windows of :batch ids, one short write transaction
# per window, so a purge never holds the write lock for long whatever the table's size:
# each transaction reads at most :batch rows (the rowid is the table's own order).
# A finished job is removed when its state is among :states (a JSON array) and it
# finished at or before :before. Queued and running jobs have no finished_at.
PURGE_WHERE = """
 WHERE id > :after AND id <= :after + :batch
   AND state IN (SELECT value FROM json_each(:states))
   AND finished_at <= :before
"""

PURGE = "DELETE FROM jobs" + PURGE_WHERE

PURGE_ARCHIVE = (
    """
INSERT INTO jobs_archive (id, kind, payload, state, attempts, max_attempts, last_error,
                          dedupe_key, created_at, finished_at, priority, queue, archived_at,
                          worker, started_at, result, attempt_log)
SELECT id, kind, payload, state, attempts, max_attempts, last_error,
       dedupe_key, created_at, finished_at, priority, queue, :now,
       worker, started_at, result, attempt_log
  FROM jobs"""
    + PURGE_WHERE
    + "ON CONFLICT (id) DO NOTHING\n"
)

# Where a purge starts and ends: ids are handed out in increasing order, so the walk
# covers [first id, last id] and no more.
ID_RANGE = "SELECT (SELECT MIN(id) FROM jobs), (SELECT MAX(id) FROM jobs)"  # apart: each one lookup
# The first job at or after an id, and when it was created: the walk stops early once
# it reaches jobs created after the cut-off (they cannot have finished before it).
CREATED_FROM = "SELECT id, created_at FROM jobs WHERE id > ? ORDER BY id LIMIT 1"

# Space: freed pages go to the file's free list; with auto_vacuum = INCREMENTAL (every
# file labqueue creates) incremental_vacuum hands them back to the file system.
AUTO_VACUUM = "PRAGMA auto_vacuum"
FREELIST = "PRAGMA freelist_count"
PAGE_COUNT = "PRAGMA page_count"
PAGE_SIZE = "PRAGMA page_size"
TABLE_INFO = "SELECT * FROM pragma_table_info('jobs')"


# -- pausing named queues (labqueue pause / resume) ------------------------------------
PAUSE = """
INSERT INTO queue_pauses (queue, paused_at, reason) VALUES (:queue, :now, :reason)
ON CONFLICT (queue) DO NOTHING
RETURNING queue
"""
RESUME = "DELETE FROM queue_pauses WHERE queue = :queue RETURNING queue"
PAUSED = "SELECT queue, paused_at, reason FROM queue_pauses ORDER BY queue"


# -- operating a fleet (issue 23) ----------------------------------------------------
# A job whose kind this worker has no handler for: given back with its attempt returned,
# hidden for :delay seconds (so no worker spins on it), and a note of why in last_error.
# Fenced like RELEASE: only a row this claim still holds. Its attempt log is left alone: the
# handler never ran, and a job waiting for a worker that knows its kind is given back again
# and again.
PUT_BACK = f"""
UPDATE jobs
   SET state = 'queued', attempts = attempts - 1, visible_at = :now + :delay,
       lease_token = NULL, worker = NULL, last_error = substr(:note, 1, {MAX_ERROR_CHARS})
 WHERE id = :id AND lease_token = :token AND state = 'running'
"""

# A supervisor's note on the jobs a crashed worker held: only rows still running under
# that worker's name (a job another worker has taken over since is left alone); the job
# whose handler was running (:running, when the supervisor knows it) gets a note of its
# own. The lease is untouched: the job goes to another worker when it ends, as before.
_NOTE = f"substr(CASE WHEN id = :running THEN :running_message ELSE :message END, 1, {MAX_ERROR_CHARS})"
NOTE_CRASH = f"""
UPDATE jobs
   SET last_error = {_NOTE},
       attempt_log = CASE WHEN {NOTED} THEN attempt_log
                          ELSE {logged(":now", "'lease lost'", message=_NOTE)} END
 WHERE state IN ('queued', 'running') AND state = 'running' AND worker = :worker
RETURNING id
"""

# Jobs that finished in the last :window seconds, per queue and final state (metrics'
# throughput). There is no index on finished_at: this reads the table once.
FINISHED_WITHIN = """
SELECT queue, state, COUNT(*) AS n FROM jobs
 WHERE finished_at >= :now - :window
 GROUP BY queue, state
"""

# JOBS newest first (an operator's `labqueue jobs`: what just happened).
LATEST_JOBS = """
SELECT * FROM jobs
 WHERE (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
   AND (:kind IS NULL OR kind = :kind)
   AND (:queue IS NULL OR queue = :queue)
   AND (:concurrency_key IS NULL OR concurrency_key = :concurrency_key)
   AND id < :before
 ORDER BY id DESC
 LIMIT :limit
"""

# The listings, keyed by (newest first?, the states' index term or None).
LISTINGS = {
    (newest, term): statement if term is None else narrowed(statement, term)
    for newest, statement in ((False, JOBS), (True, LATEST_JOBS))
    for term in (None, LIVE_STATES, DEAD_STATE)
}

# The queued job created longest ago, and how long ago by the reader's clock (health's
# --max-waiting, metrics' labqueue_longest_waiting_seconds): whatever keeps it waiting. The
# live rows only, through jobs_ready: it reads each queued row's created_at, for a probe.
LONGEST_WAITING = """
SELECT id, :now - created_at AS waited FROM jobs
 WHERE state IN ('queued', 'running') AND state = 'queued'
 ORDER BY created_at, id
 LIMIT 1
"""

# The dashboard's overview (labqueue.dashboard): per named queue, queued jobs not due yet
# (through the live rows' index) and dead jobs (through jobs_dead), never the done rows.
SCHEDULED_BY_QUEUE = """
SELECT queue, COUNT(*) AS n FROM jobs
 WHERE state IN ('queued', 'running') AND state = 'queued' AND visible_at > :now
 GROUP BY queue
"""

DEAD_BY_QUEUE = "SELECT queue, COUNT(*) AS n FROM jobs WHERE state = 'dead' GROUP BY queue"

# Jobs finished in the last :window seconds per queue, final state and :step seconds ago
# (0: the step ending now): the dashboard's throughput chart. Like FINISHED_WITHIN, it
# reads the table once (no index on finished_at).
THROUGHPUT = """
SELECT queue, state, CAST((:now - finished_at) / :step AS INTEGER) AS ago, COUNT(*) AS n FROM jobs
 WHERE id > :after AND finished_at > :now - :window AND finished_at <= :now
 GROUP BY queue, state, ago
"""
