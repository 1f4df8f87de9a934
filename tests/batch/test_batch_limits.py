"""Batch files read as streams of bounded lines, strict JSON in and out, and a run's objects.

Every line of a batch file, input or output, is at most ``MAX_LINE`` bytes (16 MiB): a longer
input line is refused by number, an answer that would make a longer output line is written
as the line's error. ``NaN`` and ``Infinity`` are not JSON, in either direction.
"""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from collections.abc import Iterator
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

from ollm_lite.batch import BatchFileError, run_batch
from ollm_lite.batch._format import MAX_LINE, encode_line, parse_input, success_line
from ollm_lite.batch._output import OutputFile
from ollm_lite.types import EmbeddingResult, FinishEvent, ProviderEvent, ProviderRequest, TextEvent

# --------------------------------------------------------------------------- the line limit


def _long_line(custom_id: str, size: int) -> str:
    """A valid chat line of about ``size`` bytes."""
    return json.dumps(chat_line(custom_id, "x" * size))


def test_an_input_line_over_the_limit_is_refused_by_number(tmp_path: Path) -> None:
    """A line one byte over the limit is a BatchFileError naming its line; nothing is sent."""
    inp = write_lines(tmp_path / "in.jsonl", [chat_line("a", "hi"), _long_line("b", MAX_LINE)])
    backend = EchoBackend()
    with pytest.raises(BatchFileError, match="line 2") as info:
        run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend))
    assert info.value.details["problems"] == [
        {"line": 2, "message": f"the line is longer than {MAX_LINE} bytes"}
    ]
    assert backend.prompts == []


def test_a_line_of_exactly_the_limit_is_read(tmp_path: Path) -> None:
    line = _long_line("b", 0)
    line = _long_line("b", MAX_LINE - len(line))
    assert len(line) == MAX_LINE
    (item,) = parse_input((line + "\n").encode())
    assert item.custom_id == "b"


def test_reading_a_huge_line_holds_one_line_at_most(tmp_path: Path) -> None:
    """A 64 MiB line is skipped as a stream: the reader never holds much more than the limit
    (reading it whole took four times the file)."""
    path = tmp_path / "in.jsonl"
    with path.open("wb") as f:
        f.write(b'{"custom_id": "a", "body": "')
        for _ in range(64):
            f.write(b"x" * (1 << 20))
        f.write(b'"}\n')
        f.write(json.dumps(chat_line("b", "hi")).encode() + b"\n")
    tracemalloc.start()
    try:
        with pytest.raises(BatchFileError, match="line 1"), path.open("rb") as f:
            parse_input(f, str(path))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < MAX_LINE * 3  # one line and its copies; the file is 64 MiB


def test_an_answer_too_long_for_a_line_is_written_as_the_lines_error(tmp_path: Path) -> None:
    """An answer that would make an output line over the limit becomes the line's error, so
    the output stays readable on resume; the next run skips the line as answered."""
    prompt = "y" * (MAX_LINE - 300)  # the input line fits; "echo: " + it in an output does not
    inp = write_lines(tmp_path / "in.jsonl", [chat_line("big", prompt), chat_line("s", "hi")])
    out = tmp_path / "out.jsonl"
    summary = run_batch(inp, out, client=client_for(EchoBackend()))
    assert (summary.done, summary.failed) == (1, 1)
    lines = read_output(out)
    (big,) = [x for x in lines if x["custom_id"] == "big"]
    assert big["response"] is None
    assert big["error"]["code"] == "LLM_BAD_RESPONSE"
    assert "line limit" in big["error"]["message"]
    assert all(len(line) <= MAX_LINE for line in out.read_bytes().splitlines())
    again = EchoBackend()
    assert run_batch(inp, out, client=client_for(again)).skipped == 2
    assert again.prompts == []


def test_an_output_line_over_the_limit_is_refused_on_resume_and_never_cut(
    tmp_path: Path,
) -> None:
    """A terminated output line longer than the limit is not ours: refused by number, kept."""
    inp = write_prompts(tmp_path / "in.jsonl", ["a"])
    out = tmp_path / "out.jsonl"
    data = b"x" * (MAX_LINE + 1) + b"\n"
    out.write_bytes(data)
    with pytest.raises(BatchFileError, match="line 1"):
        run_batch(inp, out, client=client_for(EchoBackend()))
    assert out.stat().st_size == len(data)


def test_a_torn_tail_over_the_limit_is_cut(tmp_path: Path) -> None:
    """An unterminated last line over the limit is a torn tail: cut, and its line runs."""
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b"])
    out = tmp_path / "out.jsonl"
    good = encode_line(success_line("c0", {"x": 1}))
    out.write_bytes(good + b"{" * (MAX_LINE + 5))
    backend = EchoBackend()
    summary = run_batch(inp, out, client=client_for(backend))
    assert (summary.skipped, summary.done) == (1, 1)
    assert backend.prompts == ["b"]
    assert out.read_bytes().startswith(good)


# --------------------------------------------------------------------------- strict JSON


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_an_input_line_with_nan_is_refused(tmp_path: Path, constant: str) -> None:
    """NaN and Infinity are not JSON: the line is refused by number, not sent on."""
    bad = json.dumps(chat_line("b", "hi")).replace('"model": "m"', f'"temperature": {constant}')
    inp = write_lines(tmp_path / "in.jsonl", [chat_line("a", "hi"), bad])
    backend = EchoBackend()
    with pytest.raises(BatchFileError, match="line 2"):
        run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend))
    assert backend.prompts == []


