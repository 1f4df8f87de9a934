"""Clients that log into a test's own file, and reading that file back."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
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


ROOT = Path(__file__).resolve().parents[2]


def cli(
    home: Path, log: Path | None, *args: str, input: str = "", **extra: str
) -> subprocess.CompletedProcess[str]:
    """``python -m ollm_lite ARGS`` with a clean environment: ``HOME`` and the config and data
    folders under ``home``, ``OLLM_LOG`` set to ``log`` when given."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OLLM_", "OLLAMA_", "VLLM_", "OPENAI_COMPATIBLE_", "GEMINI_", "XDG_"))
    }
    env.update(
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / "config"),
        XDG_DATA_HOME=str(home / "data"),
        PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
    )
    if log is not None:
        env["OLLM_LOG"] = str(log)
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "ollm_lite", *args],
        cwd=ROOT,
        env=env,
        input=input,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=60,
    )
