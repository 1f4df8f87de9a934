"""The config file path: a regular file of at most ``CONFIG_LIMIT`` bytes, else ``ConfigError``.

``load_config``, ``connect(config=...)`` and the CLI's ``--config`` read the file the same way:
a FIFO, a device, a directory, a NUL byte, a path of another type, a huge or deeply nested
file is a ``ConfigError`` at once — never a wait in ``open()``, never an endless read.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from support.path_support import awkward_paths, outcome_within

import ollm_lite
from ollm_lite import ScriptedProvider
from ollm_lite.config import CONFIG_LIMIT, load_config
from ollm_lite.errors import ConfigError


def test_a_fifo_config_file_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "config.toml"
    os.mkfifo(fifo)
    caught = outcome_within(lambda: load_config(fifo, env={}), [fifo])
    assert isinstance(caught, ConfigError) and "FIFO" in caught.message
    caught = outcome_within(lambda: load_config(env={"OLLM_CONFIG": str(fifo)}), [fifo])
    assert isinstance(caught, ConfigError)


@pytest.mark.parametrize(
    "name", ["nul byte", "lone surrogate", "directory", "character device", "endless device"]
)
def test_an_awkward_config_path_is_a_config_error(tmp_path: Path, name: str) -> None:
    path = awkward_paths(tmp_path).get(name)
    if path is None:
        pytest.skip(f"no {name} on this system")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.code == "CONFIG_INVALID"
    with pytest.raises(ConfigError):
        ollm_lite.connect(ScriptedProvider(), config=path)


@pytest.mark.parametrize("path", [5, b"/tmp/config.toml", ["config.toml"]])
def test_a_config_path_of_another_type_is_a_config_error(path: object) -> None:
    with pytest.raises(ConfigError, match="path"):
        load_config(path, env={})  # type: ignore[arg-type]


def test_a_huge_config_file_is_refused_without_being_read_whole(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    with path.open("wb") as file:
        file.write(b'provider = "local"\n')
        file.truncate(64 * 1024 * 1024)
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="larger than 1 MiB"):
            load_config(path, env={})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 1024 * 1024


def test_a_config_file_at_the_limit_loads(tmp_path: Path) -> None:
    head = b'provider = "vllm"\n'
    path = tmp_path / "config.toml"
    path.write_bytes(head + b"#" * (CONFIG_LIMIT - len(head) - 1) + b"\n")
    assert load_config(path, env={}).provider == "vllm"


def test_deeply_nested_toml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text("a = " + "[" * 100_000 + "]" * 100_000 + "\n", "utf-8")
    with pytest.raises(ConfigError, match="deeply"):
        load_config(path, env={})
