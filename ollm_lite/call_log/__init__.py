"""The call log: every call on record, in SQLite (the standard library's ``sqlite3``).

Off unless asked for: ``connect(log=True)`` (or ``log="calls.db"``; ``cache=True`` answers
identical model turns from the log), ``[log] enabled = true`` in the config file, or
``OLLM_LOG``. One call — an ``ask``, ``stream``, ``run``, ``events``, ``map`` item, batch line
or CLI ``chat`` — is one row, written when it ends and committed before it returns. Read it
with :func:`open_log`::

    with ollm_lite.open_log() as log:
        for call in log.calls(since=86400, errors=True):
            print(call.started, call.model, call.error_code, call.text[:60])

See ``docs/call-log.md`` for the schema.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._reader import CallLog
    from ._records import CallStats, LoggedCall

__all__ = ["CallLog", "CallStats", "LoggedCall", "open_log"]


def __getattr__(name: str) -> Any:
    # loaded on first use: the configuration imports this package for its [log] checks
    if name == "CallLog":
        from ._reader import CallLog

        return CallLog
    if name in ("CallStats", "LoggedCall"):
        from . import _records

        return getattr(_records, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def open_log(path: str | os.PathLike[str] | None = None) -> CallLog:
    """The call log for reading (a context manager).

    Args:
        path: The log file (``None``: the configured one: ``OLLM_LOG``'s path, else
            ``[log] path`` of the config file, else ``$XDG_DATA_HOME/ollm/logs.db``). A
            missing file reads as an empty log; none is created.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a path that is no usable path or names no regular
            file (a folder, a FIFO), and for a file that is not a call log (not a database,
            another program's database), is damaged or was written by a newer version.
    """
    from ._reader import CallLog
    from ._settings import log_path

    if path is not None:
        return CallLog(path)
    return CallLog(log_path(None, _configured()))


def _configured() -> object:
    """The configuration as the CLI reads it (``None`` when it cannot be read)."""
    from ..config import load_config
    from ..errors import ConfigError

    try:
        return load_config()
    except ConfigError:
        return None
