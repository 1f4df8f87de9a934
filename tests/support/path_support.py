"""Paths of every awkward kind, and a bound on a call that might block on one of them.

A reader that opens a FIFO the usual way waits in ``open()`` for a writer that never comes;
:func:`outcome_within` runs such a call in a thread and, if it is still running after a
generous bound (there only to keep a broken build from hanging the suite), opens the FIFOs'
other ends so that the thread can finish, then fails the test.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

#: Only a hang reaches this; a working call returns at once.
HANG_BOUND = 60.0


def awkward_paths(folder: Path) -> dict[str, str]:
    """Name → path of things that are no regular file a library could read or write whole:
    each must be refused at once, never block, never be read without a limit."""
    folder.mkdir(parents=True, exist_ok=True)
    fifo = folder / "fifo"
    os.mkfifo(fifo)
    directory = folder / "directory"
    directory.mkdir()
    loop = folder / "loop"
    loop.symlink_to(loop)
    paths = {
        "nul byte": str(folder / "a\0b.png"),
        "lone surrogate": str(folder / "\ud800.png"),
        "directory": str(directory),
        "fifo": str(fifo),
        "character device": os.devnull,
        "missing folder": str(folder / "no" / "such" / "file"),
        "too long": str(folder / ("x" * 5000)),
        "symlink loop": str(loop),
        "empty": "",
    }
    if sys.platform.startswith("linux"):
        paths["endless device"] = "/dev/zero"
        paths["unreadable"] = "/proc/self/mem"  # a regular file whose read fails, even as root
    with contextlib.suppress(OSError):  # AF_UNIX paths are short; the bind may not fit
        server = socket.socket(socket.AF_UNIX)
        server.bind(str(folder / "sock"))
        server.close()  # the socket file stays
        paths["socket"] = str(folder / "sock")
    return paths


def outcome_within(call: Callable[[], object], fifos: Iterable[str | Path] = ()) -> object:
    """``call()``'s result, or the exception it raised; fails the test if it blocks."""
    box: list[object] = []

    def run() -> None:
        try:
            box.append(call())
        except BaseException as exc:  # the test inspects it
            box.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_BOUND)
    if thread.is_alive():
        _release(fifos, thread)
        pytest.fail(f"the call blocked for more than {HANG_BOUND:.0f} s")
    return box[0]


def _release(fifos: Iterable[str | Path], thread: threading.Thread) -> None:
    """Open each FIFO's two ends without blocking and drain it until ``thread`` ends."""
    ends = []
    for fifo in fifos:
        for flags in (os.O_RDONLY, os.O_WRONLY):
            with contextlib.suppress(OSError):
                ends.append((flags, os.open(fifo, flags | os.O_NONBLOCK)))
    for flags, fd in ends:
        if flags == os.O_WRONLY:
            os.close(fd)
    while thread.is_alive():
        for flags, fd in ends:
            if flags == os.O_RDONLY:
                with contextlib.suppress(OSError):
                    os.read(fd, 65536)
        thread.join(0.1)
    for flags, fd in ends:
        if flags == os.O_RDONLY:
            os.close(fd)
