"""The history store: one SQLite file, where it lives, and the few queries gpumagic asks of it.

One file, the standard library's ``sqlite3``, WAL mode: two notebooks (or a notebook and a CI job)
write at once without losing a row, since each save is one short ``BEGIN IMMEDIATE`` transaction and
a writer that finds the file busy waits up to :data:`BUSY_TIMEOUT_MS` for it. The store knows
results, not how they were measured: rows come in as plain dicts (:mod:`.rows` makes them), so
nothing here imports torch or the timing code.

Every failure is a :class:`sqlite3.Error` or an :class:`OSError` (locked, read-only, full, not a
database); the callers that save on the user's behalf turn it into one line (:mod:`.saving`) and
never into a failed cell.
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .schema import CURRENT_VERSION, migrate

__all__ = [
    "BUSY_TIMEOUT_MS",
    "ENV",
    "MEMORY",
    "OFF",
    "PROFILE",
    "ForeignStoreError",
    "Store",
    "StoreMovedError",
    "StoreTooNewError",
    "UnusablePathError",
    "default_path",
    "is_kind",
    "of_kind",
    "resolve_path",
]

#: The environment variable that moves the store (or turns it off with one of :data:`OFF`).
ENV = "GPUMAGIC_HISTORY"
#: Values of the setting or of :data:`ENV` that turn the history off.
OFF = frozenset({"", "off", "none", "no", "false", "0"})
#: How long a writer waits for another's transaction before it gives up (and the result is shown,
#: unsaved).
BUSY_TIMEOUT_MS = 3000
#: The kind of a ``%%gpuprofile`` row: its summaries, no samples. A timing's ``--vs`` never finds
#: one, nor a profile's ``--vs`` a timing.
PROFILE = "profile"
#: The kind of a ``%%gpuprofile --memory`` row: the peak's breakdown, no samples. Neither a timing's
#: nor a profile's ``--vs`` finds one, nor a memory run's ``--vs`` anything else.
MEMORY = "memory"
_NOT_TIMINGS = (PROFILE, MEMORY)


def of_kind(profiles: bool | str) -> str:
    """The SQL that keeps profile rows (``profiles`` True), the rows of one kind (a kind's name:
    ``MEMORY``) or timing rows only (False)."""
    if isinstance(profiles, str):
        return f"kind = '{profiles}'"
    if profiles:
        return f"kind = '{PROFILE}'"
    return f"kind NOT IN ({', '.join(repr(k) for k in _NOT_TIMINGS)})"


def is_kind(kind: str | None, profiles: bool | str) -> bool:
    """Whether a row of ``kind`` is one :func:`of_kind` (``profiles``) keeps."""
    if isinstance(profiles, str):
        return kind == profiles
    return kind == PROFILE if profiles else kind not in _NOT_TIMINGS


class StoreTooNewError(sqlite3.DatabaseError):
    """The file was written by a newer gpumagic (a schema version this one does not know): it is
    left alone."""


class ForeignStoreError(sqlite3.DatabaseError):
    """The file is another application's SQLite database (tables of its own, no gpumagic schema):
    it is left alone, neither given gpumagic's tables nor switched to WAL, since adding tables to
    someone else's file (and changing its journal mode) was done silently before."""

    def __init__(self, path: Path, tables: list[str]) -> None:
        self.path, self.tables = path, tables
        shown = ", ".join(tables[:5]) + (", ..." if len(tables) > 5 else "")
        super().__init__(
            f"not a gpumagic history (it holds another application's tables: {shown}); "
            f"it is left untouched: choose another file"
        )


