"""``AnthropicProvider`` against a loopback server: Anthropic's documented transcripts
(https://platform.claude.com/docs/en/build-with-claude/streaming), errors
(https://platform.claude.com/docs/en/api/errors), token counting, models and health."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.anthropic_support import (
    BASIC,
    MESSAGES,
    OVERLOADED,
    THINKING,
    THINKING_SIGNATURE,
    THINKING_TEXT,
    TOOL_ARGS,
    TOOL_USE,
    block_start,
    error_body,
    event,
    message_start,
    sse_of,
    stream,
    text_delta,
    whole_message,
)
from support.fault_server import sequence, status
from support.transport_support import Request, respond, serve, stream_script

from ollm_lite.errors import (
    AuthenticationError,
    HTTPStatusError,
    ModelNotFound,
    RateLimited,
    UnsupportedOperation,
)
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    GenerationOptions,
    Message,
    ProviderBlock,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    Usage,
)

KEY = "sk-ant-api03-SECRETSECRETSECRET"


def request(**kw: Any) -> ProviderRequest:
    return ProviderRequest("claude-opus-4-6", [Message.user("Hello")], **kw)


def run(chunks: list[bytes], *, then: str = "end", **kw: Any) -> tuple[list[Any], Request]:
    with serve({MESSAGES: stream_script(chunks, then=then)}) as server:
        provider = AnthropicProvider(base_url=server.url, retries=0, **kw)
        events = list(provider.chat_stream(request()))
        provider.close()
        return events, server.requests[0]


def merged(events: list[Any]) -> list[Any]:
    """Adjacent text and thinking pieces joined: what a stream and a whole answer share."""
    out: list[Any] = []
    for e in events:
        if out and type(e) is type(out[-1]) and isinstance(e, TextEvent | ThinkingEvent):
            out[-1] = type(e)(out[-1].value + e.value)
        else:
            out.append(e)
    return out


def test_basic_streaming_transcript() -> None:
    """The page's "Basic streaming request": two text deltas, end_turn, usage 25 + 15."""
    events, req = run(BASIC)
    assert events == [TextEvent("Hello"), TextEvent("!"), FinishEvent("stop", Usage(25, 15, 40))]
    assert req.path == "/v1/messages"
    assert req.headers["anthropic-version"] == "2023-06-01"
    assert "x-api-key" not in req.headers
    body = req.json
    assert body["stream"] is True and body["max_tokens"] == 4096
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hello"}]}]


def test_key_goes_in_x_api_key_and_nowhere_else() -> None:
    _, req = run(BASIC, api_key=KEY)
    assert req.headers["x-api-key"] == KEY
    assert "authorization" not in req.headers
    assert KEY not in repr(AnthropicProvider(api_key=KEY))


def test_tool_use_transcript() -> None:
    """ "Streaming request with tool use": text, then one call put together from its
    input_json_delta fragments, finishing with reason ``tool``."""
    events, _ = run(TOOL_USE)
    text = "".join(e.value for e in events if isinstance(e, TextEvent))
    assert text == "Okay, let's check the weather for San Francisco, CA:"
    [call] = [e.value for e in events if isinstance(e, ToolCallEvent)]
    assert (call.id, call.name, call.args) == (
        "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
        "get_weather",
        TOOL_ARGS,
    )
    assert json.loads(call.arguments) == TOOL_ARGS
    assert events[-1] == FinishEvent("tool", Usage(472, 89, 561))


def test_thinking_transcript_keeps_the_block_with_its_signature() -> None:
    """ "Streaming request with extended thinking": thinking events, the answer, and the
    thinking block (text and signature) on the FinishEvent for the next request."""
    events, _ = run(THINKING)
    assert [e.value for e in events if isinstance(e, ThinkingEvent)] == THINKING_TEXT
    assert [e.value for e in events if isinstance(e, TextEvent)] == [
        "The greatest common divisor of 1071 and 462 is **21**."
    ]
    finish = events[-1]
    assert isinstance(finish, FinishEvent) and finish.reason == "stop"
    assert finish.provider_blocks == (
        ProviderBlock(
            "anthropic",
            {
                "type": "thinking",
                "thinking": "".join(THINKING_TEXT),
                "signature": THINKING_SIGNATURE,
            },
        ),
    )


