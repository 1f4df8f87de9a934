"""Every Python snippet of README.md and docs/ runs as written against the quick-start server.

As a reader would run them after ``scripts/llamacpp.py start``: each snippet is a script of
its own (``python3 -c`` with the snippet's visible text, nothing added), run in a folder that
holds only what the docs call the reader's own (a git repository with a ``cat.jpg``) and the
files the page's visible steps above it made, with only the configuration file ``start``
writes (``$OLLM_CONFIG``, written by the script's own :func:`llamacpp.write_config`) and
``mcp-server-time`` / ``mcp-server-git`` on ``PATH``. A snippet passes when it exits 0 and, if
it prints, prints something (an answer, not an empty line). The snippets that need llama.cpp's
own ``llama-server`` (docs/providers.md's Messages API) run the same way against the server
``scripts/llamacpp.py start --server native`` runs, with what the page tells the reader to set
(``ANTHROPIC_BASE_URL``, the URL ``start`` prints). Left out: only the snippets that say where
they stand that they need another server (``needs``: Ollama, vLLM, a hosted API's key) and
other libraries' code (``peer``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import llamacpp  # scripts/, put on sys.path by tests/docs/conftest.py
import pytest
from support.doc_snippets import ROOT, Snippet, readers_folder, run_steps, run_test_file, snippets

pytestmark = pytest.mark.integration

LIVE = [s for s in snippets() if s.live]
NATIVE_NEEDS = "llama.cpp's own llama-server"
"""The ``needs`` of the snippets that run against ``start --server native``'s server."""
NATIVE = [s for s in snippets() if s.needs == NATIVE_NEEDS]
PROVIDER_VARS = (
    *("OLLM_", "OLLAMA_", "VLLM_", "OPENAI_COMPATIBLE_", "GEMINI_", "GOOGLE_API_KEY"),
    "ANTHROPIC_",
)


@pytest.fixture(scope="module")
def readers_env(
    quickstart_server: llamacpp.ServerInfo, mcp_bin: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment after ``start``: its configuration file, no provider variables."""
    config = tmp_path_factory.mktemp("reader-config") / "config.toml"
    assert llamacpp.write_config(quickstart_server, config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARS)}
    env["OLLM_CONFIG"] = str(config)
    env["PATH"] = os.pathsep.join((str(mcp_bin), env.get("PATH", "")))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


def test_all_but_the_snippets_that_say_they_need_another_server_run_here() -> None:
    left_out = [s for s in snippets() if not s.live and s not in NATIVE]
    assert all(s.needs or s.peer for s in left_out)
    assert {s.page.name for s in left_out} == {"providers.md", "comparison.md", "chat-and-tools.md"}
    assert len(LIVE) >= 40
    # The Messages API snippet runs against llama.cpp's llama-server: not left out unseen.
    assert [s.page.name for s in NATIVE] == ["providers.md"]


@pytest.mark.parametrize("snippet", LIVE, ids=[s.id for s in LIVE])
def test_snippet_runs_as_written_against_the_quick_start_server(
    snippet: Snippet, readers_env: dict[str, str], tmp_path: Path
) -> None:
    folder = readers_folder(tmp_path)
    run_steps(snippet, folder, readers_env)
    if snippet.is_test_file:
        done = run_test_file(snippet, folder, readers_env)
        assert done.returncode == 0 and " passed" in done.stdout, (done.stdout, done.stderr)
        return
    done = subprocess.run(
        [sys.executable, "-c", snippet.code],
        env=readers_env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,  # a tiny model on a busy 2-core machine: minutes, not seconds
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    if "print(" in snippet.code:  # one that shows an outcome shows it when it succeeds, too
        assert done.stdout.strip(), ("printed nothing", done.stderr)


@pytest.fixture(scope="module")
def native_env(
    native_server: llamacpp.ServerInfo, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, str]:
    """The environment after ``start --server native`` and the page's
    ``export ANTHROPIC_BASE_URL=<the URL start prints>``."""
    config = tmp_path_factory.mktemp("reader-native-config") / "config.toml"
    assert llamacpp.write_config(native_server, config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(PROVIDER_VARS)}
    env["OLLM_CONFIG"] = str(config)
    env["ANTHROPIC_BASE_URL"] = native_server.base_url
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    return env


@pytest.mark.parametrize("snippet", NATIVE, ids=[s.id for s in NATIVE])
def test_snippet_runs_as_written_against_llama_cpps_own_server(
    snippet: Snippet, native_env: dict[str, str], tmp_path: Path
) -> None:
    folder = readers_folder(tmp_path)
    run_steps(snippet, folder, native_env)
    done = subprocess.run(
        [sys.executable, "-c", snippet.code],
        env=native_env,
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    if "print(" in snippet.code:
        assert done.stdout.strip(), ("printed nothing", done.stderr)
