"""The script API's four calls over ScriptedProvider: what each returns, raises and records.

``ask`` → str, ``stream`` → str pieces, ``run`` → Reply, ``events`` → chat events that never
raise; errors raise the typed exception with its ``.code``; cancel ends a stream and raises
``Cancelled`` from ``ask``/``run``; ``token_limit`` raises ``TokenLimitExceeded`` from ``ask``.
"""

from __future__ import annotations

import threading

import pytest

import ollm_lite
from ollm_lite import (
    BadResponse,
    Cancelled,
    ChatFinishEvent,
    ConnectionFailed,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    ModelNotFound,
    OllmError,
    RateLimited,
    Reply,
    ScriptedProvider,
    ScriptedTurn,
    TextEvent,
    ThinkingEvent,
    TokenLimitExceeded,
    ToolCall,
    ToolCallEvent,
    Usage,
    tool,
)
from ollm_lite.client import Client


def call(name: str, args: dict[str, object], id: str = "c1") -> ToolCallEvent:
    return ToolCallEvent(ToolCall.from_arguments(id, name, args))


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def connect(*turns: object, **kw: object) -> tuple[Client, ScriptedProvider]:
    provider = ScriptedProvider(list(turns))  # type: ignore[arg-type]
    return ollm_lite.connect(provider, model="m", **kw), provider  # type: ignore[arg-type]


# --------------------------------------------------------------------------- ask


def test_ask_returns_the_answer_text() -> None:
    llm, provider = connect("The sky scatters blue light.")
    assert llm.ask("Why is the sky blue?") == "The sky scatters blue light."
    (request,) = provider.requests
    assert request.model == "m"
    assert [m.text for m in request.messages] == ["Why is the sky blue?"]


def test_ask_sends_the_system_prompt() -> None:
    llm, provider = connect("ok")
    llm.ask("hi", system="Be brief")
    assert provider.requests[0].system_prompt == "Be brief"


@pytest.mark.parametrize(
    ("info", "cls"),
    [
        (ErrorInfo("refused", "CONNECTION_FAILED"), ConnectionFailed),
        (ErrorInfo("no such model", "MODEL_NOT_FOUND", {"status": 404}), ModelNotFound),
        (ErrorInfo("slow down", "LLM_RATE_LIMITED", {"retry_after": 3}), RateLimited),
        (ErrorInfo("garbage", "LLM_BAD_RESPONSE"), BadResponse),
    ],
)
def test_ask_raises_the_typed_error_with_its_code(info: ErrorInfo, cls: type[OllmError]) -> None:
    llm, _ = connect([TextEvent("partial "), ErrorEvent(info)])
    with pytest.raises(cls) as raised:
        llm.ask("hi")
    assert raised.value.code == info.code
    assert raised.value.message == info.message


def test_rate_limited_keeps_retry_after() -> None:
    llm, _ = connect([ErrorEvent(ErrorInfo("slow", "LLM_RATE_LIMITED", {"retry_after": 3}))])
    with pytest.raises(RateLimited) as raised:
        llm.ask("hi")
    assert raised.value.retry_after == 3


def test_ask_raises_cancelled_when_the_event_is_set() -> None:
    cancel = threading.Event()
    cancel.set()
    llm, _ = connect("never")
    with pytest.raises(Cancelled) as raised:
        llm.ask("hi", cancel=cancel)
    assert raised.value.code == "CANCELLED"


def test_ask_raises_token_limit_exceeded_and_sends_nothing() -> None:
    provider = ScriptedProvider(["never"], context_length=10)
    llm = ollm_lite.connect(provider, model="m")
    with pytest.raises(TokenLimitExceeded) as raised:
        llm.ask("a prompt far longer than ten tokens of context " * 5)
    assert raised.value.code == "TOKEN_LIMIT_EXCEEDED"
    assert raised.value.details["limit"] == 10
    assert provider.requests == []


def test_ask_returns_the_last_text_after_tool_turns() -> None:
    llm, _ = connect("only text")
    assert llm.ask("hi") == "only text"


def test_str_of_a_failed_stream_keeps_no_partial_in_ask() -> None:
    """ask raises; it never returns a half answer as if it were whole."""
    llm, _ = connect([TextEvent("half"), ErrorEvent(ErrorInfo("cut", "LLM_BAD_RESPONSE"))])
    with pytest.raises(BadResponse):
        llm.ask("hi")


# --------------------------------------------------------------------------- stream


def test_stream_yields_text_pieces() -> None:
    llm, _ = connect(
        [ThinkingEvent("hmm"), TextEvent("Once "), TextEvent("upon"), FinishEvent("stop")]
    )
    assert list(llm.stream("Tell me a story")) == ["Once ", "upon"]


def test_stream_raises_after_the_pieces_already_yielded() -> None:
    llm, _ = connect([TextEvent("Once "), ErrorEvent(ErrorInfo("gone", "CONNECTION_FAILED"))])
    pieces: list[str] = []
    with pytest.raises(ConnectionFailed) as raised:
        for piece in llm.stream("story"):
            pieces.append(piece)
    assert pieces == ["Once "]
    assert raised.value.code == "CONNECTION_FAILED"


