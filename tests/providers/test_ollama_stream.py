"""LocalProvider over a real loopback socket: full NDJSON transcripts, faults, cancellation, pull.

Each test starts its own server (``tests/support/ollama_support.py``) that replays hand-written
transcripts one HTTP chunk per line (or split anywhere), then ends, hangs or drops the
connection. Time bounds are generous upper limits only.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Iterator

import pytest
from support.ollama_support import (
    ANSWER,
    PULL_TOTAL,
    TEXT_WORDS,
    THINKING,
    OllamaServer,
    error_midstream_transcript,
    json_answer,
    lines,
    pull_error_transcript,
    pull_transcript,
    refuse_port,
    serve,
    stream,
    text_transcript,
    thinking_tools_transcript,
    thinking_transcript,
    tool_call_transcript,
)

from ollm_lite.errors import BadResponse, Cancelled, ModelNotFound
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    GenerationOptions,
    Message,
    ProviderEvent,
    ProviderRequest,
    PullProgress,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
    Usage,
)

CHAT = ("POST", "/api/chat")


def request(model: str = "llama3.2", **kw: object) -> ProviderRequest:
    return ProviderRequest(model, [Message.user("Why is the sky blue?")], **kw)  # type: ignore[arg-type]


@pytest.fixture
def running() -> Iterator[dict[tuple[str, str], object]]:
    """Routes to fill in; the server is started lazily by ``provider_for``."""
    yield {}


def provider_for(server: OllamaServer, **kw: object) -> LocalProvider:
    return LocalProvider(base_url=server.url, retries=0, **kw)  # type: ignore[arg-type]


def terminal_count(events: list[ProviderEvent]) -> int:
    return sum(isinstance(e, FinishEvent | ErrorEvent) for e in events)


# --------------------------------------------------------------------------- transcripts


def test_text_transcript() -> None:
    """Every content chunk becomes a TextEvent in order; the final chunk gives stop + usage."""
    with serve({CHAT: stream(text_transcript())}) as server:
        events = list(provider_for(server).chat_stream(request()))
        sent = server.seen[0]
    assert events[:-1] == [TextEvent(w) for w in TEXT_WORDS]
    assert events[-1] == FinishEvent(
        "stop",
        Usage(
            31,
            30,
            61,
            {
                "total_duration": 498215833,
                "load_duration": 25617667,
                "prompt_eval_duration": 61849250,
                "eval_duration": 409442375,
            },
        ),
    )
    assert sent.method == "POST" and sent.path == "/api/chat"
    assert sent.headers["content-type"].startswith("application/json")
    assert "authorization" not in sent.headers
    assert sent.json == {
        "model": "llama3.2",
        "messages": [{"role": "user", "content": "Why is the sky blue?"}],
        "stream": True,
        "options": {},
    }


def test_thinking_transcript_keeps_thinking_apart() -> None:
    """message.thinking arrives as ThinkingEvents, never inside the answer text."""
    with serve({CHAT: stream(thinking_transcript())}) as server:
        p = provider_for(server)
        events = list(p.chat_stream(request("qwen3:8b")))
        result = p.chat(request("qwen3:8b"))
    thinking = [e.value for e in events if isinstance(e, ThinkingEvent)]
    text = [e.value for e in events if isinstance(e, TextEvent)]
    assert thinking == THINKING and text == ANSWER
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextEvent))
    assert all(isinstance(e, ThinkingEvent) for e in events[:first_text])
    assert events[-1] == FinishEvent("stop", Usage(18, 34, 52, {}))
    # chat() asks for stream: false; a server (or proxy) that streams anyway is folded too
    assert (result.thinking, result.content) == ("".join(THINKING), "".join(ANSWER))
    assert result.finish_reason == "stop"


def test_tool_call_transcript() -> None:
    """A whole call in one chunk becomes one ToolCallEvent; the turn finishes with 'tool'."""
    weather = ToolSchema("get_weather", "Weather", {"type": "object", "properties": {}})
    with serve({CHAT: stream(tool_call_transcript())}) as server:
        events = list(provider_for(server).chat_stream(request(tools=[weather])))
        body = server.seen[0].json
    assert events[0] == ToolCallEvent(
        ToolCall("call_x8fb2k1q", "get_weather", {"city": "Tokyo"}, '{"city": "Tokyo"}')
    )
    assert events[1] == FinishEvent(
        "tool",
        Usage(
            169,
            15,
            184,
            {
                "total_duration": 182242375,
                "load_duration": 41295167,
                "prompt_eval_duration": 24573166,
                "eval_duration": 115959084,
            },
        ),
    )
    assert len(events) == 2
    assert body["tools"][0]["function"]["name"] == "get_weather"


def test_parallel_calls_after_thinking_get_unique_ids() -> None:
    """Calls in successive chunks accumulate; one without an id gets a fresh call_ id."""
    with serve({CHAT: stream(thinking_tools_transcript())}) as server:
        events = list(provider_for(server).chat_stream(request("qwen3:8b")))
    calls = [e.value for e in events if isinstance(e, ToolCallEvent)]
    assert [c.name for c in calls] == ["get_temperature", "get_conditions"]
    assert calls[0].id == "call_0b9t1w3m"
    assert re.fullmatch(r"call_[a-z0-9]{8}", calls[1].id) and calls[1].id != calls[0].id
    assert all(c.args == {"city": "New York"} for c in calls)
    assert [e.value for e in events if isinstance(e, ThinkingEvent)] == THINKING
    assert not any(isinstance(e, TextEvent) for e in events)
    assert events[-1].reason == "tool"  # type: ignore[union-attr]


def test_non_streaming_chat_over_socket() -> None:
    """chat() sends stream false and returns the server's single answer."""
    answer = {
        "model": "llama3.2",
        "message": {"role": "assistant", "content": "Blue light scatters."},
        "done": True,
        "done_reason": "stop",
        "prompt_eval_count": 12,
        "eval_count": 4,
    }
    with serve({CHAT: json_answer(answer)}) as server:
        result = provider_for(server).chat(request())
        assert server.seen[0].json["stream"] is False
    assert (result.content, result.finish_reason) == ("Blue light scatters.", "stop")
    assert result.usage == Usage(12, 4, 16, {})