WHOLE = [
    whole_message([{"type": "text", "text": "Hi! My name is Claude."}]),
    whole_message(
        [
            {"type": "thinking", "thinking": "Let me think.", "signature": "c2ln"},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_2", "name": "get_time", "input": {}},
        ],
        stop="tool_use",
        usage={
            "input_tokens": 10,
            "output_tokens": 7,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 20,
        },
    ),
    whole_message([{"type": "text", "text": "cut"}], stop="max_tokens"),
    whole_message([{"type": "text", "text": "no"}], stop="refusal"),
    whole_message([{"type": "text", "text": "ctx"}], stop="model_context_window_exceeded"),
    whole_message([{"type": "text", "text": "paused"}], stop="pause_turn"),
]


@pytest.mark.parametrize("message", WHOLE)
def test_streamed_and_whole_answers_give_the_same_events(message: dict[str, Any]) -> None:
    """The same answer streamed and not: the same events (texts joined), the same kept blocks."""
    with serve(
        {MESSAGES: sequence(stream_script(sse_of(message)), status(200, message))}
    ) as server:
        provider = AnthropicProvider(base_url=server.url, retries=0)
        streamed = list(provider.chat_stream(request()))
        state = provider._state(request())
        whole_events = state.handle_message(message) + state.end()
        result = provider.chat(request())
        provider.close()
    assert merged(streamed) == merged(whole_events)
    assert streamed[-1].provider_blocks == whole_events[-1].provider_blocks
    assert (
        result.content == "".join(b["text"] for b in message["content"] if b["type"] == "text")
        or None
    )


def test_stop_reasons_and_cache_usage() -> None:
    finishes = []
    for message in WHOLE:
        state = AnthropicProvider(base_url="http://127.0.0.1:9")._state(request())
        finishes.append((state.handle_message(message) + state.end())[-1])
    assert [f.reason for f in finishes] == ["stop", "tool", "length", "refusal", "length", "stop"]
    usage = finishes[1].usage
    assert usage == Usage(
        130, 7, 137, {"cache_read_input_tokens": 100, "cache_creation_input_tokens": 20}
    )
    kept = finishes[1].provider_blocks
    assert [b.data["type"] for b in kept] == ["thinking", "redacted_thinking"]
    assert kept[1].data == {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix"}


def test_error_event_mid_stream_keeps_the_text() -> None:
    """An ``error`` event after text ends the stream with LLM_RATE_LIMITED; the text stays
    and nothing is sent again (content already reached the caller)."""
    chunks = [*BASIC[:4], event(OVERLOADED)]
    with serve({MESSAGES: stream_script(chunks)}) as server:
        provider = AnthropicProvider(base_url=server.url)
        events = list(provider.chat_stream(request()))
        assert len(server.requests) == 1
    assert events[0] == TextEvent("Hello")
    assert isinstance(events[-1], ErrorEvent) and events[-1].error.code == "LLM_RATE_LIMITED"
    assert len([e for e in events if isinstance(e, ErrorEvent | FinishEvent)]) == 1


def test_overloaded_event_before_any_content_is_retried() -> None:
    first = stream(message_start(), OVERLOADED)
    with serve({MESSAGES: sequence(stream_script(first), stream_script(BASIC))}) as server:
        provider = AnthropicProvider(base_url=server.url)
        events = list(provider.chat_stream(request()))
        assert len(server.requests) == 2
    assert merged(events) == [TextEvent("Hello!"), FinishEvent("stop", Usage(25, 15, 40))]


def test_an_overloaded_event_is_not_retried_past_the_calls_deadline() -> None:
    """The call's deadline rides on the request's cancel event (no ``timeout`` seconds on the
    request): a retry whose backoff (22.5 s at least here) would end after it is not made."""
    import time

    from ollm_lite._cancel_link import LinkedEvent
    from ollm_lite.http.policy import RetryPolicy

    first = stream(message_start(), OVERLOADED)
    with serve({MESSAGES: sequence(stream_script(first), stream_script(BASIC))}) as server:
        provider = AnthropicProvider(base_url=server.url)
        provider._retry = RetryPolicy(backoff=30.0, max_backoff=60.0)
        cancel = LinkedEvent(deadline=time.monotonic() + 10.0)
        events = list(provider.chat_stream(request(cancel=cancel)))
        assert len(server.requests) == 1
    assert isinstance(events[-1], ErrorEvent) and events[-1].error.code == "LLM_RATE_LIMITED"


def test_stream_cut_before_stop_reason_is_a_bad_response() -> None:
    events, _ = run(BASIC[:4], then="close")
    assert events[0] == TextEvent("Hello")
    assert isinstance(events[-1], ErrorEvent) and events[-1].error.code == "LLM_BAD_RESPONSE"


def test_unknown_events_and_blocks_are_skipped() -> None:
    chunks = stream(
        message_start(),
        {"type": "some_future_event", "x": 1},
        block_start(
            0, {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}
        ),
        {"type": "content_block_stop", "index": 0},
        block_start(1, {"type": "text", "text": ""}),
        text_delta(1, "ok"),
        {"type": "content_block_stop", "index": 1},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 1},
        },
        {"type": "message_stop"},
    )
    events, _ = run([b": comment\n\n", b'data: {"type": "ping"}\n\n', *chunks])
    assert merged(events) == [TextEvent("ok"), FinishEvent("stop", Usage(25, 1, 26))]


