"""``ollm-lite models | health | config`` as subprocesses, and the pull progress printer."""

from __future__ import annotations

import io
import json
import re
import signal
import time
from datetime import datetime
from pathlib import Path

from support.cli_support import assert_one_line_error, cli_env, popen, run
from support.ollama_support import (
    PULL_TOTAL,
    json_answer,
    lines,
    pull_error_transcript,
    pull_transcript,
    refuse_port,
    serve,
    stream,
)

from ollm_lite.cli._pull_progress import PullProgressPrinter, human_bytes
from ollm_lite.types import PullProgress

TAGS = {
    "models": [
        {
            "name": "llama3.2:latest",
            "model": "llama3.2:latest",
            "modified_at": "2025-07-07T20:22:19.184789Z",
            "size": 2019393189,
            "details": {"parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
        },
        {
            "name": "nomic-embed-text:latest",
            "model": "nomic-embed-text:latest",
            "modified_at": "2025-06-01T08:00:00Z",
            "size": 274302450,
            "details": {"parameter_size": "137M", "quantization_level": "F16"},
        },
    ]
}
SHOW = {
    "modified_at": "2025-07-07T20:22:19.184789Z",
    "details": {"family": "llama", "parameter_size": "3.2B", "quantization_level": "Q4_K_M"},
    "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
    "capabilities": ["completion", "tools"],
}


# --------------------------------------------------------------------------- models


def test_models_list_is_an_aligned_table(tmp_path: Path) -> None:
    with serve({("GET", "/api/tags"): json_answer(TAGS)}) as server:
        out = run(tmp_path, "models", "list", "--host", server.url)
    assert out.returncode == 0, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0].split() == ["NAME", "SIZE", "PARAMS", "QUANT", "CONTEXT", "MODIFIED"]
    assert rows[1].split() == ["llama3.2:latest", "2.0", "GB", "3.2B", "Q4_K_M", "-",
                               "2025-07-07", "20:22"]  # fmt: skip
    assert rows[2].startswith("nomic-embed-text:latest")
    # aligned: every column starts at the same offset on every row
    for column in ("SIZE", "PARAMS", "MODIFIED"):
        start = rows[0].index(column)
        assert all(row[start - 2 : start] == "  " and row[start] != " " for row in rows[1:])


