"""Where a secret could hide in what the library wrote: every string of a JSON value, of the
JSON texts inside it (decoded, so that an escaped spelling counts), and of every row of a
call log."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any


def decoded_strings(value: Any) -> Iterator[str]:
    """Every string inside ``value``, and inside every string that is JSON text, decoded."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "surrogatepass")
    if isinstance(value, str):
        yield value
        try:
            inner = json.loads(value)
        except (ValueError, RecursionError):
            return
        if not isinstance(inner, str):
            yield from decoded_strings(inner)
        else:
            yield inner
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from decoded_strings(key)
            yield from decoded_strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from decoded_strings(item)


def stored_strings(path: Path) -> list[str]:
    """Every text value of every row of the log at ``path``, and what its JSON decodes to."""
    found: list[str] = []
    if not path.exists():
        return found
    with sqlite3.connect(path) as db:
        for table in ("calls", "turns"):
            for row in db.execute(f"SELECT * FROM {table}"):
                found += [s for cell in row for s in decoded_strings(cell)]
    return found


def file_strings(path: Path) -> list[str]:
    """A written file's text, and every string of its JSON (a document or JSON lines)."""
    text = path.read_text("utf-8")
    found = [text]
    try:
        found += decoded_strings(json.loads(text))
    except ValueError:
        for line in text.splitlines():
            found += decoded_strings(line)
    return found
