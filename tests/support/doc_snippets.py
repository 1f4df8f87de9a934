"""The Python snippets of README.md and docs/*.md, and how to run them.

A snippet is a fenced ``python`` block. Each runs as the page shows it, nothing added: in a
folder that holds only what the docs call the reader's own (a ``cat.jpg``, and the folder is a
git repository: :func:`readers_folder`) and the files the page's earlier visible steps made. A
step is a fenced ``bash``/``sh`` block marked ``{"step": true}`` (a ``cat > tickets.jsonl``
heredoc, say): it runs, with ``sh``, before every later snippet of its page.

The HTML comment on the line before a fence, when there is one, says how to run it offline (it
does not show on the rendered page; it never adds code or files)::

    <!-- snippet: {"turns": ["Paris."]} -->

* ``turns``: what the ``ScriptedProvider`` behind ``connect()`` answers offline, in order — a
  string, or a list of ``{"tool": name, "args": {...}}`` calls for one tool-calling turn
  (default: plain answers);
* ``fake_mcp``: command names (``mcp-server-time`` …) the snippet starts as MCP servers:
  offline each is put on ``PATH`` as the suite's fake MCP server
  (tests/support/fake_mcp_server.py), and the servers it opened are closed afterwards;
  against the real server the real MCP servers run;
* ``needs``: the other server the snippet needs (``"an Ollama server"``); the page says so
  where the snippet stands. The only snippets left out of the real-server run;
* ``peer``: another library's code, shown for comparison (docs/comparison.md): it is only
  compiled, since that library and its server are not part of this project's test setup;
* ``script`` / ``library``: which of the five scripts and whose version (the comparison's
  line counts are checked against them);
* ``step``: on a shell block, see above.

A snippet that defines ``test_*`` functions is a test file: it is saved and run with pytest.

Offline, every ``connect(...)`` in a snippet (and the default client behind
``ollm_lite.ask``/``ollm_lite.stream``) is a real ``connect`` over a ``ScriptedProvider``
playing ``turns``: its keyword options are checked exactly as for a real server. A snippet that
builds its own provider object keeps it. tests/docs/test_doc_snippets_live.py runs every
snippet, as a script of its own, against the real quick-start llama.cpp server.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import subprocess
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


def reading_order(pages: list[Path] = PAGES) -> list[Path]:
    """``pages`` as a reader meets them: README.md, then the pages in the order README.md
    first links them, then any page it does not link."""
    readme = ROOT / "README.md"
    linked = re.findall(r"\(docs/([\w.-]+\.md)", readme.read_text("utf-8"))
    order = [readme, *dict.fromkeys(ROOT / "docs" / name for name in linked)]
    return [p for p in order if p in pages] + [p for p in pages if p not in order]


_FENCE = re.compile(r"^```(\w*)[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
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

    language: str = "python"
    before: str = ""
    """The page's prose between the previous fence and this one."""

    @property
    def live(self) -> bool:
        """Whether it runs against the quick-start server (all but ``needs`` and ``peer``)."""
        return not (self.needs or self.peer)

    @property
    def needs(self) -> str:
        return str(self.directive.get("needs", ""))

    @property
    def peer(self) -> bool:
        return bool(self.directive.get("peer"))

    @property
    def is_test_file(self) -> bool:
        """A pytest file: run with pytest, not as a script."""
        return re.search(r"^def test_", self.code, re.MULTILINE) is not None

    @property
    def lines(self) -> int:
        """Lines of code, blank lines not counted."""
        return sum(1 for line in self.code.splitlines() if line.strip())


def blocks(pages: list[Path] = PAGES) -> list[Snippet]:
    """Every fenced block of ``pages`` (any language), in page order."""
    found = []
    for page in pages:
        text = page.read_text("utf-8")
        end = 0
        for match in _FENCE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            prose = text[end : match.start()]
            end = match.end()
            last = prose.rstrip("\n").rsplit("\n", 1)[-1]
            directive = _DIRECTIVE.search(last)
            found.append(
                Snippet(
                    page,
                    line,
                    match.group(2),
                    json.loads(directive.group(1)) if directive else {},
                    language=match.group(1),
                    before=prose,
                )
            )
    return found


def snippets(pages: list[Path] = PAGES) -> list[Snippet]:
    """Every python block of ``pages``, in page order."""
    return [b for b in blocks(pages) if b.language == "python"]


def steps_before(snippet: Snippet) -> list[Snippet]:
    """The shell steps of ``snippet``'s page above it, in page order."""
    return [
        b
        for b in blocks([snippet.page])
        if b.line < snippet.line and b.language in ("bash", "sh") and b.directive.get("step")
    ]


#: The reader's own picture (a 1x1 JPEG): the docs' ``cat.jpg``.
CAT_JPG = base64.b64decode(
    "/9j/4AAQSkZJRgABAQEASABIAAD/2wBDAP////////////////////////////////////////////////"
    "//////////////////////////////////////wgALCAABAAEBAREA/8QAFBABAAAAAAAAAAAAAAAAAAAAAP/aAAgB"
    "AQABPxA="
)


def readers_folder(path: Path) -> Path:
    """``path`` as the docs assume the reader's folder: a git repository holding ``cat.jpg``
    (a folder that already is one is left as the earlier snippets left it)."""
    if (path / ".git").is_dir():
        return path
    (path / "cat.jpg").write_bytes(CAT_JPG)
    git = ["git", "-c", "user.name=Reader", "-c", "user.email=reader@example.com"]
    for args in (["init", "-q"], ["add", "cat.jpg"], ["commit", "-q", "-m", "A picture of my cat"]):
        subprocess.run([*git, *args], cwd=path, check=True, capture_output=True, timeout=60)
    return path


def run_steps(snippet: Snippet, folder: Path, env: dict[str, str] | None = None) -> None:
    """Run the page's visible steps above ``snippet`` in ``folder``."""
    for step in steps_before(snippet):
        done = subprocess.run(
            ["sh", "-e", "-c", step.code],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, (step.id, done.stderr)


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
    """Execute ``snippet`` in ``tmp_path`` with ``connect`` behind every client it makes.

    ``tmp_path`` becomes the reader's folder first, with the page's steps above it run there.
    """
    readers_folder(tmp_path)
    run_steps(snippet, tmp_path)
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


def run_test_file(
    snippet: Snippet, folder: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Save a test-file snippet in ``folder`` and run pytest on it, as its page says."""
    path = folder / f"test_{snippet.page.stem.replace('-', '_')}_{snippet.line}.py"
    path.write_text(snippet.code, "utf-8")
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", path.name],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _fake_mcp_commands(names: list[str], folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder.mkdir(exist_ok=True)
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
        exec(compile(snippet.code, snippet.id, "exec"), namespace)
    return namespace