# --------------------------------------------------------------------------- failures


def test_error_midstream_keeps_text_and_ends_once() -> None:
    """An error line under HTTP 200: the text so far, then one ErrorEvent and no finish."""
    with serve({CHAT: stream(error_midstream_transcript())}) as server:
        events = list(provider_for(server).chat_stream(request()))
    assert events[:-1] == [TextEvent(t) for t in (" Yes", ".", " I", " can")]
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.error.code == "LLM_BAD_RESPONSE"
    assert "an error was encountered while running the model" in last.error.message
    assert last.error.details and last.error.details["model"] == "llama3.2"
    assert terminal_count(events) == 1


@pytest.mark.parametrize("then", ["end", "drop"])
def test_truncated_stream_is_stream_ended_early(then: str) -> None:
    """No `done: true` line (clean end or dropped socket): partial text, then 'ended early'."""
    chunks = text_transcript()[:4]
    with serve({CHAT: stream(chunks, then=then)}) as server:  # type: ignore[arg-type]
        events = list(provider_for(server).chat_stream(request()))
    assert events[:-1] == [TextEvent(w) for w in TEXT_WORDS[:4]]
    last = events[-1]
    assert isinstance(last, ErrorEvent) and last.error.code == "LLM_BAD_RESPONSE"
    assert "ended early" in last.error.message
    assert terminal_count(events) == 1


def test_unterminated_last_line_still_counts() -> None:
    """A final `done` line without its newline is still read (the decoder flushes it)."""
    chunks = text_transcript(words=["a"])
    chunks[-1] = chunks[-1].rstrip(b"\n")
    with serve({CHAT: stream(chunks)}) as server:
        events = list(provider_for(server).chat_stream(request()))
    assert [type(e) for e in events] == [TextEvent, FinishEvent]


def test_garbage_lines_are_skipped() -> None:
    """Lines that are not JSON objects (a proxy's HTML, a bare number) are skipped."""
    words = text_transcript(words=["a", "b"])
    chunks = [words[0], b"<html>oops</html>\n", b"42\n", *words[1:]]
    with serve({CHAT: stream(chunks)}) as server:
        events = list(provider_for(server).chat_stream(request()))
    assert events[:2] == [TextEvent("a"), TextEvent("b")]
    assert isinstance(events[2], FinishEvent) and len(events) == 3


def test_garbage_only_stream_is_bad_response() -> None:
    """A 200 body with no Ollama line at all ends with LLM_BAD_RESPONSE naming the bad lines."""
    chunks = [b"<html>\n", b"<body>Bad gateway</body>\n", b"</html>\n"]
    with serve({CHAT: stream(chunks)}) as server:
        events = list(provider_for(server).chat_stream(request()))
    (event,) = events
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_BAD_RESPONSE"
    assert "ended early" in event.error.message and "3 line(s)" in event.error.message


