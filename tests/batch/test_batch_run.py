"""run_batch end to end over an in-memory backend: the format, resume, exactly-once, stops."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from pathlib import Path

import pytest
from support.batch_support import (
    EchoBackend,
    chat_line,
    client_for,
    read_output,
    write_lines,
    write_prompts,
)

from ollm_lite.batch import BatchFileError, BatchSummary, run_batch
from ollm_lite.errors import ConfigError
from ollm_lite.providers.scripted import ScriptedProvider


def test_every_line_answered_as_an_openai_chat_completion(tmp_path: Path) -> None:
    """Each input line gives one output line with all four keys and a chat.completion body."""
    backend = EchoBackend()
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b", "c"])
    summary = run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend))
    assert (summary.total, summary.done, summary.failed, summary.skipped) == (3, 3, 0, 0)
    assert summary.seconds >= 0
    lines = read_output(tmp_path / "out.jsonl")
    assert sorted(line["custom_id"] for line in lines) == ["c0", "c1", "c2"]
    for line in lines:
        assert set(line) == {"id", "custom_id", "response", "error"}
        assert line["error"] is None
        assert line["response"]["status_code"] == 200
        assert line["response"]["request_id"]
        body = line["response"]["body"]
        assert body["object"] == "chat.completion"
        assert body["model"] == "m"
        choice = body["choices"][0]
        prompt = "abc"[int(line["custom_id"][1])]
        assert choice["message"] == {"role": "assistant", "content": f"echo: {prompt}"}
        assert choice["finish_reason"] == "stop"
        assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}


def test_a_server_error_is_a_line_with_status_and_error(tmp_path: Path) -> None:
    """An HTTP error keeps its status in response and adds error {code, message}; exit path
    counts it as failed."""
    backend = EchoBackend()
    inp = write_prompts(tmp_path / "in.jsonl", ["ok", "fail please"])
    summary = run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend))
    assert (summary.done, summary.failed) == (1, 1)
    failed = next(x for x in read_output(tmp_path / "out.jsonl") if x["custom_id"] == "c1")
    assert failed["response"]["status_code"] == 500
    assert failed["response"]["body"] == {
        "error": {"message": "boom", "type": "server_error", "param": None, "code": None}
    }
    assert failed["error"]["code"] == "LLM_HTTP_ERROR"
    assert "boom" in failed["error"]["message"]


def test_a_failure_without_an_http_answer_has_a_null_response(tmp_path: Path) -> None:
    """A connection failure: response null, error carries the library's stable code."""
    from ollm_lite.providers.openai_compat import OpenAICompatibleProvider

    provider = OpenAICompatibleProvider(base_url="http://127.0.0.1:9", retries=0)
    inp = write_prompts(tmp_path / "in.jsonl", ["x"])
    summary = run_batch(inp, tmp_path / "out.jsonl", client=client_for(provider))
    assert summary.failed == 1
    (line,) = read_output(tmp_path / "out.jsonl")
    assert line["response"] is None
    assert line["error"]["code"] == "CONNECTION_FAILED"


def test_embeddings_lines_give_an_embeddings_list(tmp_path: Path) -> None:
    backend = EchoBackend()
    line = {
        "custom_id": "e1",
        "method": "POST",
        "url": "/v1/embeddings",
        "body": {"model": "emb", "input": ["ab", "abcd"]},
    }
    inp = write_lines(tmp_path / "in.jsonl", [line])
    run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend))
    (out,) = read_output(tmp_path / "out.jsonl")
    body = out["response"]["body"]
    assert body["object"] == "list"
    assert [d["embedding"] for d in body["data"]] == [[2.0, 1.0], [4.0, 1.0]]
    assert [d["index"] for d in body["data"]] == [0, 1]
    assert backend.embedded == [["ab", "abcd"]]


