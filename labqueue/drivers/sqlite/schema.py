"""The SQLite file's schema: what a file must be before the queue touches it, what its
jobs table must look like at each schema version, and the migrations that bring a file to
sql.SCHEMA_VERSION (kept in `PRAGMA user_version`). The SQL text is sql.py's (its
`MIGRATIONS`); the connection and its transactions are the driver's (driver.py).

Everything that can refuse a file only reads, so a refused file is left as it was.
"""

from __future__ import annotations

import functools
import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from ...errors import (
    CannotOpen,
    ForeignDatabase,
    ForeignJobsTable,
    NotADatabase,
    QueueNotFound,
    SchemaTooNew,
    SchemaTooOld,
)
from . import sql

SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
SQLITE_NOTADB = 26  # SQLite's result code for "file is not a database"


def check_existing(db: sqlite3.Connection, path: Path, create: bool) -> tuple[tuple[str, str] | None, int]:
    """Refuse a file that is another application's database, a queue of a newer schema, or a
    `jobs` table that is not labqueue's; reads only. Returns what the file holds named `jobs`
    (its type and CREATE text, or None) and its PRAGMA user_version."""
    kind, text, version = db.execute(sql.JOBS_OBJECT_AND_VERSION).fetchone()
    found = None if kind is None else (kind, text)
    if found is None:
        if not create:
            raise QueueNotFound(
                f"{path} has no jobs table: create=False opens an existing queue only, "
                "so no table was added and the file was not changed"
            )
        if version != 0:
            raise ForeignDatabase(
                f"{path} has no jobs table and its PRAGMA user_version is {version}: it is "
                "another application's database that keeps its own schema version where labqueue "
                "keeps its, so labqueue will not add its tables to it; use a file of its own"
            )
    else:
        if version > sql.SCHEMA_VERSION:
            raise SchemaTooNew(
                f"{path} has labqueue schema version {version} (PRAGMA user_version); this "
                f"labqueue knows versions up to {sql.SCHEMA_VERSION}: upgrade labqueue to open it"
            )
        _check_jobs_table(db, path, found, _versioned(db, version))
    return found, version


def refuse_if_old(db: sqlite3.Connection, path: Path, stamped: int, found: tuple[str, str] | None) -> None:
    """Refuse to open an existing queue whose schema is older than this labqueue runs on
    (reads only): opening never migrates one; `labqueue migrate` does."""
    if found is None:
        return
    version = _versioned(db, stamped)
    if version < sql.SCHEMA_VERSION:
        raise SchemaTooOld(
            f"{path} has labqueue schema version {version}; this labqueue runs on version "
            f"{sql.SCHEMA_VERSION}: run `labqueue migrate {path}` to upgrade it (nothing was changed)"
        )


def file_version(db: sqlite3.Connection) -> int:
    """The schema version of the queue on `db` (0: no queue yet), read only."""
    kind, _, stamped = db.execute(sql.JOBS_OBJECT_AND_VERSION).fetchone()
    return 0 if kind is None else _versioned(db, stamped)


def migrate(db: sqlite3.Connection, path: Path) -> None:
    """Bring the file to SCHEMA_VERSION, one step of sql.MIGRATIONS at a time, inside the
    caller's write transaction. The version is read again under the write lock: another
    process may have created or upgraded the queue since check_existing() looked."""
    stamped = db.execute(sql.USER_VERSION).fetchone()[0]
    version = _versioned(db, stamped, unversioned=0)
    if version > sql.SCHEMA_VERSION:
        raise SchemaTooNew(
            f"{path} was upgraded to labqueue schema version {version} while opening; "
            f"this labqueue knows versions up to {sql.SCHEMA_VERSION}"
        )
    for step in sql.MIGRATIONS[version:]:
        run_migration(db, step)
    if stamped == 0 and version > 1:  # tables made by hand from sql.SCHEMA: add what is missing
        run_migration(db, sql.SCHEMA)
    if stamped < sql.SCHEMA_VERSION:
        # An integer constant of ours: PRAGMA takes no parameters.
        db.execute(f"PRAGMA user_version = {int(sql.SCHEMA_VERSION)}")


def run_migration(db: sqlite3.Connection, step: str) -> None:
    """One step of sql.MIGRATIONS inside the caller's transaction (or on a scratch
    connection, for the expected shape of a version)."""
    if step == "rebuild_jobs_v2":  # priority, queue and the 'cancelled' state
        _rebuild_jobs(db, sql.V1_COLUMNS, sql.STATES_IN_LIST)
        return
    if step == "rebuild_jobs_v4":  # the states CHECK written as comparisons
        _rebuild_jobs(db, ", ".join(sql.COLUMNS_V4), sql.STATES_COMPARED)
        return
    for statement in _statements(step):
        db.execute(statement)


