"""The batch output file: resumed, repaired, appended to one whole line at a time.

Invariants (what makes a batch exactly-once across crashes):

* Each record is written with a single ``write`` of the whole line, ``\\n`` included, on a
  file opened with ``O_APPEND``. A process killed at any moment (SIGKILL included) leaves the
  file as a sequence of whole lines, possibly followed by one partial line; the kernel keeps
  what was written even though the process is gone.
* On open, a torn tail (an unterminated line, or garbage after the last good line, such as the
  zero-filled blocks a power cut can leave) is cut off; an unterminated line that is a complete
  record is kept and given its ``\\n``. A bad line *before* good ones is never "repaired": that
  is not a crash of ours, and the run stops with a :class:`BatchFileError` instead.
* Durability: ``fdatasync`` at most once a second and when the file is closed. Syncing every
  line would cap a fast batch at the disk's sync rate (tens to hundreds of lines a second on
  ordinary disks); a process crash loses nothing either way, and after an operating-system
  crash or power cut at most the last second of lines is lost and simply run again.
* ``retry_failed`` rewrites the file without its failed lines through a temporary file in the
  same directory, ``fsync`` and ``os.replace``: the old or the new file, never a mix.
* One writer per file: an exclusive ``flock`` (where the platform has it) makes a second run
  on the same output fail at once instead of interleaving lines. A lock belongs to an inode,
  and the rewrite makes a new one, so there is no gap: the new file is locked before it takes
  the old one's name, the old one's lock is held until then, and a run that locked a file
  checks that the name still leads to it.
* Bounded memory: the file is read as a stream of lines of at most
  :data:`~._format.MAX_LINE` bytes, and only where each good line is and what it says is
  kept, never the lines themselves; every line written fits that limit (see
  :func:`~._format.output_line`).
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any, BinaryIO, NamedTuple

from ._format import (
    MAX_LINE,
    BatchFileError,
    is_failed,
    iter_lines,
    output_line,
    parse_output_line,
    raise_problems,
)

__all__ = ["Entry", "OutputFile", "Resume", "open_regular", "scan_output"]

logger = logging.getLogger(__name__)

#: Longest time between two ``fdatasync`` calls while lines are being written.
SYNC_INTERVAL_S = 1.0


class Entry(NamedTuple):
    """One good line of an output file."""

    custom_id: str
    failed: bool
    start: int
    """Offset of the line in the file."""
    length: int
    """Length of the line without its ``\\n``."""


@dataclass(slots=True)
class Resume:
    """What an existing output file already holds."""

    keep_bytes: int = 0
    """Length of the good prefix (whole lines) of the file."""
    add_newline: bool = False
    """The prefix ends with a complete record that lacks its ``\\n``."""
    entries: list[Entry] = field(default_factory=list)
    """Each good line, in file order (where it is and what it says, not its bytes)."""

    @property
    def failed_ids(self) -> set[str]:
        """``custom_id`` of every failed line."""
        return {e.custom_id for e in self.entries if e.failed}

    @property
    def ids(self) -> set[str]:
        """``custom_id`` of every line."""
        return {e.custom_id for e in self.entries}


def scan_output(source: bytes | BinaryIO, path: str, known_ids: set[str] | None = None) -> Resume:
    """Read an output file (its bytes, or an open binary file read from its start as a stream
    of lines of at most :data:`MAX_LINE` bytes): its good lines and where its torn tail starts.

    The torn tail is the unterminated last line (unless it is a whole record) and any filler
    after the last good line: blank or zero-filled lines, as an operating-system crash can
    leave. A terminated line that is neither a record nor filler (a line longer than
    :data:`MAX_LINE` included) is never cut: it means the file is not a batch output (or was
    edited), and truncating it could destroy someone's data.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` for a line that is not an output record, a
            ``custom_id`` twice, or one that is not in ``known_ids`` (another batch's output).
    """
    f = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    resume = Resume()
    offset = 0
    problems: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for lineno, (raw, length, terminated) in enumerate(iter_lines(f), start=1):
        start, offset = offset, offset + length + terminated
        if not terminated:  # the last line: kept only when it is a whole record
            record = parse_output_line(raw) if raw is not None else None
            if record is not None and resume.keep_bytes == start:
                _check_id(record["custom_id"], lineno, seen, known_ids, problems)
                resume.entries.append(Entry(record["custom_id"], is_failed(record), start, length))
                resume.keep_bytes = offset
                resume.add_newline = True
            break
        if raw is not None and not raw.strip(b"\x00 \t\r"):
            continue  # filler: skipped here, cut when nothing good follows
        record = parse_output_line(raw) if raw is not None else None
        if record is None:
            what = "not a batch output record"
            if raw is None:
                what = f"a line longer than {MAX_LINE} bytes, {what}"
            problems.append({"line": lineno, "message": what})
            continue
        _check_id(record["custom_id"], lineno, seen, known_ids, problems)
        resume.entries.append(Entry(record["custom_id"], is_failed(record), start, length))
        resume.keep_bytes = offset
    raise_problems(path, problems, "output")
    return resume


def _check_id(
    custom_id: str,
    lineno: int,
    seen: dict[str, int],
    known: set[str] | None,
    problems: list[dict[str, Any]],
) -> None:
    if custom_id in seen:
        problems.append(
            {
                "line": lineno,
                "message": f"custom_id {custom_id!r} twice (first on {seen[custom_id]})",
            }
        )
    elif known is not None and custom_id not in known:
        problems.append(
            {
                "line": lineno,
                "message": f"custom_id {custom_id!r} is not in the input (another batch's output?)",
            }
        )
    seen[custom_id] = lineno


class OutputFile:
    """An output file open for appending whole records (thread safe).

    Use :meth:`open`; close with :meth:`close` (or as a context manager).
    """

    def __init__(self, path: str, fd: int) -> None:
        self.path = path
        self._fd = fd
        self._lock = threading.Lock()
        self._last_sync = time.monotonic()
        self._dirty = False

    @classmethod
    def open(
        cls, path: str, *, known_ids: set[str] | None = None, retry_failed: bool = False
    ) -> tuple[OutputFile, Resume]:
        """Open (creating, repairing or rewriting) the output at ``path``.

        Returns:
            The open file and what it already held (after repair / rewrite).

        Raises:
            BatchFileError: ``CONFIG_INVALID`` for an output that is not ours to resume, one
                another run is writing right now, or a path that cannot be a batch output.
            OSError: when the file cannot be read or written (the caller reports it).
        """
        fd = _open_locked(path)
        try:
            resume = scan_output(_reader(fd), path, known_ids)
            if retry_failed and resume.failed_ids:
                fd, resume = _rewrite_without_failed(fd, path, resume)
            else:
                _repair(fd, path, resume)
        except BaseException:
            os.close(fd)
            raise
        return cls(path, fd), resume

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one record as one line (one ``write``), syncing at most once a second.

        Returns:
            The record written: ``record``, or its error line when no JSON line can carry it
            (see :func:`~._format.output_line`).
        """
        line, record = output_line(record)
        with self._lock:
            _write_all(self._fd, line)
            self._dirty = True
            now = time.monotonic()
            if now - self._last_sync >= SYNC_INTERVAL_S:
                _sync(self._fd)
                self._last_sync = now
                self._dirty = False
        return record

    def close(self) -> None:
        """Sync and close (idempotent)."""
        with self._lock:
            if self._fd < 0:
                return
            try:
                if self._dirty:
                    _sync(self._fd)
            finally:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> OutputFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_FLAGS = os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0)