class StoreMovedError(sqlite3.DatabaseError):
    """The file this process was saving to was moved, deleted or replaced since it was opened. Said
    once, then a new store starts at the path: the rows saved before stay in the moved file (each
    save is checkpointed into it), and a file written at the old path meanwhile is not taken over
    unless it is a gpumagic history."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(
            "the history file was moved, deleted or replaced since it was opened; the results "
            "saved before are in the moved file, new ones go to this path"
        )


def default_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/gpumagic/history.sqlite``, ``~/.local/share/gpumagic/history.sqlite`` where
    it is unset or relative (a relative one made a history under whatever folder was current)."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or ""
    if not os.path.isabs(base):  # the XDG spec: a relative value is invalid and is ignored
        base = os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "gpumagic" / "history.sqlite"


def resolve_path(
    setting: str | os.PathLike[str] | None = None, env: Mapping[str, str] | None = None
) -> Path | None:
    """Where results go: the setting where one is given (``GpuMagics.history``), else :data:`ENV`,
    else :func:`default_path`. None: the history is off (an empty setting, or ``off``)."""
    env = os.environ if env is None else env
    chosen = os.fspath(setting) if setting is not None else env.get(ENV)
    if chosen is None:
        return default_path(env)
    if chosen.strip().lower() in OFF:
        return None
    return Path(os.path.expanduser(chosen.strip()))


def _hold(path: Path) -> int | None:
    """A descriptor of the file just opened, kept open: while it is, the file's inode cannot be
    reused by a new file, so the device and inode alone tell whether the path is still this file
    (its change time, used before, changes with every other process's checkpoint)."""
    try:
        return os.open(path, os.O_RDONLY)
    except OSError:
        return None


def _same_file(fd: int | None, path: Path) -> bool:
    if fd is None:
        return True  # nothing to compare with: keep the connection
    try:
        held, now = os.fstat(fd), os.stat(path)
    except OSError:
        return False
    return (held.st_dev, held.st_ino) == (now.st_dev, now.st_ino)


def _use_wal(conn: sqlite3.Connection) -> None:
    """Put the file in WAL mode, waiting for another process that is doing the same: SQLite answers
    a journal-mode change that meets a lock with "database is locked" at once, without its busy
    handler (two notebooks creating a new store together met it one time in three), so the wait is
    here, up to the busy timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    while conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        try:
            conn.execute("PRAGMA journal_mode = WAL")
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


class UnusablePathError(OSError):
    """A history path that cannot name a file here (a NUL byte, ``~user`` of no such user): an
    OSError like every other store failure, so that it costs a note and never a failed cell (it
    raised ``ValueError`` or ``RuntimeError`` through every cell)."""


def _check_usable(path: Path) -> None:
    text = str(path)
    if "\0" in text:
        raise UnusablePathError(f"the path holds a NUL byte: {text!r}")
    if text.startswith("~"):
        raise UnusablePathError(f"{text.split(os.sep)[0]} is no user's home on this machine")


def _check_header(path: Path) -> None:
    """Refuse a file that is not SQLite before SQLite opens it: with a ``-wal`` file left beside
    it, opening runs recovery and writes that WAL's pages into whatever file is now at the path (a
    text file written where a moved history was got SQLite pages appended)."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except FileNotFoundError:
        return
    if head and head != b"SQLite format 3\x00":
        raise sqlite3.DatabaseError("file is not a database")


def _drop_stale_wal(path: Path) -> None:
    """The ``-wal``/``-shm`` of a store that was moved or deleted while open: they belong to the
    moved file (complete: each save is checkpointed), and a new store at the path must not replay
    them."""
    if path.exists():
        return
    for suffix in ("-wal", "-shm"):
        try:
            os.remove(f"{path}{suffix}")
        except OSError:
            pass


def _checkpoint(conn: sqlite3.Connection) -> None:
    """Copy the WAL into the main file now: a plain copy (or move) of the file between cells then
    holds every result saved (they sat in the ``-wal`` file until the last connection closed).
    PASSIVE: never waits for, nor blocks, another process's reader."""
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()


