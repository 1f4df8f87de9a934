"""The log file: opening it safely and bringing its schema up to date.

The schema is versioned with ``PRAGMA user_version``: :data:`MIGRATIONS` are applied in order,
each in the same transaction as the version bump, so a file is always at one whole version.
A file at a version newer than this library knows is refused (:class:`NewerSchema`), never
written. Files are created readable by their owner only (0600, a new folder 0700): they hold
prompts and answers in clear.

Connections use WAL (readers never wait for a writer, a ``kill -9`` never corrupts the file)
with ``synchronous=NORMAL`` (a commit survives a crash of the process; a power loss may lose
the last commits, never the file).
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "MIGRATIONS",
    "NewerSchema",
    "create_file",
    "has_fts",
    "is_foreign",
    "migrate",
    "open_connection",
    "schema_version",
]


class NewerSchema(Exception):
    """The file was written by a newer version of the library."""


_CALLS = """
CREATE TABLE calls (
    id TEXT PRIMARY KEY,
    started TEXT NOT NULL,
    started_ts REAL NOT NULL,
    day TEXT NOT NULL,
    seconds REAL NOT NULL,
    first_token_seconds REAL,
    source TEXT NOT NULL,
    script TEXT NOT NULL,
    provider TEXT NOT NULL,
    host TEXT,
    model TEXT,
    messages TEXT NOT NULL,
    options TEXT NOT NULL,
    text TEXT NOT NULL,
    thinking TEXT,
    tool_calls TEXT NOT NULL,
    tool_results TEXT NOT NULL,
    finish TEXT NOT NULL,
    error_code TEXT,
    error_message TEXT,
    usage TEXT,
    prompt_tokens INTEGER,
    completion_tokens INTEGER,
    cached INTEGER NOT NULL,
    session_id TEXT,
    custom_id TEXT
)"""

_TURNS = """
CREATE TABLE turns (
    call_id TEXT NOT NULL REFERENCES calls(id) ON DELETE CASCADE,
    number INTEGER NOT NULL,
    request TEXT NOT NULL,
    answer TEXT NOT NULL,
    cache_key TEXT,
    ok INTEGER NOT NULL,
    cached INTEGER NOT NULL,
    PRIMARY KEY (call_id, number)
)"""


def _version_1(db: sqlite3.Connection) -> None:
    db.execute(_CALLS)
    db.execute(_TURNS)
    db.execute("CREATE INDEX calls_started ON calls(started_ts)")
    db.execute("CREATE INDEX calls_model ON calls(model)")
    db.execute("CREATE INDEX turns_cache ON turns(cache_key) WHERE ok = 1")
    try:  # full-text search where the SQLite build has FTS5 (else LIKE)
        db.execute("CREATE VIRTUAL TABLE calls_fts USING fts5(prompt, answer, tokenize='trigram')")
    except sqlite3.OperationalError:
        try:
            db.execute("CREATE VIRTUAL TABLE calls_fts USING fts5(prompt, answer)")
        except sqlite3.OperationalError:  # no FTS5: the same columns, searched with LIKE
            db.execute("CREATE TABLE calls_fts (prompt TEXT, answer TEXT)")


def _version_2(db: sqlite3.Connection) -> None:
    """Each call's cost (by the prices its client was given; ``NULL``: unknown)."""
    db.execute("ALTER TABLE calls ADD COLUMN cost REAL")


#: Migration ``n`` brings a file from version ``n`` to ``n + 1``; never edit a released one.
MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (_version_1, _version_2)


