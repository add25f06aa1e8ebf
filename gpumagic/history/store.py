"""The history store: one SQLite file, where it lives, and the few queries gpumagic asks of it.

One file, the standard library's ``sqlite3``, WAL mode: two notebooks (or a notebook and a CI job)
write at once without losing a row, since each save is one short ``BEGIN IMMEDIATE`` transaction and
a writer that finds the file busy waits up to :data:`BUSY_TIMEOUT_MS` for it. The store knows
results, not how they were measured: rows come in as plain dicts (:mod:`.rows` makes them), so
nothing here imports torch or the timing code.

Every failure is a :class:`sqlite3.Error` or an :class:`OSError` (locked, read-only, full, not a
database); the callers that save on the user's behalf turn it into one line (:mod:`.recorder`) and
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
    "Store",
    "StoreTooNewError",
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


def default_path(env: Mapping[str, str] | None = None) -> Path:
    """``$XDG_DATA_HOME/gpumagic/history.sqlite``, ``~/.local/share/gpumagic/history.sqlite`` where
    it is unset."""
    env = os.environ if env is None else env
    base = env.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
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


def _inode(path: Path) -> tuple[int, int, int] | None:
    """The file's identity: a deleted file's inode may be reused at once by a new one, so its change
    time too."""
    try:
        found = os.stat(path)
    except OSError:
        return None
    return (found.st_dev, found.st_ino, found.st_ctime_ns)


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


class Store:
    """One history file. ``Store(path)`` opens (creating the file and its folder, and migrating an
    older schema, on the first write); ``readonly=True`` never writes, creates or migrates."""

    def __init__(self, path: str | os.PathLike[str], *, readonly: bool = False) -> None:
        self.path = Path(path)
        self.readonly = readonly
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        self._inode: tuple[int, int, int] | None = None

    # --- connection
    # ---------------------------------------------------------------------------------------------
    def connect(self) -> sqlite3.Connection:
        """The open connection (one per process: a forked child opens its own; a file deleted or
        replaced since it was opened is opened again, or the rows would go to the deleted file)."""
        if self._conn is not None and self._pid == os.getpid():
            if self._inode == _inode(self.path):
                return self._conn
            self._conn.close()
            self._conn = None
        if self.readonly:
            conn = sqlite3.connect(
                f"{self.path.resolve().as_uri()}?mode=ro", uri=True, isolation_level=None
            )
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            found = conn.execute("PRAGMA user_version").fetchone()[
                0
            ]  # "file is not a database" shows here
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
                migrate(conn)
        except BaseException:
            conn.close()
            raise
        self._conn, self._pid, self._inode = conn, os.getpid(), _inode(self.path)
        return conn

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

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
                ids.append(conn.execute(sql, [row[n] for n in names]).lastrowid)
            conn.execute("COMMIT")
            self._inode = _inode(
                self.path
            )  # a checkpoint may have written the file: our own change
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
        where, params = (
            f"stmt_key = ? AND device_key IS ? AND {of_kind(False)}",
            [stmt_key, device_key],
        )
        if before is not None:
            where, params = where + " AND id < ?", [*params, before]
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