def open_regular(path: str, flags: int, what: str, mode: int = 0o644) -> int:
    """``os.open(path, flags)``, refusing at once anything but a regular file.

    The file is opened without blocking (a FIFO would wait for a writer for ever) and checked
    on the opened descriptor (``fstat``), not by a look before opening: a device such as
    ``/dev/zero`` never ends, and a FIFO or a terminal can block any read.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` naming ``what`` and ``path``: a NUL in the path, no
            such file, a directory, a device or FIFO, no permission.
    """
    import stat

    try:
        fd = os.open(path, flags | getattr(os, "O_NONBLOCK", 0), mode)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        reason = getattr(exc, "strerror", None) or str(exc)
        verb = "read" if flags & (os.O_WRONLY | os.O_RDWR) == 0 else "open"
        raise BatchFileError(
            f"cannot {verb} {what} {path!r}: {reason}", details={"path": path}
        ) from exc
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise BatchFileError(
                f"{what} {path!r} is not a regular file (a directory, device or FIFO)",
                details={"path": path},
            )
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_locked(path: str) -> int:
    """``path`` opened for appending (created when missing) and locked by this run.

    The lock belongs to the file (the inode), not to the name: a run that opened the name just
    before another run replaced the file (``retry_failed``) would lock a file nobody reads any
    more. So, once locked, the name must still lead to the locked file; when it does not, the
    name is opened and locked again, and the lock of its new file decides.
    """
    while True:
        fd = open_regular(path, _FLAGS | os.O_CREAT, "batch output")
        try:
            _lock_exclusive(fd, path)
            if _same_inode(fd, path):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _same_inode(fd: int, path: str) -> bool:
    try:
        named = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (named.st_dev, named.st_ino)


