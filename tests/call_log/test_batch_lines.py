"""Each batch line is one call: source ``batch:<input file's base name>``, its ``custom_id``."""

from __future__ import annotations

import json
from pathlib import Path

from support import ollama_support as oll
from support.log_support import cli, logged, logging_client

import ollm_lite
from ollm_lite import FinishEvent, TextEvent, Usage


def _input(tmp_path: Path, n: int) -> Path:
    path = tmp_path / "prompts.jsonl"
    lines = [
        {
            "custom_id": f"line-{i}",
            "method": "POST",
            "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]},
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), "utf-8")
    return path


def test_each_line_is_a_call_with_its_custom_id(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    answers = [[TextEvent(f"a{i}"), FinishEvent("stop", Usage(2, 1, 3))] for i in range(3)]
    llm, _ = logging_client(path, *answers)
    summary = ollm_lite.run_batch(
        _input(tmp_path, 3), tmp_path / "out.jsonl", client=llm, concurrency=1
    )
    assert summary.done == 3
    calls = logged(path)
    assert {c.source for c in calls} == {"batch:prompts.jsonl"}
    assert sorted(c.custom_id or "" for c in calls) == ["line-0", "line-1", "line-2"]
    by_id = {c.custom_id: c for c in calls}
    assert by_id["line-1"].messages == [{"role": "user", "content": "q1"}]
    assert by_id["line-1"].text in {"a0", "a1", "a2"}
    assert all(c.first_token_seconds is None and c.finish == "complete" for c in calls)
    assert all(c.usage is not None and c.usage.total_tokens == 3 for c in calls)


def test_a_failed_line_is_logged_with_its_error(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path)  # nothing scripted: the line fails
    summary = ollm_lite.run_batch(_input(tmp_path, 1), tmp_path / "out.jsonl", client=llm)
    assert summary.failed == 1
    [call] = logged(path)
    assert call.custom_id == "line-0" and call.finish == "error" and call.error_code


def test_the_cli_logs_batch_lines_when_the_log_is_on(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    source = _input(tmp_path, 2)
    with oll.serve({("POST", "/api/chat"): oll.stream(oll.text_transcript("m"))}) as server:
        done = cli(
            tmp_path, path, "--host", server.url, "batch", "run", str(source),
            "-o", str(tmp_path / "out.jsonl"),
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    calls = logged(path)
    assert sorted(c.custom_id or "" for c in calls) == ["line-0", "line-1"]
    assert {c.source for c in calls} == {"batch:prompts.jsonl"}
