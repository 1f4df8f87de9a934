"""The log file: opening it safely and bringing its schema up to date.

A file is a call log by its own mark, ``PRAGMA application_id`` = :data:`APPLICATION_ID`,
never by its ``user_version`` (any program may set one). A file without the mark counts as a
log only when it is an empty database (no tables, no version) or has the first schema's
``calls`` and ``turns`` tables (a log written before the mark existed); it gets the mark with
its next write. Anything else — another program's database — is refused before anything could
change it (WAL mode included), and so is a path that is no regular file (a FIFO, a device),
checked with ``os.stat``, which never blocks.

The schema is versioned with ``PRAGMA user_version``: :data:`MIGRATIONS` are applied in order,
each in the same transaction as the version bump, so a file is always at one whole version.
A file at a version newer than this library knows is refused (:class:`NewerSchema`), never
written. Files are created readable by their owner only (0600, every folder made on the way
0700): they hold prompts and answers in clear.

Connections use WAL (readers never wait for a writer, a ``kill -9`` never corrupts the file)
with ``synchronous=NORMAL`` (a commit survives a crash of the process; a power loss may lose
the last commits, never the file).
"""

from __future__ import annotations

import functools
import os
import sqlite3
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from .._files import _kind

__all__ = [
    "APPLICATION_ID",
    "MIGRATIONS",
    "NewerSchema",
    "NotACallLog",
    "check_regular",
    "create_file",
    "file_kind",
    "has_fts",
    "is_foreign",
    "migrate",
    "open_connection",
    "schema_version",
]

#: ``PRAGMA application_id`` of a call log: ``ollm`` in ASCII.
APPLICATION_ID = 0x6F6C6C6D


class NewerSchema(Exception):
    """The file was written by a newer version of the library."""


class NotACallLog(sqlite3.DatabaseError):
    """The file is no call log: another program's database, or no regular file."""


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
    """Create an empty file readable by its owner only, and each missing folder on the way
    to it readable by its owner only (0700: ``os.makedirs`` gives its mode to the last one
    alone).

    Raises:
        OSError: a folder or the file cannot be made.
    """
    missing: list[Path] = []
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=0o700)
        except FileExistsError:  # made meanwhile by another thread or process
            continue
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def check_regular(path: Path) -> bool:
    """Whether a file is at ``path`` (``False``: nothing there), checked without opening it:
    opening a FIFO would wait for a writer for ever.

    Raises:
        NotACallLog: something other than a regular file is there.
        OSError: the path cannot be looked at (a folder on the way that cannot be entered).
    """
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return False
    if not stat.S_ISREG(mode):
        raise NotACallLog(f"not a call log: it is {_kind(mode)}; give a regular file")
    return True


