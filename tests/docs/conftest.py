"""The quick-start llama.cpp server and the MCP servers the docs name, for the live doc test.

The server is the one ``scripts/llamacpp.py start`` runs (llama-cpp-python's server with
SmolLM2-135M-Instruct), started once per session and stopped at the end; so is the one
``scripts/llamacpp.py start --server native`` runs (llama.cpp's own ``llama-server``), for the
snippets that say they need it. Missing builds are
built on first use (minutes); with ``OLLM_LITE_NO_BUILD=1`` and nothing cached, the live tests
are skipped with a loud reason instead.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import llamacpp  # scripts/ is not a package: found through the sys.path entry above
import mcp_servers


def _no_build() -> bool:
    return os.environ.get("OLLM_LITE_NO_BUILD", "") not in ("", "0")


def _skip_loudly_unless_built(missing: list[str]) -> None:
    if missing and _no_build():
        pytest.skip(
            f"!!! DOC SNIPPETS NOT RUN AGAINST THE REAL SERVER: {', '.join(missing)} not built "
            f"and OLLM_LITE_NO_BUILD is set; run `python3 scripts/llamacpp.py install` and "
            "`python3 scripts/mcp_servers.py install` !!!"
        )


@pytest.fixture(scope="session")
def quickstart_server() -> Iterator[llamacpp.ServerInfo]:
    """The quick start's server: ``start``'s defaults (``py``, SmolLM2, ctx 4096)."""
    root = llamacpp.cache_root()
    builds = (llamacpp.PY_BUILD, llamacpp.MODEL_BUILD)
    missing = [b.name for b in builds if not b.complete(root)]
    if not llamacpp.gguf_path(root).is_file():
        missing.append(llamacpp.MODEL_FILE)
    _skip_loudly_unless_built(missing)
    llamacpp.install("py")  # a failure is an error, not a skip
    info = llamacpp.start_server("py")
    try:
        yield info
    finally:
        llamacpp.stop_server(info.pid)


@pytest.fixture(scope="session")
def native_server() -> Iterator[llamacpp.ServerInfo]:
    """``start --server native``'s server: llama.cpp's ``llama-server``, SmolLM2, ctx 4096."""
    root = llamacpp.cache_root()
    builds = (llamacpp.NATIVE_BUILD, llamacpp.MODEL_BUILD)
    missing = [b.name for b in builds if not b.complete(root)]
    if not llamacpp.gguf_path(root).is_file():
        missing.append(llamacpp.MODEL_FILE)
    _skip_loudly_unless_built(missing)
    llamacpp.install("native")  # a failure is an error, not a skip
    info = llamacpp.start_server("native")
    try:
        yield info
    finally:
        llamacpp.stop_server(info.pid)


@pytest.fixture(scope="session")
def mcp_bin() -> Path:
    """A folder holding ``mcp-server-time`` and ``mcp-server-git``, as docs/mcp.md installs."""
    root = mcp_servers.mcp_root()
    names: list[mcp_servers.ServerName] = ["time", "git"]
    missing = [n for n in names if not mcp_servers.BUILDS[n].build.complete(root)]
    _skip_loudly_unless_built([mcp_servers.BUILDS[n].package for n in missing])
    mcp_servers.install(names)
    return root / "bin"