def test_stream_ends_quietly_when_cancelled_midway() -> None:
    cancel = threading.Event()
    llm, _ = connect(ScriptedTurn([TextEvent("a"), TextEvent("b")], hang=True))
    pieces = []
    for piece in llm.stream("story", cancel=cancel):
        pieces.append(piece)
        if piece == "b":
            cancel.set()
    assert pieces == ["a", "b"]


def test_stream_raises_token_limit_exceeded() -> None:
    llm = ollm_lite.connect(ScriptedProvider(["x"], context_length=5), model="m")
    with pytest.raises(TokenLimitExceeded):
        list(llm.stream("far too long for five tokens " * 4))


def test_closing_a_stream_early_stops_the_request() -> None:
    provider = ScriptedProvider([ScriptedTurn([TextEvent("a")], hang=True)])
    llm = ollm_lite.connect(provider, model="m")
    pieces = llm.stream("story")
    assert next(pieces) == "a"
    pieces.close()  # type: ignore[attr-defined]
    cancel = provider.requests[0].cancel
    assert cancel is not None and cancel.is_set()


# --------------------------------------------------------------------------- run


def test_run_drives_the_tool_loop_and_fills_the_reply() -> None:
    usage1, usage2 = Usage(10, 2, 12), Usage(20, 5, 25)
    llm, provider = connect(
        [TextEvent("Let me add."), call("add", {"a": 2.5, "b": 4}), FinishEvent("tool", usage1)],
        [ThinkingEvent("easy"), TextEvent("It is 6.5."), FinishEvent("stop", usage2)],
    )
    reply = llm.run("What is 2.5 + 4?", tools=[add])
    assert isinstance(reply, Reply)
    assert str(reply) == reply.text == "It is 6.5."
    assert reply.thinking == "easy"
    assert [c.name for c in reply.tool_calls] == ["add"]
    assert [r.data for r in reply.tool_results] == [6.5]
    assert reply.usage == Usage(30, 7, 37)
    assert reply.finish == "complete"
    assert reply.turns == 2
    assert reply.error is None and reply.value is None
    roles = [m.role for m in reply.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]
    assert provider.requests[0].tools is not None
    assert [t.name for t in provider.requests[0].tools] == ["add"]


def test_run_accepts_a_plain_typed_function() -> None:
    def multiply(a: int, b: int) -> int:
        return a * b

    llm, provider = connect([call("multiply", {"a": 6, "b": 7})], "42")
    reply = llm.run("6*7?", tools=[multiply])
    assert reply.tool_results[0].data == 42
    assert provider.requests[0].tools is not None
    schema = provider.requests[0].tools[0].parameters
    assert schema == {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    }


