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
  on the same output fail at once instead of interleaving lines.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from ._format import BatchFileError, encode_line, is_failed, parse_output_line, raise_problems

__all__ = ["OutputFile", "Resume", "scan_output"]

logger = logging.getLogger(__name__)

#: Longest time between two ``fdatasync`` calls while lines are being written.
SYNC_INTERVAL_S = 1.0


@dataclass(slots=True)
class Resume:
    """What an existing output file already holds."""

    keep_bytes: int = 0
    """Length of the good prefix (whole lines) of the file."""
    add_newline: bool = False
    """The prefix ends with a complete record that lacks its ``\\n``."""
    records: list[tuple[bytes, dict[str, Any]]] = field(default_factory=list)
    """Each good line (its bytes without ``\\n``) and its decoded record, in file order."""

    @property
    def failed_ids(self) -> set[str]:
        """``custom_id`` of every failed line."""
        return {r["custom_id"] for _, r in self.records if is_failed(r)}

    @property
    def ids(self) -> set[str]:
        """``custom_id`` of every line."""
        return {r["custom_id"] for _, r in self.records}


def scan_output(data: bytes, path: str, known_ids: set[str] | None = None) -> Resume:
    """Read an output file's content: its good lines and where its torn tail starts.

    The torn tail is the unterminated last line (unless it is a whole record) and any filler
    after the last good line: blank or zero-filled lines, as an operating-system crash can
    leave. A terminated line that is neither a record nor filler is never cut: it means the
    file is not a batch output (or was edited), and truncating it could destroy someone's data.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` for a line that is not an output record, a
            ``custom_id`` twice, or one that is not in ``known_ids`` (another batch's output).
    """
    resume = Resume()
    pieces = data.split(b"\n")
    tail = pieces.pop()  # b"" when the file ends with a newline
    offset = 0
    problems: list[dict[str, Any]] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(pieces, start=1):
        offset += len(raw) + 1
        if not raw.strip(b"\x00 \t\r"):
            continue  # filler: skipped here, cut when nothing good follows
        record = parse_output_line(raw)
        if record is None:
            problems.append({"line": lineno, "message": "not a batch output record"})
            continue
        _check_id(record["custom_id"], lineno, seen, known_ids, problems)
        resume.records.append((raw, record))
        resume.keep_bytes = offset
    if tail and resume.keep_bytes == len(data) - len(tail):
        record = parse_output_line(tail)
        if record is not None:  # complete, only its newline was lost
            _check_id(record["custom_id"], len(pieces) + 1, seen, known_ids, problems)
            resume.records.append((tail, record))
            resume.keep_bytes = len(data)
            resume.add_newline = True
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
            BatchFileError: ``CONFIG_INVALID`` for an output that is not ours to resume, or
                one another run is writing right now.
            OSError: when the file cannot be read or written (the caller reports it).
        """
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_BINARY", 0), 0o644)
        try:
            _lock_exclusive(fd, path)
            data = _read_all(fd)
            resume = scan_output(data, path, known_ids)
            if retry_failed and resume.failed_ids:
                os.close(fd)
                fd = -1
                resume = _rewrite_without_failed(path, resume)
                fd = os.open(path, os.O_RDWR | os.O_APPEND | getattr(os, "O_BINARY", 0))
                _lock_exclusive(fd, path)
            else:
                _repair(fd, path, data, resume)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise
        return cls(path, fd), resume

    def append(self, record: dict[str, Any]) -> None:
        """Write one record as one line (one ``write``), syncing at most once a second."""
        line = encode_line(record)
        with self._lock:
            _write_all(self._fd, line)
            self._dirty = True
            now = time.monotonic()
            if now - self._last_sync >= SYNC_INTERVAL_S:
                _sync(self._fd)
                self._last_sync = now
                self._dirty = False

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


def _read_all(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _sync(fd: int) -> None:
    (getattr(os, "fdatasync", None) or os.fsync)(fd)


def _repair(fd: int, path: str, data: bytes, resume: Resume) -> None:
    if resume.keep_bytes < len(data):
        logger.warning(
            "%s: dropped a half-written last line (%d bytes); its request runs again",
            path,
            len(data) - resume.keep_bytes,
        )
        os.ftruncate(fd, resume.keep_bytes)
    if resume.add_newline:
        logger.info("%s: the last line had lost its newline; added", path)
        _write_all(fd, b"\n")
        resume.add_newline = False
    if resume.keep_bytes < len(data) or not data:
        _sync(fd)
        _sync_dir(path)


def _rewrite_without_failed(path: str, resume: Resume) -> Resume:
    kept = [(raw, r) for raw, r in resume.records if not is_failed(r)]
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".batch-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            for raw, _ in kept:
                out.write(raw + b"\n")
            out.flush()
            os.fsync(out.fileno())
        with contextlib.suppress(OSError):
            os.chmod(tmp, os.stat(path).st_mode & 0o777)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _sync_dir(path)
    logger.info("%s: rewritten without %d failed line(s)", path, len(resume.records) - len(kept))
    return Resume(keep_bytes=sum(len(raw) + 1 for raw, _ in kept), add_newline=False, records=kept)


def _sync_dir(path: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    with contextlib.suppress(OSError, AttributeError):
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
