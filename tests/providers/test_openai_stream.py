"""OpenAICompatibleProvider streaming over a real loopback socket: transcripts and every quirk.

Each test replays a hand-written SSE transcript (one HTTP chunk per event) from the raw-socket
server of ``transport_support`` and checks the events the provider yields, in particular that a
stream ends with exactly one ``FinishEvent`` or ``ErrorEvent``.
"""

from __future__ import annotations

import json
import threading
import time

import pytest
from support.openai_support import (
    CHAT,
    TIMINGS,
    WORDS,
    chunk,
    llamacpp_native_transcript,
    llamacpp_python_tools_transcript,
    parallel_tools_transcript,
    split,
    sse,
    text_transcript,
    tool_fragment,
    tools_chunk,
    usage_chunk,
)
from support.transport_support import chunked_head, send_chunk, serve, silent, stream_script

from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    Message,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
)


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


def run(chunks: list[bytes], *, then: str = "end", backend: str = "generic") -> list[ProviderEvent]:
    with serve({CHAT: stream_script(chunks, then=then)}) as server:
        provider = OpenAICompatibleProvider(base_url=server.url, backend=backend, retries=0)
        return list(provider.chat_stream(req()))


def terminal_count(events: list[ProviderEvent]) -> int:
    return sum(isinstance(e, FinishEvent | ErrorEvent) for e in events)


def text_of(events: list[ProviderEvent]) -> str:
    return "".join(e.value for e in events if isinstance(e, TextEvent))


def test_text_stream_with_usage_chunk() -> None:
    """Text deltas arrive in order; the usage chunk with empty choices lands on the finish."""
    events = run(text_transcript())
    assert text_of(events) == "".join(WORDS)
    assert terminal_count(events) == 1
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.reason == "stop"
    assert finish.usage is not None
    assert (finish.usage.prompt_tokens, finish.usage.completion_tokens) == (14, 9)
    assert finish.usage.total_tokens == 23


def test_request_body_streams_with_include_usage() -> None:
    with serve({CHAT: stream_script(text_transcript())}) as server:
        provider = OpenAICompatibleProvider(base_url=server.url + "/v1", retries=0)
        list(provider.chat_stream(req()))
        sent = server.requests[0]
    body = json.loads(sent.body)
    assert sent.path == CHAT
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "authorization" not in sent.headers  # no key configured


def test_llamacpp_native_pings_usage_and_timings() -> None:
    """Comment pings are ignored; llama.cpp's timings are kept in Usage.extra."""
    events = run(llamacpp_native_transcript(), backend="llamacpp")
    assert text_of(events) == "Hello! How can I help?"
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.usage is not None
    assert finish.usage.prompt_tokens == 26
    assert finish.usage.extra["timings"] == TIMINGS


def test_parallel_tool_calls_assembled_before_finish() -> None:
    events = run(parallel_tools_transcript())
    calls = [e.value for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.name) for c in calls] == [
        ("call_A1", "get_weather"),
        ("call_B2", "get_stock_price"),
    ]
    assert calls[0].args == {"city": "Edinburgh", "country": "GB", "units": "c"}
    assert calls[1].arguments == '{"ticker": "AAPL", "exchange": "NASDAQ"}'
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "tool"
    assert isinstance(events[-2], ToolCallEvent)
    assert events[-1].usage is not None and events[-1].usage.completion_tokens == 47


