"""``--config`` naming something that is no regular file: a one-line error at once."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from support.cli_support import run


@pytest.mark.parametrize("kind", ["fifo", "directory", "device"])
def test_a_config_that_is_no_regular_file_is_a_one_line_error(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "config.toml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    else:
        path = Path(os.devnull)
    out = run(tmp_path, "--config", str(path), "config", "show")  # its timeout ends a hang
    assert out.returncode == 1
    assert out.stderr.count("\n") == 1
    assert "[CONFIG_INVALID]" in out.stderr and str(path) in out.stderr
