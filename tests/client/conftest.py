"""Fixtures for the script API tests: an environment with no configuration of its own.

Every test runs with ``$XDG_CONFIG_HOME`` and ``$HOME`` in a fresh temporary directory and the
provider variables unset, so the machine's own ``~/.config/ollm/config.toml`` or
``OLLAMA_HOST`` cannot change what ``connect()`` reads; the process's default client is
forgotten before and after each test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import ollm_lite.client as client_module
from ollm_lite.config import ENV_VARS

ISOLATED = (*ENV_VARS, "OLLM_CONFIG", "OLLM_PROVIDER", "OLLM_MODEL")


@pytest.fixture(autouse=True)
def isolated_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """No config file, no provider variables; the default client starts afresh."""
    home = tmp_path / "home"
    (home / ".config").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    for name in ISOLATED:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(client_module, "_default", None)
    yield home / ".config"
    client_module._default = None
