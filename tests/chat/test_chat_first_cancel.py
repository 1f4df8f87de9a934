"""The first chat of a fresh process: the HTTP stack is loaded when the client is built.

A provider registered lazily (``default_registry()``) used to be built, and ``requests``
imported, inside the first chat, before the chat could look at its cancel event. These tests run
a fresh interpreter each, so nothing is imported beforehand by the test process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from ollm_lite import ChatClient, ErrorEvent, default_registry

ROOT = Path(__file__).resolve().parents[2]

FIRST_CHAT = r"""
import socket, sys, threading

server = socket.socket()
server.bind(("127.0.0.1", 0))
server.listen(8)
port = server.getsockname()[1]
import os
os.environ["OLLM_PROVIDER"] = "llamacpp"
os.environ["OPENAI_COMPATIBLE_HOST"] = f"http://127.0.0.1:{port}"

from ollm_lite import ChatClient, ChatFinishEvent, default_registry

assert "requests" not in sys.modules, "imported before the client was built"
client = ChatClient(default_registry(), model="m")
assert "requests" in sys.modules, "the client was built without its HTTP stack"
assert "ollm_lite.providers.openai_compat" in sys.modules

import threading
cancel = threading.Event()
held = []

def silent() -> None:  # accepts, reads the request, never answers; cancels once asked
    conn, _ = server.accept()
    held.append(conn)
    conn.recv(65536)
    cancel.set()

threading.Thread(target=silent, daemon=True).start()
events = list(client.chat("hello", cancel=cancel))
assert isinstance(events[-1], ChatFinishEvent), events
print(events[-1].reason)
"""


def _fresh(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OLLM_", "OPENAI_COMP"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120
    )


def test_first_chat_of_a_process_sees_its_cancel() -> None:
    """The import happened when the client was built; a cancel mid-request ends the chat."""
    done = _fresh(FIRST_CHAT)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cancelled"


def test_a_provider_that_cannot_be_built_is_reported_by_the_chat(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Building early changes nothing for a bad configuration: the chat reports it."""
    monkeypatch.setenv("OLLM_PROVIDER", "llamacpp")
    monkeypatch.setenv("OPENAI_COMPATIBLE_HOST", "ftp://nowhere")
    client = ChatClient(default_registry(), model="m")  # does not raise
    events = list(client.chat("hello"))
    errors = [e for e in events if isinstance(e, ErrorEvent)]
    assert errors and errors[0].error.code == "CONFIG_INVALID", events


def test_a_scripted_client_imports_no_http_library() -> None:
    """Only what the default provider needs is loaded: a scripted one needs no HTTP."""
    code = (
        "import sys\n"
        "from ollm_lite import ChatClient, ScriptedProvider\n"
        "ChatClient(ScriptedProvider(['hi']), model='m')\n"
        "print('requests' in sys.modules)\n"
    )
    done = _fresh(code)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
