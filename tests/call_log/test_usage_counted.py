"""Every logged answer has its tokens: a server that streams without usage (llama-cpp-python,
LM Studio) is counted with its tokenizer where it has one, else estimated, and marked
``usage.extra["estimated"]``; ``logs stats`` marks sums that include such figures with ``~``."""

from __future__ import annotations

import json
import math
import socket
from pathlib import Path

import pytest
from support.log_support import cli, logged, logging_client
from support.openai_support import CHAT, WORDS, text_transcript
from support.transport_support import Request, respond, serve, stream_script

import ollm_lite
from ollm_lite import FinishEvent, ScriptedProvider, TextEvent, Usage
from ollm_lite.call_log import open_log

ANSWER = "".join(WORDS)  # "The sky is blue because of Rayleigh scattering."
PROMPT = "Why is the sky blue?"


def _words(client: socket.socket, req: Request) -> None:
    """llama-cpp-python's ``POST /extras/tokenize/count``: here one token per word."""
    respond(client, 200, json.dumps({"count": len(req.json["input"].split())}).encode())


def _hangs_on_the_answer(client: socket.socket, req: Request) -> None:
    """A tokenizer that answers for the prompt and never for the prompt with the answer."""
    if "Rayleigh" in req.json["input"]:
        req.stop.wait(30)
        return
    _words(client, req)


def _streams_without_usage() -> dict[object, object]:
    return {("POST", CHAT): stream_script(text_transcript(usage=False))}


def test_a_stream_without_usage_is_counted_by_the_servers_tokenizer(tmp_path: Path) -> None:
    """llama-cpp-python ignores ``include_usage``: its tokenizer counts the prompt, and the
    prompt with the answer minus the prompt is the answer."""
    path = tmp_path / "logs.db"
    routes = {**_streams_without_usage(), ("POST", "/extras/tokenize/count"): _words}
    with serve(routes) as server:
        llm = ollm_lite.connect("llamacpp", host=server.url, model="m", log=str(path))
        assert "".join(llm.stream(PROMPT)) == ANSWER
        llm.close()
    [call] = logged(path)
    assert call.usage is not None
    assert (call.usage.prompt_tokens, call.usage.completion_tokens) == (5, 8)
    assert call.usage.total_tokens == 13 and call.usage.extra["estimated"] is True
    assert call.turns[0]["answer"]["usage"]["extra"] == {"estimated": True}


def test_without_a_tokenizer_the_stream_is_estimated(tmp_path: Path) -> None:
    """A server with no tokenizer route: ceil(characters / 4) of the prompt and the answer."""
    path = tmp_path / "logs.db"
    with serve(_streams_without_usage()) as server:
        llm = ollm_lite.connect("openai-compatible", host=server.url, model="m", log=str(path))
        assert llm.ask(PROMPT) == ANSWER
        llm.close()
    [call] = logged(path)
    assert call.usage is not None and call.usage.extra == {"estimated": True}
    expected = (math.ceil(len(PROMPT) / 4), math.ceil(len(ANSWER) / 4))
    assert (call.usage.prompt_tokens, call.usage.completion_tokens) == expected
    with open_log(path) as log:
        [stats] = log.stats()
    assert (stats.prompt_tokens, stats.completion_tokens) == expected


def test_usage_the_server_reported_is_kept_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    with serve({("POST", CHAT): stream_script(text_transcript())}) as server:
        llm = ollm_lite.connect("openai-compatible", host=server.url, model="m", log=str(path))
        llm.ask(PROMPT)
        llm.close()
    [call] = logged(path)
    assert call.usage is not None and (call.usage.prompt_tokens, call.usage.completion_tokens) == (
        14,
        9,
    )
    assert "estimated" not in call.usage.extra