@pytest.mark.parametrize(
    ("lines", "needle"),
    [
        (["{not json"], "not valid JSON"),
        ([{"method": "POST", "url": "/v1/chat/completions", "body": {}}], "missing custom_id"),
        ([chat_line("ok", "y")], "duplicate custom_id 'ok' (first on line 1)"),
        ([{**chat_line("a", "x"), "url": "/v1/completions"}], "unsupported url"),
        ([{**chat_line("a", "x"), "method": "GET"}], "method must be POST"),
        ([chat_line("a", "x", stream=True)], "stream"),
        ([{**chat_line("a", "x"), "body": {"model": "m", "messages": []}}], "messages"),
    ],
)
def test_an_invalid_input_is_refused_before_any_request(
    tmp_path: Path, lines: list[object], needle: str
) -> None:
    """Bad JSON, a missing or duplicate custom_id, an unsupported url: a clear error naming
    the line, and nothing sent, nothing written."""
    backend = EchoBackend()
    inp = write_lines(tmp_path / "in.jsonl", [chat_line("ok", "fine"), *lines])
    with pytest.raises(BatchFileError) as info:
        run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend))
    assert info.value.code == "CONFIG_INVALID"
    assert needle in info.value.message
    assert "line 2" in info.value.message
    assert info.value.details["problems"][0]["line"] == 2
    assert backend.prompts == []
    assert not (tmp_path / "out.jsonl").exists()


def test_every_problem_is_listed_not_only_the_first(tmp_path: Path) -> None:
    inp = write_lines(tmp_path / "in.jsonl", ["{", chat_line("a", "x"), chat_line("a", "y"), "[]"])
    with pytest.raises(BatchFileError) as info:
        run_batch(inp, tmp_path / "out.jsonl", client=client_for(EchoBackend()))
    assert [p["line"] for p in info.value.details["problems"]] == [1, 3, 4]
    assert "and 2 more" in info.value.message


def test_a_missing_model_is_an_error_unless_the_client_has_one(tmp_path: Path) -> None:
    line = chat_line("a", "x")
    del line["body"]["model"]
    inp = write_lines(tmp_path / "in.jsonl", [line])
    with pytest.raises(BatchFileError, match="no model"):
        run_batch(inp, tmp_path / "out.jsonl", client=client_for(EchoBackend(), model=None))
    summary = run_batch(inp, tmp_path / "out.jsonl", client=client_for(EchoBackend(), "dflt"))
    assert summary.done == 1
    assert read_output(tmp_path / "out.jsonl")[0]["response"]["body"]["model"] == "dflt"


def test_a_missing_input_file_is_a_batch_file_error(tmp_path: Path) -> None:
    with pytest.raises(BatchFileError, match="cannot read"):
        run_batch(tmp_path / "nope.jsonl", tmp_path / "out.jsonl", client=client_for(EchoBackend()))


def test_resume_skips_what_is_already_answered(tmp_path: Path) -> None:
    """A second run sends nothing for lines already in the output, failed ones included."""
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "fail", "c"])
    out = tmp_path / "out.jsonl"
    run_batch(inp, out, client=client_for(EchoBackend()))
    again = EchoBackend()
    summary = run_batch(inp, out, client=client_for(again))
    assert summary == BatchSummary(3, 0, 0, 3, summary.seconds, failed_in_output=1)
    assert again.prompts == []
    assert len(read_output(out)) == 3


def test_retry_failed_rewrites_the_output_without_failed_lines(tmp_path: Path) -> None:
    """--retry-failed: the good lines stay byte for byte, the failed ones run again."""
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "fail", "c"])
    out = tmp_path / "out.jsonl"
    run_batch(inp, out, client=client_for(EchoBackend()))
    good = [line for line in out.read_bytes().splitlines() if b'"error":null' in line]
    fixed = ScriptedProvider(["fixed"])
    summary = run_batch(inp, out, client=client_for(fixed), retry_failed=True)
    assert (summary.done, summary.failed, summary.skipped) == (1, 0, 2)
    assert [r.messages[-1].text for r in fixed.requests] == ["fail"]
    lines = out.read_bytes().splitlines()
    assert lines[:2] == good
    assert sorted(x["custom_id"] for x in read_output(out)) == ["c0", "c1", "c2"]
    assert all(x["error"] is None for x in read_output(out))
    assert not list(tmp_path.glob(".batch-*"))  # the temporary file is gone


def test_progress_callable_sees_each_line(tmp_path: Path) -> None:
    seen: list[BatchSummary] = []
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "fail", "c", "d"])
    run_batch(inp, tmp_path / "out.jsonl", client=client_for(EchoBackend()), progress=seen.append)
    assert [s.done + s.failed for s in seen] == [1, 2, 3, 4]
    assert seen[-1].failed == 1 and seen[-1].total == 4