@pytest.mark.parametrize(
    ("code", "kind", "expected"),
    [
        (401, "authentication_error", AuthenticationError),
        (403, "permission_error", AuthenticationError),
        (400, "invalid_request_error", HTTPStatusError),
        (429, "rate_limit_error", RateLimited),
        (529, "overloaded_error", RateLimited),
    ],
)
def test_http_errors(code: int, kind: str, expected: type) -> None:
    """Anthropic's error answers map to the library's codes; the server's message is quoted;
    the key echoed in it never shows."""
    body = error_body(kind, f"bad thing (key {KEY})")
    with serve({MESSAGES: status(code, body, headers={"retry-after": "7"})}) as server:
        provider = AnthropicProvider(base_url=server.url, api_key=KEY, retries=0)
        events = list(provider.chat_stream(request()))
        with pytest.raises(expected) as caught:
            provider.chat(request())
    [error] = events
    assert isinstance(error, ErrorEvent) and error.error.code == expected.code
    assert "bad thing" in caught.value.message and KEY not in repr(events) + str(caught.value)
    if expected is RateLimited:
        assert caught.value.retry_after == 7.0


#: What servers answer for a model they do not have: Anthropic's API (its message is
#: ``model: <name>``), Ollama, vLLM.
MODEL_MISSING = [
    error_body("not_found_error", "model: claude-opus-4-6"),
    error_body("not_found_error", 'model "claude-opus-4-6" not found, try pulling it first'),
    {"error": {"message": "The model `claude-opus-4-6` does not exist.", "type": "NotFoundError"}},
]
#: What servers that do not serve ``/v1/messages`` answer: llama-cpp-python's (FastAPI),
#: llama.cpp's ``llama-server`` for a path it lacks, a bare 404.
NO_MESSAGES_API: list[dict[str, Any] | bytes] = [
    {"detail": "Not Found"},
    {"error": {"code": 404, "message": "File Not Found", "type": "not_found_error"}},
    b"",
]


@pytest.mark.parametrize("body", MODEL_MISSING)
def test_a_404_about_the_model_is_model_not_found(body: dict[str, Any]) -> None:
    with serve(
        {MESSAGES: status(404, body), "/v1/messages/count_tokens": status(404, body)}
    ) as server:
        provider = AnthropicProvider(base_url=server.url, retries=0)
        [error] = list(provider.chat_stream(request()))
        with pytest.raises(ModelNotFound) as whole:
            provider.chat(request())
        with pytest.raises(ModelNotFound):
            provider.count_tokens(request())
    assert isinstance(error, ErrorEvent) and error.error.code == "MODEL_NOT_FOUND"
    assert "claude-opus-4-6" in whole.value.message and whole.value.status == 404


@pytest.mark.parametrize("body", NO_MESSAGES_API)
def test_a_404_from_a_server_without_the_messages_api_says_so(
    body: dict[str, Any] | bytes,
) -> None:
    """A 404 that is not about the model is no MODEL_NOT_FOUND: the server does not serve
    ``/v1/messages`` (llama-cpp-python's server answers every unknown path so)."""
    with serve(
        {MESSAGES: status(404, body), "/v1/messages/count_tokens": status(404, body)}
    ) as server:
        provider = AnthropicProvider(base_url=server.url, retries=0)
        [error] = list(provider.chat_stream(request()))
        with pytest.raises(HTTPStatusError) as whole:
            provider.chat(request())
        with pytest.raises(HTTPStatusError) as counted:
            provider.count_tokens(request())
    for caught in (whole.value, counted.value):
        assert type(caught) is HTTPStatusError and caught.status == 404
        assert caught.details["url"].startswith(server.url + "/v1/messages")
    assert "does not serve the Messages API" in whole.value.message
    assert "does not serve /v1/messages/count_tokens" in counted.value.message
    assert isinstance(error, ErrorEvent) and error.error.code == "LLM_HTTP_ERROR"
    assert error.error.message == whole.value.message