def test_llamacpp_python_repeats_id_and_name_in_every_fragment() -> None:
    events = run(llamacpp_python_tools_transcript(), backend="llamacpp")
    calls = [e.value for e in events if isinstance(e, ToolCallEvent)]
    assert len(calls) == 1
    assert calls[0].name == "get_weather"
    assert calls[0].id == "call__0_get_weather_cmpl-1b2c"
    assert calls[0].args == {"city": "Oslo"}
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "tool"


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        pytest.param(
            [
                tools_chunk(tool_fragment(id="c1", name="f", args='{"a":')),
                tools_chunk(tool_fragment(args=" 1}")),
            ],
            [("c1", "f", {"a": 1})],
            id="missing-index",
        ),
        pytest.param(
            [
                tools_chunk(tool_fragment(0, id="c1", name="f", args='{"a": 1}')),
                tools_chunk(tool_fragment(0, id="c2", name="g", args='{"b": 2}')),
            ],
            [("c1", "f", {"a": 1}), ("c2", "g", {"b": 2})],
            id="index-reused-for-two-ids",
        ),
        pytest.param(
            [tools_chunk(tool_fragment(0, id="c1", name="f", args='{"a": [1, 2]}'))],
            [("c1", "f", {"a": [1, 2]})],
            id="whole-call-in-one-chunk",
        ),
        pytest.param(
            [tools_chunk(tool_fragment(0, id="c1", name="f", args={"a": 1}))],
            [("c1", "f", {"a": 1})],
            id="arguments-as-object",
        ),
        pytest.param(
            [
                chunk({"function_call": {"name": "f", "arguments": '{"a"'}}),
                chunk({"function_call": {"arguments": ": 1}"}}),
            ],
            [(None, "f", {"a": 1})],
            id="legacy-function-call",
        ),
    ],
)
def test_tool_call_quirks(
    objs: list[dict[str, object]], expected: list[tuple[object, ...]]
) -> None:
    """Every known fragment quirk assembles into complete calls; "stop" becomes "tool"."""
    events = run(sse([*objs, chunk({}, "stop")]))
    calls = [e.value for e in events if isinstance(e, ToolCallEvent)]
    got = [(c.id if expected[i][0] else None, c.name, c.args) for i, c in enumerate(calls)]
    assert got == expected
    assert all(c.id for c in calls)  # generated where the server sent none
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "tool"
    assert terminal_count(events) == 1


def test_unparseable_arguments_do_not_crash() -> None:
    events = run(
        sse(
            [
                tools_chunk(tool_fragment(0, id="c", name="f", args='{"a": ')),
                chunk({}, "tool_calls"),
            ]
        )
    )
    call = next(e.value for e in events if isinstance(e, ToolCallEvent))
    assert call.args == {} and call.arguments == '{"a": '


def test_reasoning_under_either_name_is_thinking() -> None:
    objs = [
        chunk({"reasoning_content": "First,"}),
        chunk({"reasoning": " think."}),
        chunk({"reasoning": " Then", "content": "Answer"}),
        chunk({"content": "!"}, "stop"),
    ]
    events = run(sse(objs))
    thinking = "".join(e.value for e in events if isinstance(e, ThinkingEvent))
    assert thinking == "First, think. Then"
    assert text_of(events) == "Answer!"
    kinds = [type(e).__name__ for e in events]
    assert kinds.index("ThinkingEvent") < kinds.index("TextEvent")


def test_error_object_mid_stream_is_one_error_event() -> None:
    objs: list[object] = [chunk({"content": "Par"}), chunk({"content": "tial"})]
    objs.append(
        {"error": {"message": "CUDA out of memory", "type": "InternalServerError", "code": 500}}
    )
    events = run(sse(objs))  # type: ignore[arg-type]
    assert text_of(events) == "Partial"
    assert terminal_count(events) == 1
    err = events[-1]
    assert isinstance(err, ErrorEvent)
    assert err.error.code == "LLM_BAD_RESPONSE"
    assert "CUDA out of memory" in err.error.message


def test_truncated_stream_keeps_text_and_errors() -> None:
    """No [DONE] and no finish_reason: the answer was cut off → ErrorEvent, text kept."""
    events = run(sse([chunk({"content": "Hello"}), chunk({"content": " wor"})], done=False))
    assert text_of(events) == "Hello wor"
    assert isinstance(events[-1], ErrorEvent)
    assert events[-1].error.code == "LLM_BAD_RESPONSE"
    assert "truncated" in events[-1].error.message
    assert terminal_count(events) == 1


def test_dropped_connection_mid_stream_keeps_text() -> None:
    events = run(sse([chunk({"content": "Hello"})], done=False), then="close")
    assert text_of(events) == "Hello"
    assert isinstance(events[-1], ErrorEvent)
    assert terminal_count(events) == 1


def test_finish_reason_without_done_still_finishes() -> None:
    events = run(sse([chunk({"content": "Hi"}), chunk({}, "length")], done=False))
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "length"


