"""Clients that log into a test's own file, and reading that file back."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import ollm_lite
from ollm_lite import ScriptedProvider
from ollm_lite.call_log import LoggedCall, open_log
from ollm_lite.client import Client
from ollm_lite.providers.scripted import TurnLike


def logging_client(path: Path, *turns: TurnLike, **options: Any) -> tuple[Client, ScriptedProvider]:
    """A client for model ``m`` on a scripted provider, logging into ``path``."""
    provider = ScriptedProvider(list(turns))
    options.setdefault("log", str(path))
    return ollm_lite.connect(provider, model="m", **options), provider


def logged(path: Path, **query: Any) -> list[LoggedCall]:
    """Every call in ``path``, oldest first."""
    with open_log(path) as log:
        return list(reversed(log.calls(limit=None, **query)))


def count_rows(path: Path, table: str = "calls") -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


def file_bytes(path: Path) -> bytes:
    """The database and its WAL file, as bytes (what a secret must never be found in)."""
    data = b""
    for name in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
        if name.exists():
            data += name.read_bytes()
    return data