class NanBackend(EchoBackend):
    """Embeds every text as ``[nan, 1.0]`` (a server's answer holding NaN)."""

    def embed(self, texts: list[str], model: str | None = None) -> EmbeddingResult:
        return EmbeddingResult([[float("nan"), 1.0] for _ in texts], model or "e", 2)


def test_an_answer_holding_nan_is_written_as_the_lines_error(tmp_path: Path) -> None:
    """The writer does not raise a bare ValueError: the line's error is written instead, and
    the other lines are answered."""
    embed = {"custom_id": "e", "url": "/v1/embeddings", "body": {"model": "e", "input": "x"}}
    inp = write_lines(tmp_path / "in.jsonl", [embed, chat_line("c", "hi")])
    out = tmp_path / "out.jsonl"
    summary = run_batch(inp, out, client=client_for(NanBackend()))
    assert (summary.done, summary.failed) == (1, 1)
    (line,) = [x for x in read_output(out) if x["custom_id"] == "e"]
    assert line["error"]["code"] == "LLM_BAD_RESPONSE"
    assert "NaN" in line["error"]["message"]


# --------------------------------------------------------------------------- the caller's objects


class SlowBackend(EchoBackend):
    """Answers ``slow`` only once cancelled; every other prompt at once."""

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        text = request.messages[-1].text
        self.started.release()
        if text == "slow":
            assert request.cancel is not None
            request.cancel.wait(30)
            yield FinishEvent("cancelled")
            return
        yield TextEvent("ok")
        yield FinishEvent("stop")


def test_a_progress_callback_that_raises_leaves_the_callers_cancel_alone(tmp_path: Path) -> None:
    """Leaving early cancels the requests in flight through the run's own event: the caller's
    ``cancel`` is read, never set."""
    inp = write_prompts(tmp_path / "in.jsonl", ["slow", "fast"])
    backend = SlowBackend()
    caller_cancel = threading.Event()

    def progress(summary: object) -> None:
        raise RuntimeError("the caller's callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        run_batch(
            inp,
            tmp_path / "out.jsonl",
            client=client_for(backend),
            concurrency=2,
            cancel=caller_cancel,
            progress=progress,
        )
    assert not caller_cancel.is_set()


def test_the_callers_cancel_still_stops_the_run(tmp_path: Path) -> None:
    """Setting the caller's event interrupts the requests in flight (read through the run's)."""
    inp = write_prompts(tmp_path / "in.jsonl", ["slow"])
    backend = SlowBackend()
    cancel = threading.Event()
    threading.Thread(target=lambda: backend.started.acquire(timeout=30) and cancel.set()).start()
    summary = run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend), cancel=cancel)
    assert (summary.done, summary.failed) == (0, 0)


# --------------------------------------------------------------------------- the output's lock


def _output_with_a_failed_line(tmp_path: Path) -> tuple[Path, Path]:
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "fail b"])
    out = tmp_path / "out.jsonl"
    run_batch(inp, out, client=client_for(EchoBackend()))
    return inp, out


def test_retry_failed_leaves_no_moment_for_another_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """While --retry-failed replaces the output, another run trying to take it (just before
    and just after the new file takes the old one's name) is refused."""
    _, out = _output_with_a_failed_line(tmp_path)
    attempts: list[str] = []
    real_replace = os.replace

    def second_run() -> None:
        try:
            OutputFile.open(str(out))[0].close()
            attempts.append("taken")
        except BatchFileError:
            attempts.append("refused")

    def replace(src: str, dst: str) -> None:
        second_run()
        real_replace(src, dst)
        second_run()

    monkeypatch.setattr("ollm_lite.batch._output.os.replace", replace)
    first, resume = OutputFile.open(str(out), retry_failed=True)
    with first:
        assert attempts == ["refused", "refused"]
        assert resume.ids == {"c0"}
        second_run()
        assert attempts[-1] == "refused"
    second_run()
    assert attempts[-1] == "taken"


def test_a_run_that_opened_the_old_file_finds_the_new_one_locked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second run (another thread) opens the output's name, then the first run's rewrite
    replaces the file and lets go of the old one before the second run locks: the lock it gets
    on the old, nameless file must not count, and it is refused."""
    _, out = _output_with_a_failed_line(tmp_path)
    opened = threading.Event()
    replaced = threading.Event()
    real_open = os.open
    outcome: list[BaseException | str] = []

    def slow_open(path: str, flags: int, mode: int = 0o777) -> int:
        fd = real_open(path, flags, mode)
        if threading.current_thread().name == "second-run":
            opened.set()
            replaced.wait(30)
        return fd

    def second_run() -> None:
        try:
            OutputFile.open(str(out))[0].close()
            outcome.append("taken")
        except BaseException as exc:
            outcome.append(exc)

    monkeypatch.setattr("ollm_lite.batch._output.os.open", slow_open)
    thread = threading.Thread(target=second_run, name="second-run")
    thread.start()
    assert opened.wait(30)
    first, _ = OutputFile.open(str(out), retry_failed=True)
    with first:
        replaced.set()
        thread.join(30)
        assert not thread.is_alive()
        (result,) = outcome
        assert isinstance(result, BatchFileError), result
        first.append(success_line("c1", {}))
    assert sorted(x["custom_id"] for x in read_output(out)) == ["c0", "c1"]