def test_a_tokenizer_that_hangs_leaves_the_call_as_it_was(tmp_path: Path) -> None:
    """The look-up gets what is left of the call's deadline; then the estimate stands in and
    the call still returns its answer, logged."""
    path = tmp_path / "logs.db"
    routes = {
        **_streams_without_usage(),
        ("POST", "/extras/tokenize/count"): _hangs_on_the_answer,
    }
    with serve(routes) as server:
        llm = ollm_lite.connect("llamacpp", host=server.url, model="m", log=str(path))
        reply = llm.run(PROMPT, timeout=1.5)
        llm.close()
        asked = [r.json["input"] for r in server.requests if r.path.startswith("/extras")]
    assert reply.error is None and reply.text == ANSWER
    assert any("Rayleigh" in text for text in asked)  # the look-up was made, and given up
    [call] = logged(path)
    assert call.finish == "complete" and call.usage is not None
    assert call.usage.completion_tokens == math.ceil(len(ANSWER) / 4)
    assert call.usage.extra["estimated"] is True


def test_a_failing_tokenizer_falls_back_to_the_estimate(tmp_path: Path) -> None:
    def broken(request: object) -> int:
        raise RuntimeError("tokenizer down")

    path = tmp_path / "logs.db"
    provider = ScriptedProvider(["Paris."], token_counter=broken)
    llm = ollm_lite.connect(provider, model="m", log=str(path))
    assert llm.ask("Capital of France?") == "Paris."
    [call] = logged(path)
    assert call.usage == Usage(5, 2, 7, {"estimated": True})


def test_a_stream_closed_early_is_estimated_without_asking_the_tokenizer(tmp_path: Path) -> None:
    asked: list[object] = []

    def counter(request: object) -> int:
        asked.append(request)
        return 3

    path = tmp_path / "logs.db"
    provider = ScriptedProvider(
        [[TextEvent("Once upon "), TextEvent("a time")]], token_counter=counter
    )
    llm = ollm_lite.connect(provider, model="m", log=str(path))
    pieces = llm.stream("Tell a story")
    assert next(pieces) == "Once upon "
    before = len(asked)  # the context check before the request counts too
    pieces.close()
    assert len(asked) == before
    [call] = logged(path)
    assert call.finish == "cancelled"
    assert call.usage == Usage(3, 3, 6, {"estimated": True})


def test_tool_turns_are_counted_each_and_summed(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    call = ollm_lite.ToolCall.from_arguments("c1", "lookup", {"city": "Oslo"})
    llm, _ = logging_client(
        path,
        [ollm_lite.ToolCallEvent(call), FinishEvent("tool")],
        [TextEvent("Sunny."), FinishEvent("stop", Usage(30, 2, 32))],
    )

    def lookup(city: str) -> str:
        """The weather.

        Args:
            city: The city.
        """
        return "sunny"

    assert llm.run("Weather in Oslo?", tools=[lookup]).text == "Sunny."
    [logged_call] = logged(path)
    first = logged_call.turns[0]["answer"]["usage"]
    assert first["extra"] == {"estimated": True} and first["completion_tokens"] > 0
    assert "estimated" not in logged_call.turns[1]["answer"]["usage"]["extra"]
    assert logged_call.usage is not None and logged_call.usage.extra["estimated"] is True
    assert logged_call.usage.prompt_tokens == first["prompt_tokens"] + 30
    assert logged_call.usage.completion_tokens == first["completion_tokens"] + 2


def test_failed_and_cached_calls_add_no_estimate(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "Paris.", cache=True)
    llm.ask("Capital?")
    llm.ask("Capital?")  # from the log: nothing spent
    with pytest.raises(ollm_lite.OllmError):
        llm.ask("Another?")  # the script is exhausted: an error, no answer to count
    first, cached, failed = logged(path)
    assert first.usage is not None and first.usage.extra["estimated"] is True
    assert cached.cached and cached.usage is None
    assert failed.error_code is not None and failed.usage is None


def test_logs_stats_marks_sums_that_include_estimates(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, [TextEvent("Exact."), FinishEvent("stop", Usage(6, 2, 8))])
    llm.ask("Counted by the server?", model="exact")
    rough, _ = logging_client(path, "Estimated.")
    rough.ask("Counted by nobody?", model="rough")
    done = cli(tmp_path, path, "logs", "stats")
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()[1:]}
    assert rows["exact"][4:6] == ["6", "2"]
    assert rows["rough"][4] == "~5" and rows["rough"][5] == "~3"
    as_json = json.loads(cli(tmp_path, path, "logs", "stats", "--json").stdout)
    assert {s["key"]: s["prompt_tokens"] for s in as_json} == {"exact": 6, "rough": 5}