def create_file(path: Path) -> None:
    """Create an empty file readable by its owner only (a new folder: 0700)."""
    folder = path.parent
    if not folder.exists():
        os.makedirs(folder, mode=0o700, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def open_connection(
    path: Path, busy_seconds: float, *, readonly: bool = False, shared: bool = False
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), WAL, busy timeout set.

    ``readonly`` opens the file for reading only (a read-only file or folder); ``shared``
    lets the connection be used by one thread after another (never by two at once).

    Raises:
        sqlite3.Error: the file cannot be opened or is not a database.
    """
    if readonly:
        return _open_readonly(path, busy_seconds)
    db = sqlite3.connect(
        str(path), timeout=busy_seconds, isolation_level=None, check_same_thread=not shared
    )
    try:
        db.execute(f"PRAGMA busy_timeout = {max(0, int(busy_seconds * 1000))}")
        if is_foreign(db):  # checked before WAL mode would change someone else's file
            raise sqlite3.DatabaseError("not a call log: a database of something else")
        mode = db.execute("PRAGMA journal_mode = WAL").fetchone()
        if mode is None or str(mode[0]).lower() != "wal":
            raise sqlite3.OperationalError(f"cannot use WAL mode ({mode})")
        db.execute("PRAGMA synchronous = NORMAL")
        db.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        db.close()
        raise
    return db


def _open_readonly(path: Path, busy_seconds: float) -> sqlite3.Connection:
    """A read-only connection. A WAL file in a folder where its ``-shm`` index cannot be
    created (and none is there) is read as it is on disk (``immutable=1``): no process is
    writing it, or the index would be there."""
    uri = path.resolve().as_uri()
    try:
        return _probed(f"{uri}?mode=ro", busy_seconds)
    except sqlite3.OperationalError:
        if Path(f"{path}-shm").exists():
            raise
    return _probed(f"{uri}?mode=ro&immutable=1", busy_seconds)


def _probed(uri: str, busy_seconds: float) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True, timeout=busy_seconds, isolation_level=None)
    try:
        db.execute(f"PRAGMA busy_timeout = {max(0, int(busy_seconds * 1000))}")
        db.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except BaseException:
        db.close()
        raise
    return db


def is_foreign(db: sqlite3.Connection) -> bool:
    """Whether the file is a database of something else: no version, yet tables (read in
    one statement, so one snapshot, while another process may be creating the log).

    Raises:
        sqlite3.DatabaseError: the file is not a database.
    """
    row = db.execute(
        "SELECT (SELECT user_version FROM pragma_user_version), "
        "(SELECT count(*) FROM sqlite_master)"
    ).fetchone()
    return bool(row is not None and row[0] == 0 and row[1] > 0)


def schema_version(db: sqlite3.Connection) -> int:
    """The file's ``PRAGMA user_version`` (raises ``sqlite3.DatabaseError`` for no database)."""
    row = db.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations the file lacks, in order, each with its version bump.

    Raises:
        NewerSchema: the file is at a version newer than :data:`MIGRATIONS` knows.
        sqlite3.Error: the file cannot be read or written.
    """
    if schema_version(db) == len(MIGRATIONS):
        return
    db.execute("BEGIN IMMEDIATE")  # one process upgrades; the others wait, then see it done
    try:
        version = schema_version(db)
        if version > len(MIGRATIONS):
            raise NewerSchema(f"schema version {version} (this library knows {len(MIGRATIONS)})")
        for number in range(version, len(MIGRATIONS)):
            MIGRATIONS[number](db)
            db.execute(f"PRAGMA user_version = {number + 1}")
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def check_version(db: sqlite3.Connection) -> int:
    """The file's version, after checking this library can read it.

    Raises:
        NewerSchema: a newer file.
    """
    version = schema_version(db)
    if version > len(MIGRATIONS):
        raise NewerSchema(f"schema version {version} (this library knows {len(MIGRATIONS)})")
    return version


def has_fts(db: sqlite3.Connection) -> bool:
    """Whether ``calls_fts`` is an FTS5 index (FTS5 was there when the file was created);
    else it is a plain table of the same columns, searched with ``LIKE``."""
    row = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'calls_fts'"
    ).fetchone()
    return row is not None and "fts5" in str(row[0]).lower()
