"""Every SQL statement the queue runs, in SQLite's dialect.

Keeping them in one module lets another backend (PostgreSQL with FOR UPDATE SKIP
LOCKED is planned) supply its own set and pass the same behavioural tests.
Values always travel as ``?`` parameters; nothing here is formatted at run time (a
few statements are assembled from the constants below once, at import).
"""

# The longest error text a row keeps, in characters: every statement that writes
# last_error cuts it to this length in SQL, whatever it prepends.
MAX_ERROR_CHARS = 500

# A running job whose attempts are used up: when its lease ends it is retired as dead,
# not claimed again. Written once and spliced into the partial index jobs_exhausted and
# into the statements that use it: SQLite only uses a partial index when the query
# contains the index's WHERE terms, so the two must never drift apart.
EXHAUSTED = "state = 'running' AND attempts >= max_attempts"

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
INDEXES = f"""
CREATE INDEX IF NOT EXISTS jobs_ready ON jobs (visible_at, id)
    WHERE state IN ('queued', 'running');
CREATE INDEX IF NOT EXISTS jobs_exhausted ON jobs (visible_at)
    WHERE {EXHAUSTED};
CREATE INDEX IF NOT EXISTS jobs_dead ON jobs (id) WHERE state = 'dead';
"""

SCHEMA = TABLE + INDEXES

# The queue's own transaction statements. Their texts are labqueue's alone, so that an
# effect's own "COMMIT" is never served from sqlite3's statement cache as one of these
# (see queue._EffectGuard).
BEGIN = "BEGIN IMMEDIATE /* labqueue */"
COMMIT = "COMMIT /* labqueue */"
ROLLBACK = "ROLLBACK /* labqueue */"

# -- schema versions -----------------------------------------------------------------
# The version lives in the file header (PRAGMA user_version). MIGRATIONS[n] is the
# script that takes a file from version n to n + 1, run in one write transaction with
# the new version number. Version 0 is a file labqueue has not versioned: a new or
# foreign file (no jobs table yet), or a queue made before versions existed, whose
# table already has version 1's shape (CREATE ... IF NOT EXISTS leaves it as it is).
# The next change of the schema (a priority column, a 'cancelled' state) is one more
# entry here, and SCHEMA_VERSION follows len(MIGRATIONS).
MIGRATIONS: tuple[str, ...] = (SCHEMA,)
SCHEMA_VERSION = len(MIGRATIONS)

USER_VERSION = "PRAGMA user_version"

# What a jobs table looks like, for the check that a file's table is labqueue's.
JOBS_OBJECT = "SELECT type, sql FROM sqlite_master WHERE name = 'jobs' COLLATE NOCASE"
TABLE_SHAPE = """
SELECT name, upper(type), "notnull", dflt_value, pk FROM pragma_table_info('jobs') ORDER BY cid
"""
UNIQUE_KEYS = """
SELECT (SELECT group_concat(name, ',') FROM pragma_index_info(il.name)) AS cols, il.partial
  FROM pragma_index_list('jobs') AS il
 WHERE il."unique"
"""

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
       last_error = {RETIRED_ERROR}
 WHERE {EXHAUSTED} AND visible_at <= :now
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

# The worker loop's claim: RETIRE_EXHAUSTED and CLAIM folded into one statement, so
# the common case (nothing to retire) costs no extra statement. The OR's second arm is
# RETIRE_EXHAUSTED's WHERE word for word, so SQLite answers it from jobs_exhausted
# alone; the first arm leaves those rows to it. Every SET expression reads the row
# as it was before the update, so each CASE sees the same condition.
# Returned rows whose state is 'dead' were retired, the 'running' ones were claimed.
CLAIM_NEXT = f"""
UPDATE jobs
   SET state       = CASE WHEN {EXHAUSTED} THEN 'dead' ELSE 'running' END,
       attempts    = CASE WHEN {EXHAUSTED} THEN attempts ELSE attempts + 1 END,
       visible_at  = CASE WHEN {EXHAUSTED} THEN visible_at ELSE :lease_end END,
       lease_token = CASE WHEN {EXHAUSTED} THEN NULL ELSE :token END,
       worker      = CASE WHEN {EXHAUSTED} THEN worker ELSE :worker END,
       finished_at = CASE WHEN {EXHAUSTED} THEN :now ELSE finished_at END,
       last_error  = CASE WHEN {EXHAUSTED} THEN {RETIRED_ERROR} ELSE last_error END
 WHERE id IN (SELECT id FROM jobs
               WHERE state IN ('queued', 'running') AND visible_at <= :now
                 AND NOT ({EXHAUSTED})
               ORDER BY visible_at, id
               LIMIT :limit)
    OR ({EXHAUSTED} AND visible_at <= :now)
RETURNING id, kind, payload, attempts, max_attempts, lease_token, visible_at, state
"""

# Group commit's look at the next batch, inside the write transaction that will claim
# it: the attempts of the next ready jobs, in the claim's order. A job handed out before
# (attempts > 0: its worker may have died on it) is claimed alone; otherwise the batch
# is the leading run of jobs never handed out, claimed by CLAIM_NEXT with that LIMIT.
# With the write lock held, CLAIM_NEXT then takes exactly these rows.
READY_ATTEMPTS = f"""
SELECT attempts FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at <= :now
   AND NOT ({EXHAUSTED})
 ORDER BY visible_at, id
 LIMIT :limit
"""

# A claimed job the worker never started (a warm stop in the middle of a batch): back to
# queued and ready now, its attempt given back, as if it had never been claimed. Fenced.
RELEASE = """
UPDATE jobs
   SET state = 'queued', attempts = attempts - 1, visible_at = :now,
       lease_token = NULL, worker = NULL
 WHERE id = :id AND lease_token = :token AND state = 'running'
"""

# The claimed rows again, read as raw bytes: only when a claimed row's text could not
# be decoded as UTF-8, so that the row alone can be set aside. A claim sets visible_at
# to :lease_end, so jobs_ready finds the rows without reading finished ones.
CLAIMED_RAW = """
SELECT id, CAST(kind AS BLOB), typeof(kind), CAST(payload AS BLOB), typeof(payload),
       attempts, max_attempts, lease_token, visible_at
  FROM jobs
 WHERE state IN ('queued', 'running') AND visible_at = :lease_end
   AND state = 'running' AND lease_token = :token
 ORDER BY id
"""

# A claimed job whose row cannot be read (its payload is not JSON text, say): no retry
# can change that, so it goes straight to the dead letters, fenced like fail().
BURY = f"""
UPDATE jobs
   SET state = 'dead', lease_token = NULL, finished_at = :now,
       last_error = substr(:reason, 1, {MAX_ERROR_CHARS})
 WHERE id = :id AND lease_token = :token AND state = 'running'
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
FAIL = f"""
UPDATE jobs
   SET state       = CASE WHEN :final OR attempts >= max_attempts THEN 'dead' ELSE 'queued' END,
       visible_at  = CASE WHEN :final OR attempts >= max_attempts THEN visible_at ELSE :retry_at END,
       finished_at = CASE WHEN :final OR attempts >= max_attempts THEN :now END,
       lease_token = NULL,
       last_error  = substr(:error, 1, {MAX_ERROR_CHARS})
 WHERE id = :id AND lease_token = :token AND state = 'running'
RETURNING state
"""

HEARTBEAT = """
UPDATE jobs SET visible_at = ?
 WHERE id = ? AND lease_token = ? AND state = 'running'
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