def test_garbage_lines_are_skipped() -> None:
    events = run(sse(["not json", chunk({"content": "ok"}), "{bad", chunk({}, "stop")]))
    assert text_of(events) == "ok"
    assert isinstance(events[-1], FinishEvent)


def test_content_filter_reason() -> None:
    events = run(sse([chunk({}, "content_filter")]))
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "content_filter"


def test_crlf_framing() -> None:
    events = run(sse([chunk({"content": "a"}), chunk({}, "stop")], eol=b"\r\n"))
    assert text_of(events) == "a" and isinstance(events[-1], FinishEvent)


def test_http_error_before_stream_is_error_event() -> None:
    from support.openai_support import json_script

    answer = {
        "error": {"message": "The model `m` does not exist.", "type": "NotFoundError", "code": 404}
    }
    with serve({CHAT: json_script(answer, 404)}) as server:
        provider = OpenAICompatibleProvider(base_url=server.url, retries=0)
        events = list(provider.chat_stream(req()))
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert events[0].error.code == "MODEL_NOT_FOUND"
    assert "does not exist" in events[0].error.message


def test_cancel_while_server_is_silent_ends_promptly() -> None:
    """Setting cancel interrupts a read blocked on a silent server: FinishEvent("cancelled")."""

    def script(client, request):  # type: ignore[no-untyped-def]
        chunked_head(client)
        send_chunk(client, sse([chunk({"content": "Once"})], done=False)[0])
        request.stop.wait(30)

    with serve({CHAT: script}) as server:
        provider = OpenAICompatibleProvider(base_url=server.url, retries=0)
        cancel = threading.Event()
        events: list[ProviderEvent] = []
        started = 0.0
        for event in provider.chat_stream(req(cancel=cancel)):
            events.append(event)
            if isinstance(event, TextEvent):
                started = time.monotonic()
                threading.Timer(0.05, cancel.set).start()
        elapsed = time.monotonic() - started
    assert text_of(events) == "Once"
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "cancelled"
    assert terminal_count(events) == 1
    assert elapsed < 2.0


def test_cancel_before_request_sends_nothing() -> None:
    with serve({CHAT: silent}) as server:
        provider = OpenAICompatibleProvider(base_url=server.url, retries=0)
        cancel = threading.Event()
        cancel.set()
        events = list(provider.chat_stream(req(cancel=cancel)))
        assert server.requests == []
    assert events == [FinishEvent("cancelled")]


def test_consumer_break_releases_the_connection() -> None:
    """Closing the generator early closes the response; the server sees the client go."""
    chunks = sse([chunk({"content": f"w{i} "}) for i in range(200)])
    with serve({CHAT: stream_script(chunks, delay=0.005)}) as server:
        provider = OpenAICompatibleProvider(base_url=server.url, retries=0)
        stream = provider.chat_stream(req())
        first = next(stream)
        stream.close()
        assert isinstance(first, TextEvent)
        # The provider is immediately usable again on a fresh connection.
        server.scripts[CHAT] = stream_script(text_transcript())
        events = list(provider.chat_stream(req()))
    assert isinstance(events[-1], FinishEvent)


def test_usage_absent_or_null_on_normal_chunks() -> None:
    objs = [
        chunk({"content": "a"}, usage=None),
        chunk({"content": "b"}),
        chunk({}, "stop"),
        usage_chunk(3, 2),
    ]
    events = run(sse(objs))
    assert text_of(events) == "ab"
    assert isinstance(events[-1], FinishEvent) and events[-1].usage is not None
    assert events[-1].usage.total_tokens == 5


def test_fragments_split_anywhere_assemble_the_same() -> None:
    args = '{"q": "caf\\u00e9 \\"quoted\\"", "n": [1, 2, {"x": null}]}'
    for size in (1, 2, 3, 7, len(args)):
        objs = [tools_chunk(tool_fragment(0, id="c", name="search", args=""))]
        objs += [tools_chunk(tool_fragment(0, args=p)) for p in split(args, size)]
        objs.append(chunk({}, "tool_calls"))
        events = run(sse(objs))
        call = next(e.value for e in events if isinstance(e, ToolCallEvent))
        assert call.arguments == args
        assert call.args == {"q": 'café "quoted"', "n": [1, 2, {"x": None}]}
