"""Clients that log into a test's own file, and reading that file back."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

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


#: The user and group a root test drops to, so that a read-only file is read-only for it.
NOBODY = 65534

#: Runs first in :func:`as_a_user`'s child: everything the scenarios use is imported (a
#: logged call and a read made first) while the interpreter's own files can still be read
#: (they may live in a folder only root can enter), then a root child becomes ``nobody``.
#: ``FOLDER`` is the scenario's folder (its owner's), ``read_only(path)`` makes ``path`` and
#: ``FOLDER`` read-only and checks they are, ``writable(path)`` undoes it, ``client(path,
#: *turns)`` is a scripted client logging into ``path``, ``done(value)`` reports the outcome.
_PRELUDE = """
import json, logging, os, sqlite3, sys
from pathlib import Path
import ollm_lite
import ollm_lite.call_log._reader, ollm_lite.call_log._recorder, ollm_lite.call_log._writer
from ollm_lite import FinishEvent, ScriptedProvider, TextEvent, Usage
from ollm_lite.call_log import open_log
FOLDER = Path(sys.argv[1])
def warm_up():  # a logged call and a read, so that what they import lazily is imported now
    scratch = FOLDER / "warm-up.db"
    llm = ollm_lite.connect(ScriptedProvider(["x"]), model="m", log=str(scratch))
    llm.ask("x")
    llm.close()
    with open_log(scratch) as log:
        log.get(log.calls(search="x")[0].id)
        log.stats(by="day")
    for name in ("", "-wal", "-shm"):
        Path(f"{scratch}{name}").unlink(missing_ok=True)
warm_up()
def done(value):
    print(json.dumps(value))
    sys.exit(0)
if os.geteuid() == 0:
    try:
        os.setgroups([])
        os.setgid(NOBODY)
        os.setuid(NOBODY)
    except OSError as exc:
        done({"skip": f"running as root without the right to become nobody ({exc})"})
def read_only(path):
    path.chmod(0o400)
    FOLDER.chmod(0o500)
    if os.access(path, os.W_OK) or os.access(FOLDER, os.W_OK):
        done({"skip": f"chmod does not make {path} read-only for uid {os.getuid()}"})
def writable(path):
    FOLDER.chmod(0o700)
    path.chmod(0o600)
def client(path, *turns):
    return ollm_lite.connect(ScriptedProvider(list(turns)), model="m", log=str(path))
""".replace("NOBODY", str(NOBODY))


def as_a_user(scenario: str, tmp_path: Path) -> object:
    """What ``scenario`` (Python run after :data:`_PRELUDE`) passes to ``done``, run in a
    child process by a user whom file permissions bind: as ``nobody`` when the tests run
    as root (root writes read-only files anyway), in a fresh folder that user owns.

    Skips, saying why, when no such user can be had (root without the right to change its
    uid, or a file system that ignores permissions); fails on anything else.
    """
    root = os.geteuid() == 0
    # tmp_path's parents may be closed to other users: a folder of its own under the
    # temporary directory (1777) instead
    folder = Path(tempfile.mkdtemp(prefix="ollm-log-user-")) if root else tmp_path / "user"
    try:
        if root:
            os.chown(folder, NOBODY, NOBODY)
        else:
            folder.mkdir()
        code = _PRELUDE + textwrap.dedent(scenario)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "XDG_"))}
        env.update(
            HOME=str(folder),
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p),
            PYTHONDONTWRITEBYTECODE="1",
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(folder)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            encoding="utf-8",
            timeout=120,
        )
    finally:
        if root:
            shutil.rmtree(folder, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout.strip().splitlines()[-1])
    if isinstance(outcome, dict) and "skip" in outcome:
        pytest.skip(f"no user whom a read-only file binds: {outcome['skip']}")
    return outcome