def _foreign_tables(conn: sqlite3.Connection, version: int) -> list[str]:
    """The tables of a database gpumagic did not make: any table at version 0 (gpumagic's first
    migration creates its tables and sets the version in one transaction), or tables without
    ``results`` at a version set by someone else."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    if version == 0 or "results" not in names:
        return names
    return []


def _open_readonly(path: Path) -> sqlite3.Connection:
    """A read-only connection; in a folder this user cannot write (no ``-shm`` can be made there),
    the file is read as immutable, which the checkpoint at every save makes complete."""
    uri = path.resolve().as_uri()
    conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, isolation_level=None)
    try:
        conn.execute("PRAGMA user_version").fetchone()
        return conn
    except sqlite3.OperationalError:
        conn.close()
        if os.access(path.parent, os.W_OK):
            raise
    return sqlite3.connect(f"{uri}?mode=ro&immutable=1", uri=True, isolation_level=None)


class Store:
    """One history file. ``Store(path)`` opens (creating the file and its folder, and migrating an
    older schema, on the first write); ``readonly=True`` never writes, creates or migrates."""

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._fd: int | None = None
        #: What the store noticed on the way (a file moved since it was opened), for the caller to
        #: say: the save itself went on.
        self.notices: list[str] = []

    # --- connection
    # ---------------------------------------------------------------------------------------------
    def connect(self) -> sqlite3.Connection:
        """The open connection (one per process: a forked child opens its own; a file deleted or
        replaced since it was opened is opened again, or the rows would go to the deleted file)."""
        if self._conn is not None and self._pid == os.getpid():
            if _same_file(self._fd, self.path):
                return self._conn
            self.close()
            if not self.readonly:
                self.notices.append(str(StoreMovedError(self.path)))
                _drop_stale_wal(self.path)
        _check_usable(self.path)
        _check_header(self.path)
        if self.readonly:
            conn = _open_readonly(self.path)
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            found = conn.execute("PRAGMA user_version").fetchone()[
                0
            ]  # "file is not a database" shows here
            foreign = _foreign_tables(conn, found)
            if foreign:
                raise ForeignStoreError(self.path, foreign)
            if found > CURRENT_VERSION:
                raise StoreTooNewError(
                    f"schema version {found} is newer than this gpumagic's "
                    f"({CURRENT_VERSION}): upgrade gpumagic"
                )
            if not self.readonly:
                _use_wal(conn)
                conn.execute(
                    "PRAGMA synchronous = NORMAL"
                )  # WAL: a commit is durable against a crash of the app
                if migrate(conn) < CURRENT_VERSION:
                    _checkpoint(conn)
        except BaseException:
            conn.close()
            raise
        self._release()
        self._conn, self._pid, self._fd = conn, os.getpid(), _hold(self.path)
        return conn

    def _release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # a forked child closes its own copy only
            self._fd = None

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None
        self._release()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def exists(self) -> bool:
        return self.path.exists()

    def columns(self) -> list[str]:
        return [row[1] for row in self.connect().execute("PRAGMA table_info(results)")]

    # --- writing
    # ----------------------------------------------------------------------------------------------
    def save(self, rows: Iterable[Mapping[str, Any]]) -> list[int]:
        """Insert ``rows`` (column -> value) in one transaction; their ids, in order."""
        rows = list(rows)
        if not rows:
            return []
        conn = self.connect()
        ids = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            for row in rows:
                names = list(row)
                sql = (
                    f"INSERT INTO results ({', '.join(names)}) VALUES "
                    f"({', '.join('?' * len(names))})"
                )
                rowid = conn.execute(sql, [row[n] for n in names]).lastrowid
                assert rowid is not None  # an INSERT always sets it
                ids.append(rowid)
            conn.execute("COMMIT")
            _checkpoint(conn)
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return ids

    # --- reading
    # ----------------------------------------------------------------------------------------------
    def query(
        self,
        where: str = "",
        params: Iterable[Any] = (),
        *,
        order: str = "id",
        limit: int | None = None,
        columns: Iterable[str] | None = None,
    ) -> list[dict[str, Any]]:
        """Rows of ``results`` as dicts (``where`` is SQL over its columns, with ``?`` for
        ``params``; ``columns``: only these, where the store has them, e.g. all but the samples)."""
        if self.readonly and not self.exists():
            return []
        conn = self.connect()
        if conn.execute("PRAGMA user_version").fetchone()[0] == 0:  # an empty file opened read-only
            return []
        chosen = "*"
        if columns is not None:
            have = set(self.columns())
            chosen = ", ".join(c for c in columns if c in have) or "*"
        sql = (
            f"SELECT {chosen} FROM results"
            + (f" WHERE {where}" if where else "")
            + f" ORDER BY {order}"
        )
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        cur = conn.execute(sql, list(params))
        names = [d[0] for d in cur.description]
        return [dict(zip(names, values)) for values in cur.fetchall()]

    def get(self, result_id: int) -> dict[str, Any] | None:
        found = self.query("id = ?", [result_id])
        return found[0] if found else None

    def by_uid(self, uid: str) -> dict[str, Any] | None:
        found = self.query("uid = ?", [uid])
        return found[0] if found else None

    def last_of(
        self, stmt_key: str, device_key: str | None, *, before: int | None = None
    ) -> dict[str, Any] | None:
        """The latest timing of a statement on a device (``before``: with an id below it)."""
        where = f"stmt_key = ? AND device_key IS ? AND {of_kind(False)}"
        params: list[Any] = [stmt_key, device_key]
        if before is not None:
            where += " AND id < ?"
            params.append(before)
        found = self.query(where, params, order="id DESC", limit=1)
        return found[0] if found else None

    def last_labelled(self, label: str, *, profiles: bool | str = False) -> dict[str, Any] | None:
        """The latest timing (``profiles``: profile, or a kind's name) saved under ``label``."""
        found = self.query(f"label = ? AND {of_kind(profiles)}", [label], order="id DESC", limit=1)
        return found[0] if found else None

    def last_profile(self, device_key: str | None, kind: str = PROFILE) -> dict[str, Any] | None:
        """The latest profile (or row of ``kind``) saved on a device: what ``%%gpuprofile --vs
        last`` compares with."""
        found = self.query(
            f"device_key IS ? AND {of_kind(kind)}", [device_key], order="id DESC", limit=1
        )
        return found[0] if found else None

    def labels(self, limit: int = 20, *, profiles: bool | str = False) -> list[str]:
        """The labels of timings (``profiles``: of profiles, or of a kind) in use, most recent
        first."""
        if not self.exists():
            return []
        rows = self.connect().execute(
            f"SELECT label FROM results WHERE label IS NOT NULL AND {of_kind(profiles)} GROUP "
            f"BY label "
            "ORDER BY max(id) DESC LIMIT ?",
            [limit],
        )
        return [r[0] for r in rows]

    def count(self) -> int:
        if not self.exists():
            return 0
        return int(self.connect().execute("SELECT count(*) FROM results").fetchone()[0])