def _rebuild_jobs(db: sqlite3.Connection, columns: str, states: str) -> None:
    """A new jobs table (sql.TABLE_TEMPLATE with the `states` CHECK) built beside the old
    one, every row copied, then swapped in: how SQLite changes a column or a CHECK. The
    old table's `columns` are copied by name. A column another program added to the table
    (allowed if it may be NULL or has a default) is carried over with its data, and so
    are the triggers and indexes it made on the table."""
    known = {name.strip() for name in columns.split(",")}
    extra = [row for row in db.execute(sql.TABLE_INFO) if row[1] not in known]
    extra_sql = "".join(
        f',\n    "{name}" {kind or ""}{" NOT NULL" if notnull else ""}'
        + ("" if default is None else f" DEFAULT {default}")
        for _, name, kind, notnull, default, _pk in extra
    )
    copied = columns + "".join(f', "{row[1]}"' for row in extra)
    others = [row[0] for row in db.execute(sql.OTHERS_ON_JOBS)]
    # Column names come from the file's own schema, quoted; no value is formatted in.
    db.execute(sql.TABLE_TEMPLATE.format(name=sql.REBUILT, extra=extra_sql, states=states))
    db.execute(f"INSERT INTO {sql.REBUILT} ({copied}) SELECT {copied} FROM jobs")
    # Renamed the old way, the new table takes the name and nothing else is rewritten: a
    # view or another table's trigger that names `jobs` names the new table. (Since 3.26
    # RENAME otherwise checks every view and trigger first, and one naming the table just
    # dropped stops it.)
    db.execute("PRAGMA legacy_alter_table = ON")
    try:
        for statement in _statements(sql.REBUILD_SWAP):
            db.execute(statement)
    finally:
        db.execute("PRAGMA legacy_alter_table = OFF")
    for statement in others:  # as the other program wrote them, from the file's own schema
        db.execute(statement)


def _versioned(db: sqlite3.Connection, version: int, *, unversioned: int = 1) -> int:
    """The schema version a file's jobs table has. A file without a version number
    (user_version 0) is a queue made before versions existed (version 1's shape), or one
    whose tables were made from sql.SCHEMA by hand (the course does): current, or version
    3's table if it was made from an sql.SCHEMA of before version 4 (the states CHECK an
    IN list), version 4's if made before version 5 (no concurrency columns), or version 5's
    if made before version 6 (no result columns)."""
    if version:
        return version
    columns = {row[1] for row in db.execute(sql.TABLE_INFO)}
    if "queue" not in columns:
        return unversioned if columns else 0
    _, create_sql = db.execute(sql.JOBS_OBJECT).fetchone()
    if f"({sql.STATES_IN_LIST})" in _checks(create_sql or ""):
        return sql.LAST_IN_LIST_VERSION
    if "concurrency_key" not in columns:
        return sql.LAST_KEYLESS_VERSION
    return sql.SCHEMA_VERSION if "attempt_log" in columns else sql.LAST_RESULTLESS_VERSION


