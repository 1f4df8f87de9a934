"""The CLI never prints an API key, not even with ``--debug``."""

from __future__ import annotations

from pathlib import Path

from support.cli_support import cli_env, run

SECRET = "sk-very-secret-0123456789"


def test_the_cli_with_debug_shows_no_part_of_an_unsendable_key(tmp_path: Path) -> None:
    """A key with a character outside Latin-1 cannot be sent: ``CONFIG_INVALID`` at once."""
    env = cli_env(tmp_path, VLLM_HOST="http://127.0.0.1:9")
    done = run(
        tmp_path, "--debug", "--provider", "vllm", "--api-key", SECRET + "\u20ac", "health", env=env
    )
    assert done.returncode == 1
    assert "CONFIG_INVALID" in done.stderr
    output = done.stdout + done.stderr
    assert SECRET[:12] not in output and SECRET[-12:] not in output, output