def test_a_resumed_run_counts_the_failed_lines_kept_in_the_output(tmp_path: Path) -> None:
    """``failed`` is this run's; ``failed_in_output`` also counts the errors kept from before,
    in the running summary too, until ``retry_failed`` runs them again."""
    prompts = ["fail a", "fail b", "c"]
    out = tmp_path / "out.jsonl"
    first = run_batch(
        write_prompts(tmp_path / "in.jsonl", prompts), out, client=client_for(EchoBackend())
    )
    assert (first.done, first.failed, first.failed_in_output) == (1, 2, 2)
    seen: list[BatchSummary] = []
    more = write_prompts(tmp_path / "more.jsonl", [*prompts, "d"])
    resumed = run_batch(more, out, client=client_for(EchoBackend()), progress=seen.append)
    assert resumed == BatchSummary(4, 1, 0, 3, resumed.seconds, failed_in_output=2)
    assert [replace(s, seconds=0) for s in seen] == [replace(resumed, seconds=0)]
    fixed = ScriptedProvider(["fixed a", "fixed b"])
    retried = run_batch(more, out, client=client_for(fixed), retry_failed=True)
    assert retried == BatchSummary(4, 2, 0, 2, retried.seconds, failed_in_output=0)
    assert not [x for x in read_output(out) if x["error"] is not None]


def test_progress_true_writes_to_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b"])
    run_batch(inp, tmp_path / "out.jsonl", client=client_for(EchoBackend()), progress=True)
    err = capsys.readouterr().err
    assert "2/2" in err and "done 2" in err


def test_concurrency_bounds_requests_in_flight(tmp_path: Path) -> None:
    gate = threading.Event()
    backend = EchoBackend(gate)
    inp = write_prompts(tmp_path / "in.jsonl", [f"p{i}" for i in range(10)])
    result: list[BatchSummary] = []
    worker = threading.Thread(
        target=lambda: result.append(
            run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend), concurrency=3)
        )
    )
    worker.start()
    for _ in range(3):
        assert backend.started.acquire(timeout=30)
    assert not backend.started.acquire(timeout=0.3)  # a fourth never starts while 3 are held
    gate.set()
    worker.join(60)
    assert result[0].done == 10


def test_bad_concurrency_is_a_config_error(tmp_path: Path) -> None:
    inp = write_prompts(tmp_path / "in.jsonl", ["a"])
    with pytest.raises(ConfigError):
        run_batch(inp, tmp_path / "out.jsonl", client=client_for(EchoBackend()), concurrency=0)


def test_cancel_interrupts_in_flight_and_writes_nothing_for_them(tmp_path: Path) -> None:
    """Setting cancel ends the run: requests in flight are interrupted and not written, so the
    next run sends exactly those again."""
    gate = threading.Event()
    backend = EchoBackend(gate)
    cancel = threading.Event()
    inp = write_prompts(tmp_path / "in.jsonl", [f"p{i}" for i in range(6)])
    out = tmp_path / "out.jsonl"
    result: list[BatchSummary] = []
    worker = threading.Thread(
        target=lambda: result.append(
            run_batch(inp, out, client=client_for(backend), concurrency=2, cancel=cancel)
        )
    )
    worker.start()
    assert backend.started.acquire(timeout=30) and backend.started.acquire(timeout=30)
    cancel.set()
    worker.join(60)
    assert not worker.is_alive()
    assert result[0].done == 0 and result[0].remaining == 6
    assert out.read_bytes() == b""
    summary = run_batch(inp, out, client=client_for(EchoBackend()))
    assert summary.done == 6
    assert len(read_output(out)) == 6


def test_an_output_of_another_batch_is_refused(tmp_path: Path) -> None:
    inp = write_prompts(tmp_path / "in.jsonl", ["a"])
    other = write_prompts(tmp_path / "other.jsonl", ["a", "b"])
    out = tmp_path / "out.jsonl"
    run_batch(other, out, client=client_for(EchoBackend()))
    before = out.read_bytes()
    with pytest.raises(BatchFileError, match="not in the input"):
        run_batch(inp, out, client=client_for(EchoBackend()))
    assert out.read_bytes() == before


