"""Files the library is handed by path: read with a size cap, written atomically.

Every path a caller gives for a file the library reads or writes whole (an image, a saved
session or conversation, the configuration) goes through here, so that any string is either
a file the library can use or a ``ConfigError`` (``CONFIG_INVALID``) at once:

* only a regular file is read. The file is opened without blocking (``O_NONBLOCK``: opening a
  FIFO that no process writes to would otherwise wait for one for ever) and the *opened* file
  is checked with ``fstat``, so a directory, FIFO, socket or device is refused and nothing can
  swap the file between a look and the open;
* at most ``limit + 1`` bytes are read: a larger or endless file is refused, naming the limit,
  never read whole;
* a path that is no path (a NUL byte, another type, too long, a missing folder) is refused too.

A write goes to a new temporary file beside the target, created with ``O_EXCL`` (never an
existing file, FIFO or link), and replaces the target in one step: a crash never leaves half a
file, and a reader never sees one. A target that exists and is no regular file (a directory,
a FIFO, a device) is refused rather than replaced.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from typing import Any, Literal, overload

from .errors import ConfigError

__all__ = ["MiB", "path_text", "read_file", "write_file"]

MiB = 1024 * 1024

_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_CREATE_FLAGS = (
    os.O_WRONLY
    | os.O_CREAT
    | os.O_EXCL
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_CLOEXEC", 0)
    | getattr(os, "O_BINARY", 0)
)
_CHUNK = MiB

#: What a path that is not a regular file is, for the message refusing it.
_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def path_text(path: Any) -> str:
    """A path as messages show it: as written, or quoted with escapes when it holds
    characters that do not print (a NUL byte, a newline)."""
    try:
        text = os.fsdecode(os.fspath(path))
    except TypeError:
        return f"<{type(path).__name__}>"
    return text if text.isprintable() else repr(text)


def size_text(size: int) -> str:
    """``10 MiB`` for whole mebibytes, else the byte count."""
    return f"{size // MiB} MiB" if size % MiB == 0 else f"{size} bytes"


@overload
def read_file(path: object, limit: int, what: str) -> bytes: ...
@overload
def read_file(
    path: object, limit: int, what: str, *, missing_ok: Literal[True]
) -> bytes | None: ...
def read_file(path: object, limit: int, what: str, *, missing_ok: bool = False) -> bytes | None:
    """The whole content of the regular file at ``path``, at most ``limit`` bytes.

    Args:
        path: A ``str``, ``bytes`` or ``os.PathLike`` path (anything else is refused).
        limit: The most bytes the file may hold.
        what: What the file is, for messages (``"image"``, ``"session file"``).
        missing_ok: Return ``None`` when nothing is at ``path``, instead of raising.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the path and why: it cannot be opened, is not
            a regular file, or holds more than ``limit`` bytes.
    """
    shown = path_text(path)

    def refused(reason: str) -> ConfigError:
        return ConfigError(f"cannot read the {what} {shown}: {reason}", details={"path": shown})

    try:
        fd = os.open(path, _READ_FLAGS)  # type: ignore[arg-type]
    except FileNotFoundError:
        if missing_ok:
            return None
        raise refused("it does not exist") from None
    except OSError as exc:
        raise refused(_os_reason(exc)) from exc
    except (TypeError, ValueError) as exc:  # another type, a NUL byte, a lone surrogate
        raise refused(_path_reason(path, exc)) from exc
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise refused(f"it is {_kind(mode)}; give a regular file")
        data = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise refused(_os_reason(exc)) from exc
    finally:
        os.close(fd)
    if len(data) > limit:
        raise refused(f"it is larger than {size_text(limit)}, the most a {what} may hold")
    return data


def _read_at_most(fd: int, most: int) -> bytes:
    data = bytearray()
    while len(data) < most:
        chunk = os.read(fd, min(_CHUNK, most - len(data)))
        if not chunk:
            break
        data += chunk
    return bytes(data)


def write_file(path: Any, data: bytes, what: str) -> None:
    """Replace the file at ``path`` with ``data``, atomically.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the path and why it cannot be written (the
            target is left as it was).
    """
    shown = path_text(path)

    def refused(reason: str) -> ConfigError:
        return ConfigError(f"cannot save the {what} to {shown}: {reason}", details={"path": shown})

    try:
        target = os.fsdecode(os.fspath(path))
        if "\0" in target:
            raise ValueError("embedded null byte")
    except (TypeError, ValueError) as exc:
        raise refused(_path_reason(path, exc)) from exc
    try:  # a FIFO, device or directory is not replaced by a file: it is refused
        mode = os.stat(target).st_mode
    except (OSError, ValueError):
        mode = None  # nothing there yet, or a path the steps below report
    if mode is not None and not stat.S_ISREG(mode):
        raise refused(f"it is {_kind(mode)}; give a regular file")
    folder, name = os.path.split(target)
    if not name:
        raise refused("it names no file")
    temporary = os.path.join(folder, f".{name[:100]}.{os.urandom(6).hex()}.tmp")
    try:
        fd = os.open(temporary, _CREATE_FLAGS, 0o666)
    except OSError as exc:
        raise refused(_os_reason(exc)) from exc
    except ValueError as exc:  # a name the file system's encoding cannot hold
        raise refused(_path_reason(path, exc)) from exc
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temporary, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise refused(_os_reason(exc)) from exc


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "no regular file")


def _os_reason(exc: OSError) -> str:
    if exc.errno == errno.ENXIO:  # a FIFO or socket opened without a peer
        return "it is no regular file"
    return exc.strerror or str(exc)


def _path_reason(path: object, exc: Exception) -> str:
    if isinstance(exc, UnicodeError):
        return "the file system cannot encode its name"
    if isinstance(path, str | bytes | os.PathLike):
        return "a path cannot hold a NUL byte"
    return f"a path must be a str or os.PathLike, not {type(path).__name__}"