def test_models_list_json(tmp_path: Path) -> None:
    with serve({("GET", "/api/tags"): json_answer(TAGS)}) as server:
        out = run(tmp_path, "--host", server.url, "models", "list", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert [m["name"] for m in data] == ["llama3.2:latest", "nomic-embed-text:latest"]
    assert data[0]["size_bytes"] == 2019393189


def test_models_show(tmp_path: Path) -> None:
    with serve({("POST", "/api/show"): json_answer(SHOW)}) as server:
        out = run(tmp_path, "--host", server.url, "models", "show", "llama3.2")
        sent = [s.json for s in server.seen]
    assert out.returncode == 0, out.stderr
    for row in (r"context length\s+131072", r"capabilities\s+completion, tools", r"family\s+llama"):
        assert re.search(f"^{row}$", out.stdout, re.M), out.stdout
    assert sent[0]["model"] == "llama3.2"


def test_models_show_missing_model(tmp_path: Path) -> None:
    missing = json_answer({"error": "model 'nope' not found"}, 404)
    with serve({("POST", "/api/show"): missing}) as server:
        out = run(tmp_path, "--host", server.url, "models", "show", "nope")
    assert out.returncode == 1
    assert_one_line_error(out.stderr, "MODEL_NOT_FOUND")


def test_models_rm(tmp_path: Path) -> None:
    with serve({("DELETE", "/api/delete"): json_answer(None)}) as server:
        out = run(tmp_path, "--host", server.url, "models", "rm", "llama3.2")
        sent = [s.json for s in server.seen]
    assert out.returncode == 0, out.stderr
    assert out.stdout == "deleted llama3.2\n"
    assert sent == [{"model": "llama3.2"}]


def test_models_pull_plain_progress_lines(tmp_path: Path) -> None:
    """Not a TTY: one line per status and per 10 % step, then a summary line."""
    with serve({("POST", "/api/pull"): stream(pull_transcript())}) as server:
        out = run(tmp_path, "--host", server.url, "models", "pull", "llama3.2")
    assert out.returncode == 0, out.stderr
    got = out.stdout.splitlines()
    assert got[0] == "pulling manifest"
    layer = [line for line in got if line.startswith("pulling dde5aa3fc5ff:")]
    assert [line.split(":")[1].split("%")[0].strip() for line in layer] == ["0", "17", "59", "100"]
    assert layer[-1].startswith(f"pulling dde5aa3fc5ff: 100% ({human_bytes(PULL_TOTAL)} /")
    assert got[-4:] == ["verifying sha256 digest", "writing manifest", "success", "pulled llama3.2"]
    assert "\r" not in out.stdout and "\x1b" not in out.stdout


def test_models_pull_json(tmp_path: Path) -> None:
    with serve({("POST", "/api/pull"): stream(pull_transcript())}) as server:
        out = run(tmp_path, "--host", server.url, "models", "pull", "llama3.2", "--json")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert events[0] == {"status": "pulling manifest", "completed": None, "total": None,
                         "digest": None}  # fmt: skip
    assert events[-1]["status"] == "success"


def test_models_pull_error_line(tmp_path: Path) -> None:
    with serve({("POST", "/api/pull"): stream(pull_error_transcript())}) as server:
        out = run(tmp_path, "--host", server.url, "models", "pull", "nope")
    assert out.returncode == 1
    assert out.stdout == "pulling manifest\n"
    assert "file does not exist" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_models_pull_sigint_exits_130(tmp_path: Path) -> None:
    first = lines([{"status": "pulling manifest"}])
    with serve({("POST", "/api/pull"): stream(first, then="hang")}) as server:
        proc = popen(tmp_path, "--host", server.url, "models", "pull", "big")
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"pulling manifest\n"
        started = time.monotonic()
        proc.send_signal(signal.SIGINT)
        try:
            _, err = proc.communicate(timeout=10)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert time.monotonic() - started < 2.0
    assert b"Traceback" not in err


def test_model_management_unsupported_is_one_line(tmp_path: Path) -> None:
    """An OpenAI-compatible server cannot pull: a clear one-line message, exit 1."""
    url = f"http://127.0.0.1:{refuse_port()}"
    out = run(tmp_path, "--provider", "lmstudio", "--host", url, "models", "pull", "x")
    assert out.returncode == 1
    assert_one_line_error(out.stderr, "UNSUPPORTED_OPERATION")


# --------------------------------------------------------------------------- health


def test_health_lists_every_configured_provider(tmp_path: Path) -> None:
    """ok with latency and version for a live server, fail for a dead one; exit 1 if any fail."""
    dead = f"http://127.0.0.1:{refuse_port()}"
    with serve({("GET", "/api/version"): json_answer({"version": "0.9.6"})}) as server:
        env = cli_env(tmp_path, OLLAMA_HOST=server.url, VLLM_HOST=dead)
        out = run(tmp_path, "health", env=env)
        only = run(tmp_path, "health", "--json", "--host", server.url)
    assert out.returncode == 1, out.stderr
    rows = out.stdout.splitlines()
    assert rows[0].split()[:5] == ["PROVIDER", "STATUS", "LATENCY", "VERSION", "URL"]
    local = rows[1].split()
    assert local[:2] == ["local", "ok"] and local[3:6] == ["ms", "0.9.6", server.url]
    vllm = rows[2].split()
    assert vllm[:3] == ["vllm", "fail", "-"]
    assert "CONNECTION_FAILED" in rows[2]
    assert only.returncode == 0, only.stderr
    (status,) = json.loads(only.stdout)
    assert status["name"] == "local" and status["ok"] is True and status["version"] == "0.9.6"
    assert status["latency_ms"] == round(status["latency_ms"], 1) >= 0
    checked = datetime.fromisoformat(status["checked_at"])
    assert "T" in status["checked_at"] and checked.tzinfo is not None


def test_health_all_on_a_healthy_setup_exits_0(tmp_path: Path) -> None:
    """--all also shows the built-in providers nobody configured (failing, as nothing serves
    them here), but only a configured provider's failure makes the check fail."""
    dead = f"http://127.0.0.1:{refuse_port()}"
    with serve({("GET", "/api/version"): json_answer({"version": "0.9.6"})}) as server:
        healthy = run(tmp_path, "health", "--all", "--host", server.url)
        sick = run(tmp_path, "health", "--all", env=cli_env(tmp_path, OLLAMA_HOST=dead))
    assert healthy.returncode == 0, healthy.stdout + healthy.stderr
    rows = {line.split()[0]: line.split()[1] for line in healthy.stdout.splitlines()[1:]}
    assert rows["local"] == "ok"
    assert "fail" in rows.values()  # the providers nobody configured are still shown
    assert sick.returncode == 1, sick.stdout + sick.stderr


# --------------------------------------------------------------------------- config


def test_config_show_redacts_keys_and_names_origins(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[providers.vllm]\nbase_url = "http://gpu:8000"\napi_key = "sk-file"\n')
    env = cli_env(tmp_path, GEMINI_API_KEY="gm-env-secret")
    out = run(tmp_path, "--config", str(config), "--api-key", "sk-flag", "config", "show", env=env)
    assert out.returncode == 0, out.stderr
    for secret in ("sk-file", "gm-env-secret", "sk-flag"):
        assert secret not in out.stdout + out.stderr
    assert f"# file: {config}" in out.stdout
    assert 'base_url = "http://gpu:8000"  # file' in out.stdout
    assert 'api_key = "***"  # env GEMINI_API_KEY' in out.stdout
    assert 'api_key = "***"  # override' in out.stdout
    as_json = run(tmp_path, "--config", str(config), "config", "show", "--json", env=env)
    data = json.loads(as_json.stdout)
    assert data["providers"]["vllm"] == {"base_url": "http://gpu:8000", "api_key": "***"}
    assert data["provider"] == "local"


def test_config_show_masks_the_anthropic_key(tmp_path: Path) -> None:
    env = cli_env(tmp_path, ANTHROPIC_API_KEY="sk-ant-env-secret")
    out = run(tmp_path, "--provider", "claude", "config", "show", "--json", env=env)
    assert out.returncode == 0, out.stderr
    assert "sk-ant-env-secret" not in out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["provider"] == "anthropic"
    assert data["providers"]["anthropic"] == {"api_key": "***"}


def test_config_show_lists_the_options_table(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[options]\nmax_tokens = 512\nstop = ["END"]\n')
    out = run(tmp_path, "--config", str(config), "config", "show")
    assert out.returncode == 0, out.stderr
    assert '\n[options]\nmax_tokens = 512  # file\nstop = ["END"]  # file\n' in out.stdout
    as_json = run(tmp_path, "--config", str(config), "config", "show", "--json")
    assert json.loads(as_json.stdout)["options"] == {"max_tokens": 512, "stop": ["END"]}


def test_config_validate(tmp_path: Path) -> None:
    good = tmp_path / "good.toml"
    good.write_text('provider = "lmstudio"\n')
    out = run(tmp_path, "--config", str(good), "config", "validate")
    assert (out.returncode, out.stdout) == (0, f"ok: {good}\n")
    bad = tmp_path / "bad.toml"
    bad.write_text('provider = "olama"\n[providers.openai-compatible]\nbackend = "x"\nport = 1\n')
    out = run(tmp_path, "config", "validate", "--config", str(bad))
    assert out.returncode == 1
    assert out.stdout.splitlines() == [
        f"{bad}: 3 problems",
        "  providers.openai-compatible.port: unknown key 'port': expected one of base_url, "
        "api_key, backend, timeout",
        "  provider: unknown provider 'olama': expected one of local, vllm, openai-compatible, "
        "gemini, anthropic (aliases: ollama, openai_compatible, openai-compat, lmstudio, "
        "localai, kobold, koboldcpp, llamacpp, llama.cpp, google, claude); did you mean "
        "'ollama'?",
        "  providers.openai-compatible.backend: unknown backend 'x': expected one of lmstudio, "
        "localai, kobold, llamacpp, generic",
    ]


def test_unreadable_config_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "broken.toml"
    bad.write_text("provider = \n")
    out = run(tmp_path, "--config", str(bad), "config", "validate")
    assert out.returncode == 1
    assert_one_line_error(out.stderr, "CONFIG_INVALID")
    out = run(tmp_path, "--config", str(tmp_path / "missing.toml"), "config", "show")
    assert_one_line_error(out.stderr, "CONFIG_INVALID")


# --------------------------------------------------------------------------- progress printer


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def feed(printer: PullProgressPrinter, clock: FakeClock, steps: list[tuple[float, int]]) -> None:
    for at, done in steps:
        clock.now = at
        printer(PullProgress("pulling abc", completed=done, total=1000, digest="sha256:abc"))


def test_plain_progress_reports_rate_and_steps() -> None:
    out, clock = io.StringIO(), FakeClock()
    printer = PullProgressPrinter(out, tty=False, clock=clock)
    printer(PullProgress("pulling manifest"))
    feed(printer, clock, [(0.0, 0), (1.0, 50), (2.0, 120), (3.0, 500), (4.0, 1000)])
    printer(PullProgress("success"))
    printer.close()
    assert out.getvalue().splitlines() == [
        "pulling manifest",
        "pulling abc:   0% (0 B / 1.0 KB)",
        "pulling abc:  12% (120 B / 1.0 KB, 60 B/s)",
        "pulling abc:  50% (500 B / 1.0 KB, 167 B/s)",
        "pulling abc: 100% (1.0 KB / 1.0 KB, 250 B/s)",
        "success",
    ]


def test_tty_progress_redraws_one_line_throttled() -> None:
    out, clock = io.StringIO(), FakeClock()
    printer = PullProgressPrinter(out, tty=True, clock=clock, width=10)
    feed(printer, clock, [(0.0, 0), (0.01, 10), (0.02, 20), (0.5, 500), (0.51, 1000)])
    printer(PullProgress("success"))
    text = out.getvalue()
    draws = text.split("\r\x1b[K")[1:]
    assert len(draws) == 3  # 0.01 and 0.02 fell inside the redraw interval; 100 % always drawn
    assert draws[1].startswith("pulling abc [#####-----]  50% 500 B/1.0 KB")
    assert draws[2].startswith("pulling abc [##########] 100% 1.0 KB/1.0 KB")
    assert text.endswith("\nsuccess\n")


def test_human_bytes() -> None:
    assert [human_bytes(n) for n in (0, 999, 1000, 2019377376, 5 * 10**12)] == [
        "0 B", "999 B", "1.0 KB", "2.0 GB", "5.0 TB",
    ]  # fmt: skip


def test_models_pull_draws_a_bar_on_a_terminal(tmp_path: Path) -> None:
    """stdout a TTY: the progress is one redrawn line (\\r) with a bar, not a line per step."""
    import os
    import pty
    import subprocess

    from support.cli_support import ROOT, command

    master, slave = pty.openpty()
    with serve({("POST", "/api/pull"): stream(pull_transcript())}) as server:
        proc = subprocess.Popen(
            command("--host", server.url, "models", "pull", "llama3.2"),
            cwd=ROOT, env=cli_env(tmp_path), stdin=subprocess.DEVNULL, stdout=slave,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        os.close(slave)
        output = b""
        while True:
            try:
                piece = os.read(master, 4096)
            except OSError:  # EIO: the child closed the terminal
                break
            if not piece:
                break
            output += piece
        proc.wait(timeout=15)
    os.close(master)
    text = output.decode()
    assert proc.returncode == 0
    assert "\r\x1b[K" in text
    assert "[########################] 100%" in text
    assert "pulled llama3.2" in text