def _lock_exclusive(fd: int, path: str) -> None:
    if sys.platform == "win32":  # pragma: no cover - no flock; one run per output is on you
        return
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise BatchFileError(
            f"{path} is being written by another batch run; wait for it or choose another output",
            details={"path": path},
        ) from None


def _reader(fd: int) -> BinaryIO:
    """A buffered reader over ``fd`` from its start (``fd`` stays open when it is dropped)."""
    os.lseek(fd, 0, os.SEEK_SET)
    return open(fd, "rb", closefd=False)


def _read_at(fd: int, start: int, length: int) -> bytes:
    os.lseek(fd, start, os.SEEK_SET)
    chunks = []
    while length > 0 and (chunk := os.read(fd, length)):
        chunks.append(chunk)
        length -= len(chunk)
    return b"".join(chunks)


def _set_append(fd: int) -> None:
    """Give ``fd`` (from ``mkstemp``) the ``O_APPEND`` every write of a record relies on."""
    if sys.platform == "win32":  # pragma: no cover - writes follow the offset, set at the end
        os.lseek(fd, 0, os.SEEK_END)
        return
    import fcntl

    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _repair(fd: int, path: str, resume: Resume) -> None:
    size = os.fstat(fd).st_size
    if resume.keep_bytes < size:
        logger.warning(
            "%s: dropped a half-written last line (%d bytes); its request runs again",
            path,
            size - resume.keep_bytes,
        )
        os.ftruncate(fd, resume.keep_bytes)
    if resume.add_newline:
        logger.info("%s: the last line had lost its newline; added", path)
        _write_all(fd, b"\n")
        resume.add_newline = False
    if resume.keep_bytes < size or not size:
        _sync(fd)
        _sync_dir(path)


def _rewrite_without_failed(fd: int, path: str, resume: Resume) -> tuple[int, Resume]:
    """Replace the file locked through ``fd`` by a copy without its failed lines.

    Returns the new file's descriptor, locked, and what it holds. The copy is locked before it
    takes the old file's place and the old file's lock is held until then, so at no moment can
    another run take the output (see :func:`_open_locked`).
    """
    kept = [e for e in resume.entries if not e.failed]
    directory = os.path.dirname(os.path.abspath(path))
    tmp_fd, tmp = tempfile.mkstemp(prefix=".batch-", suffix=".tmp", dir=directory)
    entries = []
    try:
        _lock_exclusive(tmp_fd, tmp)
        offset = 0
        with open(tmp_fd, "wb", closefd=False) as out:
            for entry in kept:
                out.write(_read_at(fd, entry.start, entry.length) + b"\n")
                entries.append(entry._replace(start=offset))
                offset += entry.length + 1
            out.flush()
            os.fsync(tmp_fd)
        with contextlib.suppress(OSError):
            os.chmod(tmp, os.fstat(fd).st_mode & 0o777)
        _set_append(tmp_fd)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        os.close(tmp_fd)
        raise
    os.close(fd)  # the old file, now nameless; a run waiting on it finds the name moved on
    _sync_dir(path)
    logger.info("%s: rewritten without %d failed line(s)", path, len(resume.entries) - len(kept))
    return tmp_fd, Resume(keep_bytes=offset, add_newline=False, entries=entries)


def _sync_dir(path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    with contextlib.suppress(OSError, AttributeError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
