"""The history store's schema and the steps that bring any earlier version of it to the current one.

Why steps rather than one ``CREATE TABLE``: a store outlives the gpumagic that made it (one file per
user, kept for months), so a newer gpumagic must read an older file without losing a row. The
version is SQLite's own ``PRAGMA user_version``; step ``i`` takes a database from version ``i`` to
``i + 1``, and a new file runs every step from 0, so the path a fresh store takes is the path an old
one takes (and the tests run it from each version).
"""

from __future__ import annotations

import sqlite3

__all__ = [
    "CURRENT_VERSION",
    "MIGRATIONS",
    "V1_SCHEMA",
    "V2_STEP",
    "V3_STEP",
    "migrate",
    "version_of",
]

#: Version 1: one row per ``%gputime`` result, its samples, figures and where it was measured.
V1_SCHEMA = """
CREATE TABLE results (
    id INTEGER PRIMARY KEY,
    created REAL NOT NULL,
    label TEXT,
    statement TEXT NOT NULL,
    stmt_key TEXT NOT NULL,
    setup TEXT,
    samples BLOB NOT NULL,
    n_samples INTEGER NOT NULL,
    calls_per_sample INTEGER,
    median REAL,
    iqr REAL,
    mean REAL,
    min REAL,
    kernel_time REAL,
    host_per_call REAL,
    first_call REAL,
    flops REAL,
    bytes REAL,
    flop_rate REAL,
    byte_rate REAL,
    flop_share REAL,
    byte_share REAL,
    precision_class TEXT,
    device TEXT,
    device_uuid TEXT,
    device_key TEXT,
    backend TEXT,
    sm_clock_low INTEGER,
    sm_clock_high INTEGER,
    sm_clock_prevailing INTEGER,
    driver TEXT,
    torch TEXT,
    cuda TEXT,
    cudnn TEXT,
    git_commit TEXT,
    git_dirty INTEGER,
    cwd TEXT,
    host TEXT,
    python TEXT,
    gpumagic TEXT,
    extra TEXT
);
CREATE INDEX results_statement ON results (stmt_key, device_key, id);
CREATE INDEX results_label ON results (label, id);
"""

#: Version 2: ``--compare`` and ``--sweep`` rows (the run they belong to, the statement's label in
#: it, a sweep point's values), the SM clock beside each sample, and an id that stays the same in an
#: exported baseline.
V2_STEP = """
ALTER TABLE results ADD COLUMN uid TEXT NOT NULL DEFAULT '';
UPDATE results SET uid = lower(hex(randomblob(8))) WHERE uid = '';
CREATE UNIQUE INDEX results_uid ON results (uid);
ALTER TABLE results ADD COLUMN kind TEXT NOT NULL DEFAULT 'gputime';
ALTER TABLE results ADD COLUMN run TEXT;
ALTER TABLE results ADD COLUMN variant TEXT;
ALTER TABLE results ADD COLUMN params TEXT;
ALTER TABLE results ADD COLUMN sample_clocks BLOB;
"""

#: Version 3: ``%%gpuprofile`` rows (``kind = 'profile'``): a profile's summaries (zlib-compressed
#: JSON of ``ProfileSummary.to_dict()``, not its trace), the path of a trace kept elsewhere, and the
#: figures a listing shows (GPU busy and wall time in seconds, kernel launches). A profile row keeps
#: no samples (an empty BLOB, ``n_samples`` 0), so the timings' lookups leave it out by its kind.
V3_STEP = """
ALTER TABLE results ADD COLUMN summary BLOB;
ALTER TABLE results ADD COLUMN trace_path TEXT;
ALTER TABLE results ADD COLUMN gpu_busy REAL;
ALTER TABLE results ADD COLUMN wall REAL;
ALTER TABLE results ADD COLUMN kernels INTEGER;
CREATE INDEX results_kind ON results (kind, device_key, id);
"""

#: ``MIGRATIONS[i]`` takes a store from version ``i`` to ``i + 1``.
MIGRATIONS: tuple[str, ...] = (V1_SCHEMA, V2_STEP, V3_STEP)
CURRENT_VERSION = len(MIGRATIONS)


def version_of(conn: sqlite3.Connection) -> int:
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def _run_script(conn: sqlite3.Connection, script: str) -> None:
    # executescript() would COMMIT the open transaction first: run the statements one by one inside
    # it instead.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


def migrate(conn: sqlite3.Connection, target: int = CURRENT_VERSION) -> int:
    """Bring the store to ``target`` in one transaction (a reader sees the old schema or the new,
    never half); returns the version found. Two processes opening a new store at once: the second
    finds it done.

    A store newer than this gpumagic is left alone: the caller says so rather than writing rows it
    cannot shape.
    """
    found = version_of(conn)
    if found >= target:
        return found
    conn.execute("BEGIN IMMEDIATE")
    try:
        found = version_of(
            conn
        )  # again, under the write lock: another process may have migrated meanwhile
        for step in range(found, target):
            _run_script(conn, MIGRATIONS[step])
        if found < target:
            conn.execute(f"PRAGMA user_version = {int(target)}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return found
