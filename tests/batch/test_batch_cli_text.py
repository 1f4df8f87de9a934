"""``ollm-lite batch`` prints what servers and files say without escape sequences or control
characters: its error lines and its log lines go through the CLI's one path
(docs/reliability.md, "Secrets and redirects")."""

from __future__ import annotations

import json
from pathlib import Path

from support.batch_support import chat_line, write_lines, write_prompts
from support.cli_support import run
from support.fault_server import status
from support.transport_support import serve

HOSTILE = "\x1b]0;title\x07\x1b[2J"


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n") or 0x7F <= ord(c) <= 0x9F]


def test_a_servers_error_text_reaches_stderr_without_escapes(tmp_path: Path) -> None:
    error = {"error": {"message": f"models are down{HOSTILE} now", "type": "server_error"}}
    with serve({"/v1/models": status(500, error)}) as srv:
        line = chat_line("a", "hi")
        del line["body"]["model"]  # the run asks the server for its model
        inp = write_lines(tmp_path / "in.jsonl", [line])
        args = ["--provider", "openai-compatible", "batch", "run", str(inp)]
        done = run(tmp_path, *args, "-o", str(tmp_path / "out.jsonl"), "--host", srv.url)
    assert done.returncode == 1, done.stderr
    assert "models are down now" in done.stderr
    assert _controls(done.stderr) == []


def test_an_invalid_input_names_its_file_without_escapes(tmp_path: Path) -> None:
    inp = write_lines(tmp_path / f"in{HOSTILE}.jsonl", ["{not json"])
    args = ["--provider", "openai-compatible", "--model", "m", "batch", "run", str(inp)]
    done = run(tmp_path, *args, "-o", str(tmp_path / "out.jsonl"))
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith("ollm-lite: error [CONFIG_INVALID]: invalid batch input")
    assert _controls(done.stderr) == []


def test_batch_make_quotes_a_csv_header_without_escapes(tmp_path: Path) -> None:
    prompts = tmp_path / "prompts.csv"
    prompts.write_text(f"text{HOSTILE},other\nhello,x\n", encoding="utf-8")
    done = run(tmp_path, "batch", "make", str(prompts), "-o", str(tmp_path / "in.jsonl"))
    assert done.returncode == 2, done.stderr
    assert "several columns (text, other)" in done.stderr
    assert _controls(done.stderr) == []


def test_a_log_line_of_the_run_has_no_escapes(tmp_path: Path) -> None:
    inp = write_prompts(tmp_path / "in.jsonl", ["a"])
    out = tmp_path / f"out{HOSTILE}.jsonl"
    out.write_bytes(b'{"custom_id": "c0", "resp')  # a half-written last line: dropped, logged
    answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}
    with serve({"/v1/chat/completions": status(200, json.dumps(answer))}) as srv:
        args = ["--provider", "openai-compatible", "--model", "m", "batch", "run", str(inp)]
        done = run(tmp_path, *args, "-o", str(out), "--host", srv.url)
    assert done.returncode == 0, done.stderr
    assert "dropped a half-written last line" in done.stderr
    assert _controls(done.stderr) == []
