"""The Python snippets of README.md and docs/*.md, and how to run them.

A snippet is a fenced ``python`` block. The HTML comment on the line before the fence, when
there is one, says how to run it (it does not show on the rendered page)::

    <!-- snippet: {"turns": ["Paris."], "live": true} -->

* ``turns``: what the ``ScriptedProvider`` behind ``connect()`` answers, in order — a string,
  or a list of ``{"tool": name, "args": {...}}`` calls for one tool-calling turn (default:
  plain answers);
* ``live``: the snippet also runs against the real llama.cpp server (integration tier);
* ``files``: ``{name: text}`` written into the snippet's working directory first;
* ``setup``: Python run before the snippet (not shown on the page), e.g. to define a name
  the page defined in an earlier snippet;
* ``fake_mcp``: command names (``mcp-server-time`` …) the snippet starts as MCP servers: each
  is put on ``PATH`` as the suite's fake MCP server (tests/mcp_client/fake_mcp_server.py), and
  the servers it opened are closed afterwards;
* ``peer``: another library's code, shown for comparison (docs/comparison.md): it is only
  compiled, since that library and its server are not part of this project's test setup;
* ``script`` / ``library``: which of the five scripts and whose version (the comparison's
  line counts are checked against them).

Offline, every ``connect(...)`` in a snippet (and the default client behind
``ollm_lite.ask``/``ollm_lite.stream``) is a real ``connect`` over a ``ScriptedProvider``
playing ``turns``: its keyword options are checked exactly as for a real server. A snippet that
builds its own provider object keeps it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import types
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import ollm_lite
import ollm_lite.client as client_module
from ollm_lite import FinishEvent, ScriptedProvider, ToolCall, ToolCallEvent

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

_FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
_DIRECTIVE = re.compile(r"<!--\s*snippet:\s*(\{.*\})\s*-->\s*$")
DEFAULT_TURNS = ["A scripted answer."] * 8


@dataclass(frozen=True)
class Snippet:
    """One fenced ``python`` block of a page."""

    page: Path
    line: int
    code: str
    directive: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def live(self) -> bool:
        return bool(self.directive.get("live"))

    @property
    def peer(self) -> bool:
        return bool(self.directive.get("peer"))

    @property
    def lines(self) -> int:
        """Lines of code, blank lines not counted."""
        return sum(1 for line in self.code.splitlines() if line.strip())


def snippets(pages: list[Path] = PAGES) -> list[Snippet]:
    """Every python block of ``pages``, in page order."""
    found = []
    for page in pages:
        text = page.read_text("utf-8")
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            directive = _DIRECTIVE.search(before)
            found.append(
                Snippet(
                    page,
                    line,
                    match.group(1),
                    json.loads(directive.group(1)) if directive else {},
                )
            )
    return found


def scripted_turns(directive: dict[str, Any]) -> list[Any]:
    """The directive's ``turns`` as ScriptedProvider turns."""
    turns: list[Any] = []
    for index, turn in enumerate(directive.get("turns", DEFAULT_TURNS)):
        if isinstance(turn, str):
            turns.append(turn)
            continue
        calls: list[Any] = [
            ToolCallEvent(ToolCall.from_arguments(f"call_{index}_{n}", c["tool"], c["args"]))
            for n, c in enumerate(turn)
        ]
        turns.append([*calls, FinishEvent("tool")])
    return turns


def offline_connect(directive: dict[str, Any]) -> Callable[..., ollm_lite.Client]:
    """``connect`` as the snippet sees it offline (one scripted provider per call)."""
    real = client_module.connect

    def connect(provider: Any = None, **kwargs: Any) -> ollm_lite.Client:
        if provider is not None and not isinstance(provider, str):
            return real(provider, **kwargs)
        for name in ("host", "api_key", "config", "hosts", "per_host"):
            kwargs.pop(name, None)
        kwargs.setdefault("model", "scripted")
        return real(ScriptedProvider(scripted_turns(directive)), **kwargs)

    return connect


@contextlib.contextmanager
def running_dir(path: Path) -> Iterator[None]:
    old = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def run(
    snippet: Snippet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    connect: Callable[..., ollm_lite.Client],
) -> dict[str, Any]:
    """Execute ``snippet`` in ``tmp_path`` with ``connect`` behind every client it makes."""
    for name, text in snippet.directive.get("files", {}).items():
        (tmp_path / name).write_text(text, "utf-8")
    fake_mcp = snippet.directive.get("fake_mcp", [])
    if fake_mcp:
        _fake_mcp_commands(fake_mcp, tmp_path / "bin", monkeypatch)
        monkeypatch.setattr(client_module, "_default", None)
        from ollm_lite.mcp import server as mcp_server

        try:
            return _execute(snippet, tmp_path, monkeypatch, connect)
        finally:
            mcp_server._close_opened()
    return _execute(snippet, tmp_path, monkeypatch, connect)


def _fake_mcp_commands(names: list[str], folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder.mkdir()
    fake = ROOT / "tests" / "support" / "fake_mcp_server.py"
    for name in names:
        command = folder / name
        command.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" ok\n', "utf-8")
        command.chmod(0o755)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ.get('PATH', '')}")


def _execute(
    snippet: Snippet,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    connect: Callable[..., ollm_lite.Client],
) -> dict[str, Any]:
    # The package root first: resolving its lazy ``connect`` reads client_module.connect,
    # which must still be the real one then (else the fake would be "restored" afterwards).
    monkeypatch.setattr(ollm_lite, "connect", connect)
    monkeypatch.setattr(client_module, "connect", connect)
    monkeypatch.setattr(client_module, "_default", None)
    # A module of its own as __main__, as for a script: typing.get_type_hints finds the
    # snippet's names (dataclass field annotations) through sys.modules["__main__"].
    main = types.ModuleType("__main__")
    monkeypatch.setitem(sys.modules, "__main__", main)
    namespace = main.__dict__
    with running_dir(tmp_path):
        setup = snippet.directive.get("setup")
        if setup:
            exec(compile(setup, f"{snippet.id} (setup)", "exec"), namespace)
        exec(compile(snippet.code, snippet.id, "exec"), namespace)
    return namespace