def _statements(script: str) -> list[str]:
    """A script split into its statements (sqlite3 runs one per execute())."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return statements


# POSIX advisory locks belong to a process and a file, not to a descriptor: closing ANY
# descriptor of the database, its -wal or its -shm releases every lock this process holds on
# it, SQLite's own connections' locks included ("How To Corrupt An SQLite Database File",
# section 2.2, sqlite.org/howtocorrupt.html). A process that already holds the queue (a
# worker opening a KeepAlive, a reconnect, a second JobQueue in a notebook) would lose its
# locks, and with them committed pages of the write-ahead log. So nothing here opens those
# files from Python: what a file is, SQLite says when it reads it; whether this user may
# write it, os.access says without a descriptor. Do not bring back an open() and close().


def check_is_sqlite_file(path: Path) -> None:
    """Refuse a folder before connecting. Whether a file is an SQLite database SQLite
    decides at the first read, before anything is written (see not_a_database)."""
    if path.is_dir():
        raise NotADatabase(f"{path} is a directory, not an SQLite database file")


def not_a_database(path: Path, exc: sqlite3.DatabaseError) -> NotADatabase:
    """SQLite's refusal of a file, named. Told by its result code only (reading the header
    ourselves would cost the locks): "not a database" covers a foreign file and a damaged
    header alike; anything else is a damaged database."""
    code = getattr(exc, "sqlite_errorcode", None)  # Python 3.11+; the message before that
    if code == SQLITE_NOTADB or (code is None and str(exc) == "file is not a database"):
        return NotADatabase(f"{path} is not an SQLite database, or its header is damaged ({exc})")
    return NotADatabase(f"{path} is not a usable SQLite database ({exc})")


def _writable_if_present(path: Path) -> bool:
    """False only when `path` exists and this user may not read and write it. Asked of
    os.access, never by opening it (see above): the answer must not cost the locks."""
    # Other connections delete and create the -wal and -shm at any moment: os.access says False
    # for a file that was gone for an instant, so ask again while the answers disagree.
    return any(os.access(path, os.R_OK | os.W_OK) or not path.exists() for _ in range(3))


def check_writable(path: Path) -> None:
    """Say, before connecting, which file or folder this user cannot write: SQLite would
    open a read-only file without a word and fail at the first write."""
    folder = path.parent
    if not folder.is_dir():
        raise CannotOpen(f"cannot open or create {path}: its folder {folder} does not exist")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise CannotOpen(
            f"{path} is read-only for this user: the queue writes to its file "
            "(give this user write permission, or open a copy); nothing was changed"
        )
    sides = [path.with_name(path.name + suffix) for suffix in ("-wal", "-shm")]
    for side in sides:
        # Other connections create and delete the -wal at any moment; a missing one is fine.
        if not _writable_if_present(side):
            raise CannotOpen(
                f"{side} is read-only for this user: SQLite writes {path.name}'s write-ahead log "
                "there (give this user write permission on it); nothing was changed"
            )
    if not os.access(folder, os.W_OK | os.X_OK):
        if not path.exists():
            raise CannotOpen(f"cannot create {path}: its folder {folder} is read-only for this user")
        if not all(side.exists() for side in sides):
            raise CannotOpen(
                f"the folder {folder} is read-only for this user: in WAL mode SQLite must create "
                f"{sides[0].name} and {sides[1].name} beside {path.name}; nothing was changed"
            )


@dataclass(frozen=True)
class _Shape:
    columns: dict[str, tuple]
    unique: frozenset[tuple[str, int]]
    checks: tuple[str, ...]


def _shape(db: sqlite3.Connection, create_sql: str) -> _Shape:
    columns = {row[0]: tuple(row[1:]) for row in db.execute(sql.TABLE_SHAPE)}
    unique = frozenset((row[0], row[1]) for row in db.execute(sql.UNIQUE_KEYS))
    return _Shape(columns, unique, _checks(create_sql or ""))


@functools.cache
def _expected_shape(version: int) -> _Shape:
    """The jobs table of schema `version`, as its migrations build it (in memory)."""
    db = sqlite3.connect(":memory:", isolation_level=None)
    try:
        for step in sql.MIGRATIONS[:version]:
            run_migration(db, step)
        return _shape(db, db.execute(sql.JOBS_OBJECT).fetchone()[1])
    finally:
        db.close()


def _checks(create_sql: str) -> tuple[str, ...]:
    """The CHECK constraints of a CREATE TABLE statement, whitespace normalised."""
    text = " ".join(create_sql.split())
    lower = text.lower()
    found, i = [], 0
    while (i := lower.find("check", i)) != -1:
        start = i + len("check")
        inside_a_name = i > 0 and (lower[i - 1].isalnum() or lower[i - 1] == "_")
        if inside_a_name or not lower[start:].lstrip().startswith("("):
            i = start
            continue
        j = lower.index("(", start)
        depth, k = 0, j
        for k in range(j, len(text)):
            depth += {"(": 1, ")": -1}.get(text[k], 0)
            if depth == 0:
                break
        found.append(text[j : k + 1].replace("( ", "(").replace(" )", ")"))
        i = k
    return tuple(sorted(found))


def _column_text(spec: tuple) -> str:
    kind, notnull, default, pk = spec
    parts = [kind or "(no type)"] + ["NOT NULL"] * bool(notnull)
    parts += [f"DEFAULT {default}"] * (default is not None) + ["PRIMARY KEY"] * bool(pk)
    return " ".join(parts)


def _check_jobs_table(db: sqlite3.Connection, path: Path, found: tuple, version: int) -> None:
    """Refuse a jobs table that is not labqueue's (of this schema version): reads only."""
    kind, create_sql = found
    if kind != "table":
        raise ForeignJobsTable(f"{path} already has a {kind} named 'jobs', not labqueue's table")
    have, want = _shape(db, create_sql), _expected_shape(version)
    missing = [name for name in want.columns if name not in have.columns]
    if missing:
        raise ForeignJobsTable(
            f"{path} already has a 'jobs' table that is not labqueue's "
            f"(missing columns: {', '.join(missing)})"
        )
    problems = [
        f"column {name} is {_column_text(have.columns[name])}, labqueue's is {_column_text(spec)}"
        for name, spec in want.columns.items()
        if have.columns[name] != spec
    ]
    problems += [
        f"its extra column {name} is NOT NULL without a default, so labqueue could not add a job"
        for name, (_, notnull, default, pk) in have.columns.items()
        if name not in want.columns and notnull and default is None and not pk
    ]
    if have.unique != want.unique:
        shown = ", ".join(sorted(f"UNIQUE ({cols})" for cols, _ in have.unique)) or "none"
        problems.append(f"its unique keys are {shown}, labqueue's table has UNIQUE (dedupe_key) only")
    if have.checks != want.checks:
        problems.append(
            f"its CHECK constraints are {list(have.checks) or 'none'}, labqueue's are {list(want.checks)}"
        )
    if problems:
        raise ForeignJobsTable(
            f"{path} already has a 'jobs' table that is not labqueue's ({'; '.join(problems)}); "
            "it was not changed"
        )