def test_lines_split_anywhere_give_the_same_events() -> None:
    """Chunk boundaries inside lines and inside a multi-byte character change nothing."""
    whole = b"".join(thinking_transcript())
    at = whole.index("×".encode()) + 1  # noqa: RUF001 - split inside the 2-byte character
    pieces = [whole[:7], whole[7:at], whole[at : at + 3], whole[at + 3 :]]
    with serve({CHAT: stream(thinking_transcript())}) as a, serve({CHAT: stream(pieces)}) as b:
        assert list(provider_for(a).chat_stream(request())) == list(
            provider_for(b).chat_stream(request())
        )


def test_unknown_model_404() -> None:
    """HTTP 404 before streaming: one MODEL_NOT_FOUND event with the pull hint."""
    routes = {CHAT: json_answer({"error": "model 'llama9' not found"}, 404)}
    with serve(routes) as server:  # type: ignore[arg-type]
        events = list(provider_for(server).chat_stream(request("llama9")))
    (event,) = events
    assert isinstance(event, ErrorEvent) and event.error.code == "MODEL_NOT_FOUND"
    assert "`ollm-lite models pull llama9`" in event.error.message


def test_connection_refused() -> None:
    """Nothing listening: CONNECTION_FAILED naming the URL and how to start Ollama."""
    url = f"http://127.0.0.1:{refuse_port()}"
    events = list(LocalProvider(base_url=url, retries=0).chat_stream(request()))
    (event,) = events
    assert isinstance(event, ErrorEvent) and event.error.code == "CONNECTION_FAILED"
    assert url in event.error.message
    assert "start Ollama with `ollama serve`" in event.error.message


def test_env_host_reaches_the_server(monkeypatch: pytest.MonkeyPatch) -> None:
    """OLLAMA_HOST as ':port' and '0.0.0.0:port' both reach a server on 127.0.0.1."""
    with serve({CHAT: stream(text_transcript(words=["x"]))}) as server:
        for value in (f":{server.port}", f"0.0.0.0:{server.port}"):
            monkeypatch.setenv("OLLAMA_HOST", value)
            events = list(LocalProvider(retries=0).chat_stream(request()))
            assert events[-1] == FinishEvent("stop", events[-1].usage)  # type: ignore[union-attr]


# --------------------------------------------------------------------------- cancellation, close


def test_cancel_interrupts_a_silent_server() -> None:
    """Setting cancel while the server is silent ends the stream with 'cancelled' within 2 s."""
    cancel = threading.Event()
    chunks = text_transcript()[:2]
    with serve({CHAT: stream(chunks, then="hang")}) as server:
        gen = provider_for(server).chat_stream(request(cancel=cancel))
        first = next(gen)
        timer = threading.Timer(0.2, cancel.set)
        timer.start()
        t0 = time.monotonic()
        rest = list(gen)
        elapsed = time.monotonic() - t0
        assert server.disconnected.wait(2)
    assert first == TextEvent(TEXT_WORDS[0])
    assert rest[-1] == FinishEvent("cancelled") and terminal_count(rest) == 1
    assert elapsed < 2


def test_cancel_before_sending() -> None:
    """A cancel already set sends nothing and finishes with 'cancelled'."""
    cancel = threading.Event()
    cancel.set()
    with serve({CHAT: stream(text_transcript())}) as server:
        events = list(provider_for(server).chat_stream(request(cancel=cancel)))
        assert server.seen == []
    assert events == [FinishEvent("cancelled")]


def test_consumer_break_releases_the_connection() -> None:
    """Closing the generator early closes the socket (which makes Ollama stop generating)."""
    with serve({CHAT: stream(text_transcript()[:3], then="hang")}) as server:
        gen = provider_for(server).chat_stream(request())
        assert next(gen) == TextEvent(TEXT_WORDS[0])
        gen.close()
        assert server.disconnected.wait(2)


def test_total_deadline() -> None:
    """request.timeout bounds the whole stream: LLM_TIMEOUT, partial text kept."""
    with serve({CHAT: stream(text_transcript()[:2], then="hang")}) as server:
        t0 = time.monotonic()
        events = list(provider_for(server).chat_stream(request(timeout=0.5)))
    assert events[:2] == [TextEvent(w) for w in TEXT_WORDS[:2]]
    assert isinstance(events[-1], ErrorEvent) and events[-1].error.code == "LLM_TIMEOUT"
    assert time.monotonic() - t0 < 3


def test_options_reach_the_server() -> None:
    """Generation options and extra_body arrive in the body Ollama reads."""
    opts = GenerationOptions(temperature=0.1, max_tokens=3, extra_body={"keep_alive": 0})
    with serve({CHAT: stream(text_transcript(words=["x"]))}) as server:
        list(provider_for(server, num_ctx=2048).chat_stream(request(options=opts)))
        body = server.seen[0].json
    assert body["options"] == {"temperature": 0.1, "num_predict": 3, "num_ctx": 2048}
    assert body["keep_alive"] == 0


