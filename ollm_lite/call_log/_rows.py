"""Stored rows read back as values, each column checked on its own.

A row changed by hand or by another tool may hold anything SQLite can keep: text that is not
JSON, JSON of the wrong shape, a number where text belongs, bytes that are not UTF-8, a
``started`` that is no date. Such a column reads as ``None`` (a list as ``[]``) and the row's
other columns read as written; the caller says so once per row (:func:`warn_damaged`). The
same checks decide whether a logged answer can be served from the cache: a damaged one is a
miss.

Rows are fetched with ``text_factory = bytes`` so that text which is not UTF-8 reaches these
checks instead of failing the whole query.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

from ..types import ErrorInfo, ToolCall, ToolResult, Usage

__all__ = [
    "BAD",
    "Fields",
    "answer_of",
    "as_text",
    "json_list",
    "json_object",
    "loads",
    "tool_call_of",
    "tool_result_of",
    "usage_of",
    "warn_damaged",
]

logger = logging.getLogger("ollm_lite.call_log")

_T = TypeVar("_T")


class _Bad:
    """A value that cannot be read (distinct from a stored ``NULL``)."""


BAD = _Bad()


def as_text(value: Any) -> str | None:
    """A stored text column as a string; ``None`` when it is not text (or not UTF-8).

    Text written with a lone surrogate is kept as its ``surrogatepass`` bytes, which read back
    as the same string.
    """
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            return None
    return None


def loads(value: Any) -> Any:
    """A stored JSON column's value; :data:`BAD` when it is not JSON text (nested too deep
    included)."""
    text = as_text(value)
    if text is None:
        return BAD
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return BAD


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def usage_of(data: Any) -> Usage | None:
    """The :class:`Usage` of stored usage data; ``None`` unless it has the stored shape."""
    if not isinstance(data, dict):
        return None
    figures = [data.get(k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")]
    if not all(v is None or _is_int(v) for v in figures):
        return None
    extra = data.get("extra")
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        return None
    return Usage(figures[0], figures[1], figures[2], dict(extra))


def tool_call_of(data: Any) -> ToolCall | None:
    """The :class:`ToolCall` of a stored OpenAI-format tool call; ``None`` unless it has
    that shape."""
    if not isinstance(data, dict):
        return None
    function = data.get("function")
    call_id = data.get("id", "")
    if not isinstance(function, dict) or not isinstance(call_id, str):
        return None
    name, arguments = function.get("name", ""), function.get("arguments")
    if not isinstance(name, str) or not (arguments is None or isinstance(arguments, str | dict)):
        return None
    try:
        return ToolCall.from_arguments(call_id, name, arguments)
    except (ValueError, RecursionError):
        return None


def tool_result_of(data: Any) -> ToolResult | None:
    """The :class:`ToolResult` of a stored result (``{"ok", "data"}`` or ``{"ok", "error"}``);
    ``None`` unless it has that shape."""
    if not isinstance(data, dict) or not isinstance(data.get("ok"), bool):
        return None
    if data["ok"]:
        return ToolResult(True, data.get("data"))
    error = data.get("error")
    if error is None:
        return ToolResult(False)
    if not isinstance(error, dict):
        return None
    message, code, details = error.get("message", ""), error.get("code", ""), error.get("details")
    if not (isinstance(message, str) and isinstance(code, str)):
        return None
    if details is not None and not isinstance(details, dict):
        return None
    return ToolResult(False, error=ErrorInfo(message, code, details))


def _all(items: Any, read: Callable[[Any], _T | None]) -> list[_T] | None:
    """Every item of the list ``items`` read with ``read``; ``None`` if any cannot be."""
    if not isinstance(items, list):
        return None
    out = [read(item) for item in items]
    return None if any(v is None for v in out) else [v for v in out if v is not None]


def answer_of(data: Any) -> dict[str, Any] | None:
    """A stored model turn's answer when every field it has is of the stored shape (text and
    thinking text, tool calls, finish, usage, error); ``None`` otherwise."""
    if not isinstance(data, dict):
        return None
    for key in ("text", "thinking", "finish"):
        if data.get(key) is not None and not isinstance(data[key], str):
            return None
    if data.get("tool_calls") is not None and _all(data["tool_calls"], tool_call_of) is None:
        return None
    if data.get("usage") is not None and usage_of(data["usage"]) is None:
        return None
    error = data.get("error")
    if error is not None and not (
        isinstance(error, dict)
        and isinstance(error.get("message", ""), str)
        and isinstance(error.get("code", ""), str)
    ):
        return None
    return data


class Fields:
    """One stored row read column by column; what cannot be read is noted in
    :attr:`damaged`."""

    def __init__(self, row: sqlite3.Row) -> None:
        self.row = row
        self.damaged: list[str] = []

    def _bad(self, name: str) -> None:
        self.damaged.append(name)

    def text(self, name: str, *, nullable: bool = False) -> str | None:
        """A text column (``NULL`` is ``None``, and damaged unless ``nullable``)."""
        value = self.row[name]
        if value is None and nullable:
            return None
        text = as_text(value)
        if text is None:
            self._bad(name)
        return text

    def number(self, name: str, *, nullable: bool = False) -> float | None:
        """A finite number column."""
        value = self.row[name]
        if value is None and nullable:
            return None
        if isinstance(value, int | float) and math.isfinite(value):
            return float(value)
        self._bad(name)
        return None

    def count(self, name: str) -> int | None:
        """A whole-number column that may be ``NULL``."""
        value = self.row[name]
        if value is None or _is_int(value):
            return int(value) if value is not None else None
        self._bad(name)
        return None

    def flag(self, name: str) -> bool | None:
        """A 0/1 column."""
        value = self.row[name]
        if _is_int(value) and value in (0, 1):
            return bool(value)
        self._bad(name)
        return None

    def started(self, name: str = "started") -> datetime | None:
        """An ISO 8601 time with its offset, as an aware UTC datetime."""
        text = as_text(self.row[name])
        try:
            when = datetime.fromisoformat(text) if text is not None else None
            if when is not None and when.utcoffset() is not None:
                return when.astimezone(UTC)
        except (ValueError, OverflowError):
            pass
        self._bad(name)
        return None

    def json(self, name: str, read: Callable[[Any], _T | None], *, nullable: bool = False) -> Any:
        """A JSON column read with ``read`` (which returns ``None`` for the wrong shape)."""
        value = self.row[name]
        if value is None and nullable:
            return None
        data = loads(value)
        out = None if data is BAD else read(data)
        if out is None:
            self._bad(name)
        return out


def json_list(read: Callable[[Any], _T | None]) -> Callable[[Any], list[_T] | None]:
    """A reader of a JSON list whose every item ``read`` accepts."""
    return lambda data: _all(data, read)


def json_object(data: Any) -> dict[str, Any] | None:
    """``data`` when it is a JSON object."""
    return data if isinstance(data, dict) else None


def warn_damaged(path: Path, what: str, damaged: list[str]) -> None:
    """One WARNING for a row with damaged columns, naming the row and the columns."""
    logger.warning(
        "the call log %s: %s is damaged (%s cannot be read: shown as empty)",
        path,
        what,
        ", ".join(dict.fromkeys(damaged)),
    )
