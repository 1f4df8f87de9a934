"""Group 7, continued: the CLI never prints the key, whichever way it was given.

``ollm-lite`` runs as a real subprocess (``python -m ollm_lite``) with ``--debug`` (every log
record and traceback on stderr) against a loopback server whose error bodies echo the key.
The key comes from ``--api-key``, the environment or a config file; neither stdout nor stderr
of any command may contain it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.fault_server import CANARY, OPENAI_CHAT, status
from support.transport_support import serve

ROOT = Path(__file__).resolve().parents[2]


def echo(where: str) -> dict[str, object]:
    return {"error": {"message": f"{where}: bad key {CANARY}", "type": CANARY, "code": 401}}


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    full_env.update(env)
    full_env["PYTHONPATH"] = os.pathsep.join([str(ROOT), full_env.get("PYTHONPATH", "")])
    return subprocess.run(
        [sys.executable, "-m", "ollm_lite", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


COMMANDS = [
    ["chat", "hello"],
    ["chat", "--no-stream", "hello"],
    ["models", "list"],
    ["health"],
    ["config", "show"],
    ["config", "validate"],
]


@pytest.mark.parametrize("source", ["flag", "env", "config"])
def test_cli_output_never_contains_the_key(tmp_path: Path, source: str) -> None:
    """Every command, with ``--debug``, key by flag / env / file: no trace of it in the
    output, while the server did receive it."""
    scripts = {
        OPENAI_CHAT: status(401, echo("chat")),
        "/v1/models": status(403, echo("models")),
    }
    with serve(scripts) as server:
        base = ["--debug", "--provider", "vllm", "--model", "m"]
        empty = tmp_path / "empty.toml"
        empty.write_text("")
        env: dict[str, str] = {"OLLM_CONFIG": str(empty)}
        if source == "flag":
            base += ["--host", server.url, "--api-key", CANARY]
        elif source == "env":
            base += ["--host", server.url]
            env["VLLM_API_KEY"] = CANARY
        else:
            config = tmp_path / "config.toml"
            config.write_text(
                f'provider = "vllm"\n[providers.vllm]\nbase_url = "{server.url}"\n'
                f'api_key = "{CANARY}"\n'
            )
            env["OLLM_CONFIG"] = str(config)
        outputs = []
        for command in COMMANDS:
            done = cli([*base, *command], env)
            outputs.append((command, done.returncode, done.stdout, done.stderr))
        received = [" ".join(r.headers.values()) for r in server.requests]
    assert any(CANARY in r for r in received), "the key never reached the server"
    for command, _code, stdout, stderr in outputs:
        assert CANARY not in stdout, (command, stdout)
        assert CANARY not in stderr, (command, stderr[-2000:])
    for index in (0, 1):  # both chats failed the way the server said, in one line
        _command, code, _stdout, stderr = outputs[index]
        assert code == 1
        assert "[LLM_AUTH_FAILED]" in stderr and "bad key ***" in stderr