@pytest.mark.parametrize(
    ("message", "code"),
    [("model: claude-opus-4-6", "MODEL_NOT_FOUND"), ("File Not Found", "LLM_HTTP_ERROR")],
)
def test_a_not_found_error_event_is_the_model_only_when_it_says_so(message: str, code: str) -> None:
    events, _ = run(stream(message_start(), error_body("not_found_error", message)))
    [error] = events
    assert isinstance(error, ErrorEvent) and error.error.code == code
    assert message in error.error.message


def test_unparseable_tool_input_never_crashes_the_stream() -> None:
    """A ``tool_use`` whose streamed input is not JSON: one call with ``args == {}`` carrying
    the raw text, and the stream finishes ``tool``."""
    block = {"type": "tool_use", "id": "toolu_9", "name": "get_weather", "input": {}}
    fragment = {"type": "input_json_delta", "partial_json": '{"location": "Par'}
    chunks = stream(
        message_start(),
        block_start(0, block),
        {"type": "content_block_delta", "index": 0, "delta": fragment},
        {"type": "content_block_stop", "index": 0},
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {}},
        {"type": "message_stop"},
    )
    events, _ = run(chunks)
    [call, finish] = events
    assert isinstance(call, ToolCallEvent) and call.value.args == {}
    assert call.value.arguments == '{"location": "Par' and call.value.id == "toolu_9"
    assert isinstance(finish, FinishEvent) and finish.reason == "tool"


def test_llama_servers_error_event_keeps_its_message() -> None:
    """llama.cpp's ``llama-server`` names the event ``error`` and sends its own error object
    as the data (``{"code", "message", "type"}``, tools/server/server-context.cpp): the stream
    ends with that message, mapped by its code, the text kept."""
    error = {"code": 400, "message": "the request exceeds the context size", "type": "x_error"}
    raw = b"event: error\ndata: " + json.dumps(error).encode() + b"\n\n"
    for chunks in ([*BASIC[:4], raw], [*BASIC[:4], b"event: ping\n", raw[:9], raw[9:]]):
        events, _ = run(chunks)
        assert events[0] == TextEvent("Hello")
        last = events[-1]
        assert isinstance(last, ErrorEvent) and last.error.code == "LLM_HTTP_ERROR", events
        assert "exceeds the context size" in last.error.message
        assert last.error.details and last.error.details["status"] == 400


def test_529_is_retried_with_retry_after() -> None:
    overloaded = status(
        529, error_body("overloaded_error", "Overloaded"), headers={"retry-after": "0"}
    )
    with serve({MESSAGES: sequence(overloaded, stream_script(BASIC))}) as server:
        provider = AnthropicProvider(base_url=server.url)
        events = list(provider.chat_stream(request()))
        assert len(server.requests) == 2
    assert events[-1] == FinishEvent("stop", Usage(25, 15, 40))


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
def test_base_url_with_or_without_v1(suffix: str) -> None:
    with serve({MESSAGES: stream_script(BASIC)}) as server:
        provider = AnthropicProvider(base_url=server.url + suffix, retries=0)
        assert list(provider.chat_stream(request()))[-1].type == "finish"
        assert server.requests[0].path == "/v1/messages"
        assert provider.base_url == server.url


def test_count_tokens_uses_count_tokens_route() -> None:
    seen: list[Request] = []

    def answer(client: Any, req: Request) -> None:
        seen.append(req)
        respond(client, 200, b'{"input_tokens": 14}')

    with serve({"/v1/messages/count_tokens": answer}) as server:
        provider = AnthropicProvider(base_url=server.url)
        opts = GenerationOptions(max_tokens=10, temperature=0.2)
        assert provider.count_tokens(request(system_prompt="Be brief.", options=opts)) == 14
    body = seen[0].json
    assert body["system"] == "Be brief." and body["model"] == "claude-opus-4-6"
    assert "max_tokens" not in body and "temperature" not in body and "stream" not in body