def test_a_dict_tool_stops_the_run_with_tool_calls_and_handled_tools_still_run() -> None:
    weather = {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather in a city.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
    llm, provider = connect(
        [call("add", {"a": 1, "b": 2}, "c1"), call("get_weather", {"city": "Oslo"}, "c2")],
        "never reached",
    )
    reply = llm.run("Add and weather", tools=[add, weather])
    assert reply.finish == "tool_calls"
    assert [c.name for c in reply.tool_calls] == ["add", "get_weather"]
    assert [r.data for r in reply.tool_results] == [3]
    assert len(provider.requests) == 1 and provider.remaining == 1
    roles = [m.role for m in reply.messages]
    assert roles == ["user", "assistant", "tool"]
    assert reply.messages[-1].tool_call_id == "c1"


def test_the_caller_continues_after_tool_calls_with_tool_messages() -> None:
    from ollm_lite import Message, ToolResult

    weather = {"type": "function", "function": {"name": "get_weather", "parameters": {}}}
    llm, provider = connect([call("get_weather", {"city": "Oslo"})], "Sunny in Oslo.")
    reply = llm.run("Weather?", tools=[weather])
    pending = reply.tool_calls[0]
    answer = Message.tool(ToolResult(True, {"sky": "sunny"}), pending)
    final = llm.run([*reply.messages, answer], tools=[weather])
    assert final.text == "Sunny in Oslo."
    sent = provider.requests[1].messages
    assert [m.role for m in sent] == ["user", "assistant", "tool"]
    assert sent[-1].tool_call_id == pending.id


@pytest.mark.parametrize(
    ("turns", "finish"),
    [
        ([[call("add", {"a": 1, "b": 1})]] * 3, "max_turns"),
        ([[call("nope", {})]] * 4, "loop_detected"),
    ],
)
def test_run_returns_its_reply_for_other_endings(turns: list[object], finish: str) -> None:
    llm, _ = connect(*turns)
    reply = llm.run("go", tools=[add], max_turns=3)
    assert reply.finish == finish
    assert reply.error is None


def test_run_returns_token_limit_as_a_reply() -> None:
    llm = ollm_lite.connect(ScriptedProvider(["x"], context_length=5), model="m")
    reply = llm.run("too long for five tokens " * 5)
    assert reply.finish == "token_limit"
    assert reply.turns == 0


def test_run_raises_the_typed_error() -> None:
    llm, _ = connect([ErrorEvent(ErrorInfo("nope", "MODEL_NOT_FOUND"))])
    with pytest.raises(ModelNotFound) as raised:
        llm.run("hi", tools=[add])
    assert raised.value.code == "MODEL_NOT_FOUND"


def test_run_raises_cancelled() -> None:
    cancel = threading.Event()
    cancel.set()
    llm, _ = connect("x")
    with pytest.raises(Cancelled):
        llm.run("hi", cancel=cancel)


def test_a_failing_tool_is_a_result_the_model_sees() -> None:
    @tool
    def broken() -> str:
        """Always fails."""
        raise RuntimeError("boom")

    llm, provider = connect([call("broken", {})], "sorry")
    reply = llm.run("go", tools=[broken])
    assert reply.text == "sorry"
    assert reply.tool_results[0].ok is False
    assert "boom" in provider.requests[1].messages[-1].text


# --------------------------------------------------------------------------- events


def test_events_are_the_chat_runtime_events() -> None:
    llm, _ = connect([TextEvent("hi")])
    events = list(llm.events("hello"))
    assert isinstance(events[0], TextEvent)
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "complete"


def test_events_never_raise_for_bad_input() -> None:
    llm, _ = connect("x")
    events = list(llm.events(12345))  # type: ignore[arg-type]
    assert isinstance(events[0], ErrorEvent) and events[0].error.code == "CONFIG_INVALID"
    assert events[-1] == ChatFinishEvent("error")


def test_events_never_raise_for_provider_errors() -> None:
    llm, _ = connect([ErrorEvent(ErrorInfo("down", "CONNECTION_FAILED"))])
    events = list(llm.events("hi"))
    assert [e.type for e in events] == ["error", "chat_finish"]


def test_events_end_with_tool_calls_for_a_tool_without_handler() -> None:
    schema = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    llm, _ = connect([call("lookup", {"q": "x"})])
    events = list(llm.events("find", tools=[schema]))
    assert events[-1] == ChatFinishEvent("tool_calls", None)
    assert any(e.type == "tool_call_start" for e in events)
    assert not any(e.type == "tool_call_result" for e in events)


# --------------------------------------------------------------------------- module level


def test_module_level_ask_and_stream_use_one_default_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    provider = ScriptedProvider(["one", "two"])
    made: list[object] = []

    def fake_connect() -> Client:
        made.append(1)
        return Client(provider, model="m")

    monkeypatch.setattr(ollm_lite.client, "connect", fake_connect)
    assert ollm_lite.ask("a") == "one"
    assert list(ollm_lite.stream("b")) == ["two"]
    assert made == [1]


def test_the_default_client_is_created_once_across_threads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    made: list[Client] = []
    start = threading.Barrier(8)

    def fake_connect() -> Client:
        made.append(Client(ScriptedProvider(), model="m"))
        return made[-1]

    monkeypatch.setattr(ollm_lite.client, "connect", fake_connect)
    seen: list[Client] = []

    def worker() -> None:
        start.wait()
        seen.append(ollm_lite.client.default_client())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(made) == 1
    assert all(c is made[0] for c in seen)


def test_module_level_ask_raises_the_config_error_of_connect(tmp_path: object) -> None:
    import os

    os.environ["OLLM_PROVIDER"] = "no-such-provider"
    try:
        with pytest.raises(OllmError) as raised:
            ollm_lite.ask("hi")
    finally:
        del os.environ["OLLM_PROVIDER"]
    assert raised.value.code == "CONFIG_INVALID"


def test_one_client_serves_many_threads() -> None:
    """Calls from several threads at once each get one whole answer; the model is resolved once."""
    provider = ScriptedProvider([f"answer {i}" for i in range(16)])
    llm = ollm_lite.connect(provider)
    answers: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(2):
            text = llm.ask("hi")
            with lock:
                answers.append(text)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(answers) == sorted(f"answer {i}" for i in range(16))
    assert llm.model == "scripted"


def test_the_exception_behind_an_error_event_is_the_one_raised() -> None:
    """Class, code, details and traceback of the provider's own exception are kept."""
    original = ConnectionFailed("cannot connect", url="http://127.0.0.1:9", provider="p")
    llm, _ = connect([ErrorEvent(original.to_info(), exception=original)])
    with pytest.raises(ConnectionFailed) as raised:
        llm.ask("hi")
    assert raised.value is original
    assert raised.value.url == "http://127.0.0.1:9"


def test_a_non_library_exception_is_wrapped_and_chained() -> None:
    bug = ValueError("a bug in a custom adapter")
    llm, _ = connect([ErrorEvent(ErrorInfo("ValueError: bug", "LLM_BAD_RESPONSE"), exception=bug)])
    with pytest.raises(BadResponse) as raised:
        llm.ask("hi")
    assert raised.value.__cause__ is bug