def test_a_corrupt_line_before_good_ones_is_not_repaired(tmp_path: Path) -> None:
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b"])
    out = tmp_path / "out.jsonl"
    run_batch(inp, out, client=client_for(EchoBackend()))
    lines = out.read_bytes().splitlines(keepends=True)
    out.write_bytes(b"garbage\n" + b"".join(lines))
    with pytest.raises(BatchFileError, match="line 1"):
        run_batch(inp, out, client=client_for(EchoBackend()))


def test_output_lines_are_single_json_lines_even_with_newlines_in_text(tmp_path: Path) -> None:
    inp = write_prompts(tmp_path / "in.jsonl", ["two\nlines\u2028and a separator"])
    run_batch(inp, tmp_path / "out.jsonl", client=client_for(EchoBackend()))
    raw = (tmp_path / "out.jsonl").read_bytes()
    assert raw.count(b"\n") == 1
    body = json.loads(raw)["response"]["body"]
    assert body["choices"][0]["message"]["content"] == "echo: two\nlines\u2028and a separator"


def test_ctrl_c_in_a_script_finishes_in_flight_lines_then_raises(tmp_path: Path) -> None:
    """With Python's default SIGINT handling, a Ctrl-C stops new work, writes the lines in
    flight, then raises KeyboardInterrupt as the script expects."""
    import signal

    gate = threading.Event()
    backend = EchoBackend(gate)
    inp = write_prompts(tmp_path / "in.jsonl", [f"p{i}" for i in range(6)])
    out = tmp_path / "out.jsonl"

    def interrupt() -> None:
        assert backend.started.acquire(timeout=30) and backend.started.acquire(timeout=30)
        signal.raise_signal(signal.SIGINT)
        threading.Timer(0.3, gate.set).start()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        threading.Thread(target=interrupt).start()
        with pytest.raises(KeyboardInterrupt):
            run_batch(inp, out, client=client_for(backend), concurrency=2)
    finally:
        signal.signal(signal.SIGINT, previous)
        gate.set()
    assert len(read_output(out)) == 2
    assert len(backend.prompts) == 2


def test_an_output_that_is_not_a_batch_output_is_never_truncated(tmp_path: Path) -> None:
    """Pointing -o at some other file is refused, and the file stays as it was."""
    inp = write_prompts(tmp_path / "in.jsonl", ["a"])
    notes = tmp_path / "notes.txt"
    notes.write_text("my notes\nmore notes\n")
    with pytest.raises(BatchFileError, match="not a batch output record"):
        run_batch(inp, notes, client=client_for(EchoBackend()))
    assert notes.read_text() == "my notes\nmore notes\n"
    with pytest.raises(BatchFileError, match="is the input file"):
        run_batch(inp, inp, client=client_for(EchoBackend()))
    assert (tmp_path / "in.jsonl").read_text().count("\n") == 1


def test_zero_filled_tail_after_a_crash_is_cut(tmp_path: Path) -> None:
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b"])
    out = tmp_path / "out.jsonl"
    run_batch(inp, out, client=client_for(EchoBackend()))
    first = out.read_bytes().splitlines(keepends=True)[0]
    out.write_bytes(first + b"\x00" * 300 + b"\n" + b"\x00" * 40)
    again = EchoBackend()
    summary = run_batch(inp, out, client=client_for(again))
    assert summary.skipped == 1 and len(again.prompts) == 1
    assert len(read_output(out)) == 2


def test_a_client_without_a_model_asks_the_server_only_when_a_line_needs_one(
    tmp_path: Path,
) -> None:
    class Finder:
        provider = EchoBackend()
        model = None
        asked = 0

        def resolved_model(self) -> str:
            self.asked += 1
            return "found"

    with_models = write_prompts(tmp_path / "a.jsonl", ["x"])
    client = Finder()
    run_batch(with_models, tmp_path / "a.out", client=client)
    assert client.asked == 0
    line = chat_line("b", "y")
    del line["body"]["model"]
    run_batch(write_lines(tmp_path / "b.jsonl", [line]), tmp_path / "b.out", client=client)
    assert client.asked == 1
    assert read_output(tmp_path / "b.out")[0]["response"]["body"]["model"] == "found"