def test_a_server_without_count_tokens_is_asked_once() -> None:
    """A server that serves ``/v1/messages`` but not ``count_tokens`` (a 404 not about the
    model): asked once; later counts are UNSUPPORTED_OPERATION without a request, and the
    token-limit check uses its estimate."""
    from ollm_lite.tokens import TokenCounter

    missing = status(404, {"detail": "Not Found"})
    with serve({"/v1/messages/count_tokens": missing}) as server:
        provider = AnthropicProvider(base_url=server.url)
        with pytest.raises(HTTPStatusError):
            provider.count_tokens(request())
        with pytest.raises(UnsupportedOperation) as again:
            provider.count_tokens(request())
        check = TokenCounter(provider, default_limit=4096).check(request())
        asked = [r.path for r in server.requests].count("/v1/messages/count_tokens")
    assert asked == 1 and "count_tokens" in again.value.message
    assert check.exact is False and check.tokens >= 1


def _models_page(ids: list[str], more: bool) -> dict[str, Any]:
    data = [
        {"type": "model", "id": i, "display_name": i.title(), "created_at": "2025-02-19T00:00:00Z"}
        for i in ids
    ]
    return {"data": data, "has_more": more, "first_id": ids[0], "last_id": ids[-1]}


def test_models_are_paged_with_after_id() -> None:
    seen: list[str] = []

    def answer(client: Any, req: Request) -> None:
        seen.append(req.path)
        page = (
            _models_page(["b", "c"], False)
            if "after_id=a" in req.path
            else _models_page(["a"], True)
        )
        respond(client, 200, json.dumps(page).encode())

    with serve({"/v1/models": answer}) as server:
        provider = AnthropicProvider(base_url=server.url)
        models = provider.list_models()
        assert [m.name for m in models] == ["a", "b", "c"]
        assert models[0].details["display_name"] == "A"
        assert models[0].modified_at == "2025-02-19T00:00:00Z"
        assert provider.show_model("c").name == "c"
        with pytest.raises(ModelNotFound):
            provider.show_model("nope")
        assert provider.context_length("a") is None
        assert provider.health().ok
    assert "after_id=a" in seen[1]


def test_openai_shaped_model_list_and_context() -> None:
    page = {
        "object": "list",
        "data": [
            {
                "id": "smol",
                "object": "model",
                "created": 1,
                "owned_by": "llamacpp",
                "meta": {"n_ctx": 2048},
            }
        ],
    }
    with serve({"/v1/models": status(200, page)}) as server:
        provider = AnthropicProvider(base_url=server.url)
        assert [m.name for m in provider.list_models()] == ["smol"]
        assert provider.context_length("smol") == 2048


def test_health_reports_failures_without_raising() -> None:
    with serve(
        {"/v1/models": status(401, error_body("authentication_error", "invalid x-api-key"))}
    ) as server:
        health = AnthropicProvider(base_url=server.url, api_key=KEY).health()
    assert not health.ok and health.error is not None
    assert health.error.code == "LLM_AUTH_FAILED" and KEY not in repr(health)


def test_unsupported_operations() -> None:
    provider = AnthropicProvider(base_url="http://127.0.0.1:9")
    for call in (
        lambda: provider.embed(["x"], model="m"),
        lambda: provider.pull_model("m"),
        lambda: provider.delete_model("m"),
    ):
        with pytest.raises(UnsupportedOperation):
            call()


def test_environment_sets_url_and_key(monkeypatch: pytest.MonkeyPatch) -> None:
    with serve({MESSAGES: stream_script(BASIC)}) as server:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        provider = AnthropicProvider(retries=0)
        list(provider.chat_stream(request()))
        assert server.requests[0].headers["x-api-key"] == KEY
        assert provider.base_url == server.url


def test_token_limits_use_count_tokens_and_the_listed_window() -> None:
    """The chat runtime's check (TokenCounter): the server's count against the listed window."""
    from ollm_lite.tokens import TokenCounter

    page = {"data": [{"id": "claude-opus-4-6", "max_input_tokens": 100}], "has_more": False}
    routes = {
        "/v1/messages/count_tokens": status(200, {"input_tokens": 95}),
        "/v1/models": status(200, page),
    }
    with serve(routes) as server:
        check = TokenCounter(AnthropicProvider(base_url=server.url)).check(request())
    assert (check.tokens, check.limit, check.exact) == (95, 100, True)
    assert check.warning and not check.exceeded