def open_connection(
    path: Path,
    busy_seconds: float,
    *,
    readonly: bool = False,
    shared: bool = False,
    writing: bool = True,
) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), busy timeout set, to a
    file that is a call log (or an empty database), never another program's.

    ``readonly`` opens the file for reading only (a read-only file or folder); ``shared``
    lets the connection be used by one thread after another (never by two at once);
    ``writing`` puts the file in WAL mode for writers (a reader leaves the file as it is).

    Raises:
        NotACallLog: another program's database, or no regular file.
        NewerSchema: a log of a newer version (refused before anything could change it).
        sqlite3.Error: the file cannot be opened or is not a database.
    """
    check_regular(path)
    if readonly:
        return _open_readonly(path, busy_seconds)
    db = sqlite3.connect(
        str(path), timeout=busy_seconds, isolation_level=None, check_same_thread=not shared
    )
    try:
        db.execute(f"PRAGMA busy_timeout = {max(0, int(busy_seconds * 1000))}")
        # checked before WAL mode would change someone else's file
        kind, version = file_kind(db)
        if kind == "foreign":
            raise NotACallLog("not a call log: a database of something else")
        if version > len(MIGRATIONS):
            raise NewerSchema(_newer(version))
        if not writing:
            return db
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


FileKind = Literal["log", "unmarked", "empty", "foreign"]


def file_kind(db: sqlite3.Connection) -> tuple[FileKind, int]:
    """What the file is, and its ``user_version``: a marked ``log``, an ``unmarked`` log
    (the first schema's ``calls`` and ``turns``, no mark yet), an ``empty`` database (no
    tables, no version) or a ``foreign`` one. Read in one statement, so from one snapshot
    while another process may be creating the log.

    Raises:
        sqlite3.DatabaseError: the file is not a database.
    """
    row = db.execute(
        "SELECT (SELECT application_id FROM pragma_application_id), "
        "(SELECT user_version FROM pragma_user_version), "
        "(SELECT count(*) FROM sqlite_master), "
        "(SELECT group_concat(name, char(10)) FROM pragma_table_info('calls')), "
        "(SELECT group_concat(name, char(10)) FROM pragma_table_info('turns'))"
    ).fetchone()
    mark, version, tables, calls, turns = row if row is not None else (0, 0, 0, None, None)
    version = int(version or 0)
    if mark == APPLICATION_ID:
        return "log", version
    if mark:
        return "foreign", version
    if not tables and not version:
        return "empty", version
    first_calls, first_turns = _first_columns()
    if (
        version >= 1
        and first_calls <= set(str(calls or "").split("\n"))
        and first_turns <= set(str(turns or "").split("\n"))
    ):
        return "unmarked", version
    return "foreign", version


@functools.cache
def _first_columns() -> tuple[frozenset[str], frozenset[str]]:
    """The columns of ``calls`` and ``turns`` in the first schema (as its migration makes
    them)."""
    db = sqlite3.connect(":memory:")
    try:
        MIGRATIONS[0](db)
        return tuple(  # type: ignore[return-value]
            frozenset(r[1] for r in db.execute(f"PRAGMA table_info({table})"))
            for table in ("calls", "turns")
        )
    finally:
        db.close()


def is_foreign(db: sqlite3.Connection) -> bool:
    """Whether the file is a database of something else (see :func:`file_kind`).

    Raises:
        sqlite3.DatabaseError: the file is not a database.
    """
    return file_kind(db)[0] == "foreign"


def _newer(version: int) -> str:
    return f"schema version {version} (this library knows {len(MIGRATIONS)})"


def schema_version(db: sqlite3.Connection) -> int:
    """The file's ``PRAGMA user_version`` (raises ``sqlite3.DatabaseError`` for no database)."""
    row = db.execute("PRAGMA user_version").fetchone()
    return int(row[0]) if row else 0


def migrate(db: sqlite3.Connection) -> None:
    """Apply the migrations the file lacks, in order, each with its version bump, and mark
    the file as a call log where it is not marked yet.

    Raises:
        NotACallLog: another program's database.
        NewerSchema: the file is at a version newer than :data:`MIGRATIONS` knows.
        sqlite3.Error: the file cannot be read or written.
    """
    if file_kind(db) == ("log", len(MIGRATIONS)):
        return
    db.execute("BEGIN IMMEDIATE")  # one process upgrades; the others wait, then see it done
    try:
        kind, version = file_kind(db)
        if kind == "foreign":
            raise NotACallLog("not a call log: a database of something else")
        if version > len(MIGRATIONS):
            raise NewerSchema(_newer(version))
        for number in range(version, len(MIGRATIONS)):
            MIGRATIONS[number](db)
            db.execute(f"PRAGMA user_version = {number + 1}")
        if kind != "log":
            db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
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
        raise NewerSchema(_newer(version))
    return version


def has_fts(db: sqlite3.Connection) -> bool:
    """Whether ``calls_fts`` is an FTS5 index (FTS5 was there when the file was created);
    else it is a plain table of the same columns, searched with ``LIKE``."""
    row = db.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'calls_fts'"
    ).fetchone()
    return row is not None and "fts5" in str(row[0]).lower()