# --------------------------------------------------------------------------- pull

PULL = ("POST", "/api/pull")


def test_pull_progress() -> None:
    """Every progress line reaches on_progress in order, the last one is 'success'."""
    seen: list[PullProgress] = []
    with serve({PULL: stream(pull_transcript())}) as server:
        provider_for(server).pull_model("llama3.2", on_progress=seen.append)
        assert server.seen[0].json == {"model": "llama3.2", "stream": True}
    assert seen[0] == PullProgress("pulling manifest")
    assert seen[1].total is None and seen[1].completed is None and seen[1].digest
    assert seen[2].total == PULL_TOTAL and seen[2].completed is None
    layer = [p.completed for p in seen if p.completed is not None]
    assert layer == sorted(layer) and layer[-1] == PULL_TOTAL
    assert seen[-1].status == "success"
    assert [p.status for p in seen[-3:]] == [
        "verifying sha256 digest",
        "writing manifest",
        "success",
    ]


def test_pull_without_callback() -> None:
    """on_progress is optional."""
    with serve({PULL: stream(pull_transcript())}) as server:
        provider_for(server).pull_model("llama3.2")


def test_pull_error_line_raises_model_not_found() -> None:
    """A registry miss after 'pulling manifest' raises MODEL_NOT_FOUND with the server's words."""
    seen: list[PullProgress] = []
    with (
        serve({PULL: stream(pull_error_transcript())}) as server,
        pytest.raises(ModelNotFound) as info,
    ):
        provider_for(server).pull_model("nope-model", on_progress=seen.append)
    assert [p.status for p in seen] == ["pulling manifest"]
    assert "file does not exist" in info.value.message and info.value.model == "nope-model"


def test_pull_other_error_line() -> None:
    """Another error line raises LLM_BAD_RESPONSE carrying the server's message."""
    chunks = lines([{"status": "pulling manifest"}, {"error": "max retries exceeded: EOF"}])
    with serve({PULL: stream(chunks)}) as server, pytest.raises(BadResponse) as info:
        provider_for(server).pull_model("llama3.2")
    assert "max retries exceeded" in info.value.message


def test_pull_ended_before_success() -> None:
    """A pull stream that stops without 'success' is LLM_BAD_RESPONSE, not silent success."""
    with (
        serve({PULL: stream(pull_transcript()[:4], then="drop")}) as server,
        pytest.raises(BadResponse, match="before it reported success"),
    ):
        provider_for(server).pull_model("llama3.2")


def test_pull_cancel() -> None:
    """Setting cancel mid-download raises CANCELLED within 2 s and drops the connection."""
    cancel = threading.Event()
    seen: list[PullProgress] = []

    def on_progress(p: PullProgress) -> None:
        seen.append(p)
        if len(seen) == 3:
            threading.Timer(0.1, cancel.set).start()

    with serve({PULL: stream(pull_transcript()[:5], then="hang")}) as server:
        t0 = time.monotonic()
        with pytest.raises(Cancelled):
            provider_for(server).pull_model("llama3.2", on_progress=on_progress, cancel=cancel)
        assert time.monotonic() - t0 < 2
        assert server.disconnected.wait(2)
    assert len(seen) == 5


def test_pull_callback_exception_propagates_and_closes() -> None:
    """An exception from on_progress stops the pull, propagates, and closes the connection."""

    def boom(p: PullProgress) -> None:
        raise KeyError("stop")

    with serve({PULL: stream(pull_transcript()[:3], then="hang")}) as server:
        with pytest.raises(KeyError):
            provider_for(server).pull_model("llama3.2", on_progress=boom)
        assert server.disconnected.wait(2)


# --------------------------------------------------------------------------- secrets

CANARY = "sk-canary-12345"


def test_key_never_logged_over_socket(caplog: pytest.LogCaptureFixture) -> None:
    """At DEBUG, with a key set, no log record and no event contains the key."""
    caplog.set_level(logging.DEBUG)
    routes = {CHAT: json_answer({"error": f"bad key {CANARY}"}, 401)}
    with serve(routes) as server:  # type: ignore[arg-type]
        p = LocalProvider(base_url=server.url, api_key=CANARY, retries=0)
        events = list(p.chat_stream(request()))
        assert server.seen[0].headers["authorization"] == f"Bearer {CANARY}"
    (event,) = events
    assert isinstance(event, ErrorEvent) and event.error.code == "LLM_AUTH_FAILED"
    dumped = json.dumps([event.error.message, event.error.details, repr(p)])
    assert CANARY not in dumped
    assert all(CANARY not in r.getMessage() for r in caplog.records)
