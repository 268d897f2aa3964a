"""Every SQL statement the queue runs, in SQLite's dialect.

Keeping them in one module lets another backend (PostgreSQL with FOR UPDATE SKIP
LOCKED is planned) supply its own set and pass the same behavioural tests.
Values always travel as ``?`` parameters; the only text built at run time is the list
of placeholders for a batch of ids (claim_ids).
"""

import functools

TABLE = """
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

# Each partial index holds only the few rows one statement looks for, so a table
# full of finished jobs costs the claim nothing (notebook 08 measures this).
INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (visible_at, id)
    WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_exhausted ON jobs (visible_at)
    WHERE state = 'running' AND attempts >= max_attempts;
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (id) WHERE state = 'dead';
"""

SCHEMA = TABLE + INDEXES

COLUMNS = (
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
)

TABLE_COLUMNS = "SELECT name FROM pragma_table_info('jobs')"

ENQUEUE = """
INSERT INTO jobs (kind, payload, max_attempts, visible_at, dedupe_key, created_at)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (dedupe_key) DO NOTHING
RETURNING id
"""

ENQUEUE_MANY = """
INSERT INTO jobs (kind, payload, max_attempts, visible_at, created_at)
VALUES (?, ?, ?, ?, ?)
"""

LAST_ATTEMPT_EXPIRED = "lease expired on the last attempt"

# The WHERE clause repeats jobs_exhausted's own terms word for word: SQLite only
# uses a partial index when it can see that the query implies the index's WHERE.
RETIRE_EXHAUSTED = """
UPDATE jobs
   SET state = 'dead', lease_token = NULL, finished_at = :now,
       last_error = CASE WHEN last_error IS NULL THEN :reason
                         ELSE :reason || '; previous error: ' || last_error END
 WHERE state = 'running' AND attempts >= max_attempts AND visible_at <= :now
"""

CLAIM = """
UPDATE jobs
   SET state = 'running', attempts = attempts + 1,
       visible_at = :lease_end, lease_token = :token, worker = :worker
 WHERE id IN (SELECT id FROM jobs
               WHERE state IN ('queued', 'running') AND visible_at <= :now
               ORDER BY visible_at, id
               LIMIT :limit)
RETURNING id, kind, payload, attempts, max_attempts, lease_token, visible_at
"""

# An idle worker's look before it claims: a read through jobs_ready, no write lock,
# so writers (producers, other workers) carry on while it looks. It is true exactly
# when a claim would change a row: a ready job, or an expired lease to retire.
READY_PROBE = """
SELECT 1 FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at <= ?
 LIMIT 1
"""

COMPLETE = """
UPDATE jobs
   SET state = 'done', finished_at = ?, lease_token = NULL
 WHERE id = ? AND lease_token = ? AND state = 'running'
"""

# Out of attempts (or told not to retry): dead, keeping the error for a person.
# Otherwise back to queued, visible again at the backoff time.
FAIL = """
UPDATE jobs
   SET state       = CASE WHEN :final OR attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
       visible_at  = CASE WHEN :final OR attempts >= max_attempts THEN visible_at ELSE :retry_at END,
       finished_at = CASE WHEN :final OR attempts >= max_attempts THEN :now END,
       lease_token = NULL,
       last_error  = :error
 WHERE id = :id AND lease_token = :token AND state = 'running'
RETURNING state
"""

HEARTBEAT = """
UPDATE jobs SET visible_at = ?
 WHERE id = ? AND lease_token = ? AND state = 'running'
"""

# -- group commit: the worker's batch path -----------------------------------------------
# Under SQLite's single writer the claim can be two plain statements inside the
# BEGIN IMMEDIATE transaction that already holds the write lock: read the next ready
# ids, then update exactly those rows. Nobody can change a row between the two, so this
# is as safe as one UPDATE ... WHERE id IN (subquery), and cheaper to run. (PostgreSQL,
# with many writers, keeps the one-statement form with FOR UPDATE SKIP LOCKED.)
# READY_IDS leaves out the leases that ran out on a last attempt: RETIRE_EXHAUSTED
# turns those dead first, in the same transaction.
READY_IDS = """
SELECT id, attempts FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at <= :now
 ORDER BY visible_at, id
 LIMIT :limit
"""

# One placeholder per id (the text for n ids is built once and cached): measured here
# (SQLite 3.40) as cheap as the tutorial's one-statement claim at one id, where a JSON
# array of ids through json_each cost about a fifth more CPU per claim.
_CLAIM_IDS = """
UPDATE jobs
   SET state = 'running', attempts = attempts + 1,
       visible_at = ?, lease_token = ?, worker = ?
 WHERE id IN ({ids})
RETURNING id, kind, payload, attempts, max_attempts, lease_token, visible_at
"""


@functools.lru_cache(maxsize=128)
def claim_ids(n: int) -> str:
    """CLAIM_IDS for n ids: parameters (lease_end, token, worker, id_1, ..., id_n)."""
    if n < 1:
        raise ValueError(f"claim_ids needs at least one id, got {n}")
    return _CLAIM_IDS.format(ids=", ".join("?" * n))


# A claimed job the worker never started (a warm stop in the middle of a batch): back to
# queued and ready now, its attempt given back, as if it had never been claimed. Fenced.
RELEASE = """
UPDATE jobs
   SET state = 'queued', attempts = attempts - 1, visible_at = :now,
       lease_token = NULL, worker = NULL
 WHERE id = :id AND lease_token = :token AND state = 'running'
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

# Every statement stats() runs, for the test that none of them scans finished rows.
STATS_QUERIES = (STATS_LIVE, STATS_READY, STATS_DEAD)

# Reading jobs back (operators, tests, the course). Filters that are NULL match every
# row; the states travel as one JSON array parameter; LIMIT -1 means no limit.
JOB = "SELECT * FROM jobs WHERE id = ?"

JOBS = """
SELECT * FROM jobs
 WHERE (:states IS NULL OR state IN (SELECT value FROM json_each(:states)))
   AND (:kind IS NULL OR kind = :kind)
 ORDER BY id
 LIMIT :limit
"""

COUNTS = "SELECT state, COUNT(*) AS n FROM jobs GROUP BY state"
