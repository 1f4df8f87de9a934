"""The chat loop end to end over ScriptedProvider: events, tools, stop points, history, cancel."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from support.transport_support import wait_for_threads

from ollm_lite.chat import ChatClient, Conversation
from ollm_lite.errors import ConfigError, OllmError
from ollm_lite.providers.scripted import ScriptedProvider, ScriptedTurn
from ollm_lite.registry import ProviderRegistry
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import (
    ChatFinishEvent,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    Message,
    ProviderCapabilities,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    TurnCompleteEvent,
    Usage,
    WarningEvent,
)


@tool
def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise RuntimeError(reason)


def call(name: str, args: dict[str, Any], id: str = "c1") -> ToolCallEvent:
    return ToolCallEvent(ToolCall.from_arguments(id, name, args))


def client(
    *turns: Any, tools: list[Any] | None = None, **kw: Any
) -> tuple[ChatClient, ScriptedProvider]:
    provider = ScriptedProvider(
        turns,
        **{
            k: kw.pop(k)
            for k in list(kw)
            if k in ("capabilities", "context_length", "token_counter")
        },
    )
    return ChatClient(provider, tools=ToolRegistry(tools or []), model="m", **kw), provider


def kinds(events: list[Any]) -> list[str]:
    return [e.type for e in events]


def test_plain_answer_forwards_text_in_order_and_finishes_complete() -> None:
    """Event stream forwarding: events are forwarded in order with the same content."""
    usage = Usage(5, 3, 8)
    chat, provider = client(
        [ThinkingEvent("hm"), TextEvent("Hel"), TextEvent("lo"), FinishEvent("stop", usage)]
    )
    events = list(chat.chat("hi", system_prompt="be brief"))
    assert events == [
        ThinkingEvent("hm"),
        TextEvent("Hel"),
        TextEvent("lo"),
        TurnCompleteEvent(1),
        ChatFinishEvent("complete", usage),
    ]
    [request] = provider.requests
    assert request.system_prompt == "be brief"
    assert request.messages[0].text == "hi"
    assert request.tools is None


def test_tool_turn_then_answer() -> None:
    """Calls run after the stream, results go back as tool messages."""
    chat, provider = client(
        [TextEvent("Let me add."), call("add", {"a": 2, "b": 3}), FinishEvent("tool")],
        "It is 5.",
        tools=[add],
    )
    conv = chat.conversation()
    events = list(conv.send("2+3?"))
    assert kinds(events) == [
        "text",
        "tool_call_start",
        "tool_call_result",
        "turn_complete",
        "text",
        "turn_complete",
        "chat_finish",
    ]
    result_event = events[2]
    assert isinstance(result_event, ToolCallResultEvent)
    assert result_event.result.ok and result_event.result.data == 5
    second = provider.requests[1]
    assert [m.role for m in second.messages] == ["user", "assistant", "tool"]
    assistant, tool_msg = second.messages[1], second.messages[2]
    assert assistant.text == "Let me add." and assistant.tool_calls[0].name == "add"
    assert tool_msg.tool_call_id == "c1" and tool_msg.name == "add"
    assert json.loads(tool_msg.text) == {"ok": True, "data": 5}
    assert provider.requests[0].tools is not None and provider.requests[0].tools[0].name == "add"
    assert [m.role for m in conv.history] == ["user", "assistant", "tool", "assistant"]
    assert conv.history[-1].text == "It is 5."
    assert all(
        m.parts for m in conv.history
    )  # Message structure validity: every message has a part


def test_the_tools_of_a_turn_run_at_the_same_time() -> None:
    """6 calls of a turn all run at once: each waits for the other five at a barrier, which
    a one-after-another run would break (every call would fail); results keep call order."""
    barrier = threading.Barrier(6, timeout=10)

    @tool
    def meet(i: int) -> int:
        """Wait for every other call.

        Args:
            i: Index.
        """
        barrier.wait()
        return i

    calls = [call("meet", {"i": i}, id=f"c{i}") for i in range(6)]
    chat, _ = client([*calls, FinishEvent("tool")], "done", tools=[meet])
    events = list(chat.chat("go"))
    results = [e for e in events if isinstance(e, ToolCallResultEvent)]
    assert [r.result.data for r in results] == list(range(6))  # call order
    assert all(r.result.ok for r in results)


def test_max_parallel_tools_bounds_concurrency() -> None:
    running = 0
    peak = 0
    lock = threading.Lock()

    @tool
    def busy(i: int) -> int:
        """Busy.

        Args:
            i: Index.
        """
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        time.sleep(0.05)
        with lock:
            running -= 1
        return i

    calls = [call("busy", {"i": i}, id=f"c{i}") for i in range(7)]
    chat, _ = client([*calls, FinishEvent("tool")], "ok", tools=[busy], max_parallel_tools=2)
    list(chat.chat("go"))
    assert peak == 2


def test_failing_and_unknown_tools_become_results_and_the_loop_goes_on() -> None:
    """Tool execution error handling: failures are results the model sees; the chat continues."""
    chat, provider = client(
        [call("explode", {"reason": "boom"}, "a"), call("nope", {}, "b"), FinishEvent("tool")],
        "sorry",
        tools=[explode],
    )
    events = list(chat.chat("x"))
    results = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert [r.ok for r in results] == [False, False]
    assert results[0].error is not None and results[0].error.code == "TOOL_EXECUTION_FAILED"
    assert "boom" in results[0].error.message
    assert results[1].error is not None and results[1].error.code == "TOOL_NOT_FOUND"
    assert events[-1] == ChatFinishEvent("complete")
    tool_msgs = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert [json.loads(m.text)["ok"] for m in tool_msgs] == [False, False]


def test_same_failing_call_three_times_is_a_loop() -> None:
    turn = [call("explode", {"reason": "x"}), FinishEvent("tool")]
    chat, provider = client(turn, turn, turn, turn, tools=[explode])
    events = list(chat.chat("x"))
    assert events[-1] == ChatFinishEvent("loop_detected")
    assert len(provider.requests) == 3


def test_loop_detection_compares_canonical_json_not_the_raw_text() -> None:
    """``{}`` and ``{ }`` (or keys in another order) are the same call for the loop guard."""
    raws = ['{"reason": "x", "n": 1}', '{ "n": 1,  "reason": "x" }', '{"n":1,"reason":"x"}']
    turns = [
        [ToolCallEvent(ToolCall("c1", "explode", json.loads(raw), raw)), FinishEvent("tool")]
        for raw in raws
    ]
    chat, provider = client(*turns, "never", tools=[explode])
    assert list(chat.chat("x"))[-1] == ChatFinishEvent("loop_detected")
    assert len(provider.requests) == 3
    empty = [
        [ToolCallEvent(ToolCall("c1", "nope", {}, raw)), FinishEvent("tool")]
        for raw in ["{}", "{ }", " {}\n"]
    ]
    chat, provider = client(*empty, "never")
    assert list(chat.chat("x"))[-1] == ChatFinishEvent("loop_detected")
    assert len(provider.requests) == 3


def test_different_garbled_arguments_are_different_calls() -> None:
    turns = [
        [ToolCallEvent(ToolCall("c1", "explode", {}, raw)), FinishEvent("tool")]
        for raw in ["{bad", "{worse", "{bad"]
    ]
    chat, _ = client(*turns, "fine", tools=[explode])
    assert list(chat.chat("x"))[-1] == ChatFinishEvent("complete")


def test_different_failures_are_not_a_loop() -> None:
    turns = [[call("explode", {"reason": str(i)}), FinishEvent("tool")] for i in range(3)]
    chat, _ = client(*turns, "fine", tools=[explode])
    assert list(chat.chat("x"))[-1] == ChatFinishEvent("complete")


def test_max_turns() -> None:
    """Maximum turn limit: a model that never stops calling tools ends at max_turns."""
    turns = [[call("add", {"a": i, "b": 1}), FinishEvent("tool")] for i in range(10)]
    chat, provider = client(*turns, tools=[add], max_turns=3)
    events = list(chat.chat("x"))
    assert events[-1] == ChatFinishEvent("max_turns")
    assert len(provider.requests) == 3
    assert [e.turn_number for e in events if isinstance(e, TurnCompleteEvent)] == [1, 2, 3]


def test_provider_error_ends_with_error_and_keeps_partial_text() -> None:
    err = ErrorEvent(ErrorInfo("server exploded", "LLM_BAD_RESPONSE"))
    chat, _ = client([TextEvent("partial"), err])
    conv = chat.conversation()
    events = list(conv.send("x"))
    assert events == [TextEvent("partial"), err, ChatFinishEvent("error")]
    assert [m.role for m in conv.history] == ["user", "assistant"]
    assert conv.history[-1].text == "partial"


def test_unknown_provider_and_missing_model_are_error_events_not_exceptions() -> None:
    chat, _ = client("x")
    events = list(chat.chat("x", provider="nope"))
    assert isinstance(events[0], ErrorEvent) and events[0].error.code == "PROVIDER_NOT_FOUND"
    assert events[-1] == ChatFinishEvent("error")
    nomodel = ChatClient(ScriptedProvider(["x"]))
    events = list(nomodel.chat("x"))
    assert isinstance(events[0], ErrorEvent) and events[0].error.code == "CONFIG_INVALID"


def test_a_provider_that_raises_becomes_an_error_event() -> None:
    """Unexpected error resilience: an unexpected error is reported, nothing escapes chat()."""

    class Broken(ScriptedProvider):
        def chat_stream(self, request: Any) -> Any:
            raise ValueError("bug in a third-party adapter")

    chat = ChatClient(Broken(), model="m")
    events = list(chat.chat("x"))
    assert isinstance(events[0], ErrorEvent) and "bug in a third-party" in events[0].error.message
    assert events[-1] == ChatFinishEvent("error")


def test_token_limit_warning_and_stop() -> None:
    counts = iter([95, 200])
    chat, provider = client(
        "first", "second", context_length=100, token_counter=lambda r: next(counts)
    )
    conv = chat.conversation()
    events = list(conv.send("a"))
    warnings = [e for e in events if isinstance(e, WarningEvent)]
    assert [w.code for w in warnings] == ["TOKEN_LIMIT_WARNING"]
    assert events[-1] == ChatFinishEvent("complete")
    events = list(conv.send("b"))
    assert isinstance(events[0], ErrorEvent) and events[0].error.code == "TOKEN_LIMIT_EXCEEDED"
    assert events[-1] == ChatFinishEvent("token_limit")
    assert len(provider.requests) == 1  # nothing sent over the limit


def test_the_token_warning_comes_before_every_request_that_is_close_to_the_limit() -> None:
    """README, Token limits: the estimate is checked before every request; each at >= 90 % warns."""
    counts = iter([91, 80, 95])
    turn = [call("add", {"a": 1, "b": 1}), FinishEvent("tool")]
    chat, provider = client(
        turn,
        turn,
        "done",
        tools=[add],
        context_length=100,
        token_counter=lambda r: next(counts),
    )
    events = list(chat.chat("x"))
    assert len(provider.requests) == 3
    warnings = [i for i, e in enumerate(events) if isinstance(e, WarningEvent)]
    assert [events[i].code for i in warnings] == ["TOKEN_LIMIT_WARNING"] * 2
    turns_done = [i for i, e in enumerate(events) if isinstance(e, TurnCompleteEvent)]
    # the first request warned before turn 1; the third (95 %) after turn 2 and before turn 3
    assert warnings[0] < turns_done[0] and turns_done[1] < warnings[1] < turns_done[2]
    assert events[-1] == ChatFinishEvent("complete")


def test_context_limits_override_the_provider() -> None:
    chat, provider = client("x", context_length=100_000, context_limits={"m": 1})
    events = list(chat.chat("a long enough prompt"))
    assert events[-1] == ChatFinishEvent("token_limit")
    assert provider.requests == []


def test_cancel_during_a_silent_stream() -> None:
    """Cancel ends a hanging turn promptly, nothing left running."""
    baseline = threading.active_count()
    chat, _ = client(ScriptedTurn([TextEvent("so far")], hang=True))
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    t0 = time.monotonic()
    conv = chat.conversation()
    events = list(conv.send("x", cancel=cancel))
    assert time.monotonic() - t0 < 2.0
    assert events == [TextEvent("so far"), ChatFinishEvent("cancelled")]
    assert conv.history[-1].text == "so far"
    assert wait_for_threads(baseline) <= baseline


def test_cancel_during_tools_does_not_start_queued_calls() -> None:
    started: list[int] = []

    @tool
    def wait(i: int, cancel: threading.Event) -> int:
        """Wait for cancel.

        Args:
            i: Index.
        """
        started.append(i)
        cancel.wait(5)
        return i

    baseline = threading.active_count()
    calls = [call("wait", {"i": i}, id=f"c{i}") for i in range(4)]
    chat, _ = client([*calls, FinishEvent("tool")], "never", tools=[wait], max_parallel_tools=2)
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    t0 = time.monotonic()
    events = list(chat.chat("x", cancel=cancel))
    assert time.monotonic() - t0 < 2.0
    assert events[-1] == ChatFinishEvent("cancelled")
    assert sorted(started) == [0, 1]
    assert wait_for_threads(baseline) <= baseline


def test_tool_timeout() -> None:
    release = threading.Event()

    @tool
    def stuck() -> str:
        """Never returns in time."""
        release.wait(5)
        return "late"

    chat, _ = client(
        [call("stuck", {}), FinishEvent("tool")], "ok", tools=[stuck], tool_timeout=0.2
    )
    events = list(chat.chat("x"))
    release.set()
    [result] = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.error is not None and result.error.code == "TOOL_TIMEOUT"
    assert events[-1] == ChatFinishEvent("complete")


def test_a_timed_out_tool_does_not_hold_up_the_calls_queued_behind_it() -> None:
    """With one worker, a call stuck past ``tool_timeout`` still lets the next call run."""
    release = threading.Event()

    @tool
    def stuck() -> str:
        """Never returns in time."""
        release.wait()
        return "late"

    calls = [call("stuck", {}, id="c0"), call("add", {"a": 1, "b": 2}, id="c1")]
    chat, _ = client(
        [*calls, FinishEvent("tool")],
        "ok",
        tools=[stuck, add],
        tool_timeout=0.2,
        max_parallel_tools=1,
    )
    events: list[Any] = []
    runner = threading.Thread(target=lambda: events.extend(chat.chat("x")), daemon=True)
    runner.start()
    runner.join(10)  # generous: the chat needs about 0.2 s; before the fix it never ended
    finished = not runner.is_alive()
    release.set()
    assert finished, "the call queued behind a timed-out tool never ran"
    results = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert results[0].error is not None and results[0].error.code == "TOOL_TIMEOUT"
    assert results[1].ok and results[1].data == 3
    assert events[-1] == ChatFinishEvent("complete")


def test_breaking_out_of_the_generator_stops_tools() -> None:
    seen = threading.Event()

    @tool
    def wait(cancel: threading.Event) -> str:
        """Wait."""
        seen.set()
        cancel.wait(5)
        return "x"

    baseline = threading.active_count()
    chat, _ = client([call("wait", {}), FinishEvent("tool")], "x", tools=[wait])
    gen = chat.chat("x")
    for event in gen:
        if isinstance(event, ToolCallStartEvent):
            break
    gen.close()
    assert wait_for_threads(baseline) <= baseline


def test_duplicate_tool_call_ids_are_made_unique() -> None:
    chat, provider = client(
        [
            call("add", {"a": 1, "b": 1}, "dup"),
            call("add", {"a": 2, "b": 2}, "dup"),
            FinishEvent("tool"),
        ],
        "ok",
        tools=[add],
    )
    list(chat.chat("x"))
    tool_ids = [m.tool_call_id for m in provider.requests[1].messages if m.role == "tool"]
    assert len(set(tool_ids)) == 2


# --------------------------------------------------------------------------- ReAct


def test_react_mode_for_a_model_without_tool_calling() -> None:
    caps = ProviderCapabilities(tool_calling=False)
    chat, provider = client(
        'Thought: I should add.\nAction: add\nAction Input: {"a": 2, "b": 5}',
        "Thought: done\nFinal Answer: 7",
        tools=[add],
        capabilities=caps,
    )
    events = list(chat.chat("2+5?"))
    first = provider.requests[0]
    assert first.tools is None
    assert first.system_prompt is not None and "Action Input" in first.system_prompt
    assert first.options.stop and "\nObservation:" in first.options.stop
    results = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert results[0].data == 7
    observation = provider.requests[1].messages[-1]
    assert observation.role == "user" and observation.text.startswith("Observation: ")
    assert TextEvent("7") in events
    assert events[-1] == ChatFinishEvent("complete")


def test_react_invalid_json_asks_for_a_correction() -> None:
    """ReAct JSON error recovery: invalid Action Input → a correction message, then a retry."""
    chat, provider = client(
        "Thought: add\nAction: add\nAction Input: {a: 2",
        'Action: add\nAction Input: {"a": 1, "b": 1}',
        "Final Answer: 2",
        tools=[add],
    )
    events = list(chat.chat("x", tool_mode="react"))
    correction = provider.requests[1].messages[-1]
    assert correction.role == "user" and "valid JSON" in correction.text
    assert events[-1] == ChatFinishEvent("complete")


def test_react_gives_up_after_max_corrections() -> None:
    bad = "Action: add\nAction Input: {nope"
    chat, _ = client(bad, bad, bad, bad, tools=[add])
    events = list(chat.chat("x", tool_mode="react"))
    assert isinstance(events[-2], ErrorEvent)
    assert events[-1] == ChatFinishEvent("error")


def test_auto_mode_uses_native_when_the_model_can() -> None:
    chat, provider = client("hi", tools=[add])
    list(chat.chat("x"))
    assert provider.requests[0].tools is not None


class _PerModel(ScriptedProvider):
    """A provider whose per-model answer differs from its own capabilities."""

    def __init__(self, provider_says: bool | None, model_says: bool | None) -> None:
        super().__init__(["ok"], capabilities=caps(provider_says))
        self.model_says = model_says

    def model_capabilities(self, model: str) -> ProviderCapabilities:
        return caps(self.model_says)


def caps(tool_calling: bool | None) -> ProviderCapabilities:
    return ProviderCapabilities(
        streaming=True,
        tool_calling=tool_calling,
        model_management=False,
        embeddings=False,
        token_counting=False,
        guided_decoding=False,
        vision=None,
        thinking=None,
    )


@pytest.mark.parametrize(
    ("provider_says", "model_says", "native"),
    [
        (True, False, False),  # the model's answer wins when it is known
        (False, True, True),
        (None, False, False),
        (None, True, True),
        (True, None, True),  # unknown for the model: the provider decides
        (False, None, False),
        (None, None, True),  # unknown everywhere: native, which most servers accept
    ],
)
def test_auto_mode_asks_the_model_then_the_provider(
    provider_says: bool | None, model_says: bool | None, native: bool
) -> None:
    provider = _PerModel(provider_says, model_says)
    chat = ChatClient(provider, tools=ToolRegistry([add]), model="m")
    list(chat.chat("x"))
    request = provider.requests[0]
    assert (request.tools is not None) is native
    assert ("Action Input" in (request.system_prompt or "")) is not native


# --------------------------------------------------------------------------- run / persistence


def test_run_phases() -> None:
    chat, _ = client("All done.", "Which city?")
    conv = chat.conversation()
    assert conv.run("go").phase == "completed"
    result = conv.run("go", is_complete=lambda text: not text.endswith("?"))
    assert result.phase == "waiting_user" and result.text == "Which city?"


def test_run_failed_and_cancelled() -> None:
    chat, _ = client([ErrorEvent(ErrorInfo("down", "CONNECTION_FAILED"))])
    result = chat.conversation().run("x")
    assert result.phase == "failed" and result.error is not None
    assert result.error.code == "CONNECTION_FAILED"
    cancel = threading.Event()
    cancel.set()
    chat2, _ = client("x")
    assert chat2.conversation().run("x", cancel=cancel).phase == "cancelled"
    turns = [[call("add", {"a": 1, "b": 1}), FinishEvent("tool")]] * 3
    chat3, _ = client(*turns, tools=[add], max_turns=2)
    result = chat3.conversation().run("x")
    assert result.phase == "failed" and result.error is not None
    assert result.error.code == "MAX_TURNS" and result.turns == 2


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    chat, _ = client([call("add", {"a": 1, "b": 2}), FinishEvent("tool")], "3", tools=[add])
    conv = chat.conversation(system_prompt="sys")
    list(conv.send("1+2"))
    path = tmp_path / "conv.json"
    conv.save(path)
    loaded = Conversation.load(path, chat)
    assert loaded.history == conv.history
    assert loaded.system_prompt == "sys"


def test_saving_where_it_cannot_write_is_a_config_error(tmp_path: Path) -> None:
    conv = ChatClient(ScriptedProvider(), model="m").conversation()
    target = tmp_path / "no" / "such" / "dir" / "conv.json"
    with pytest.raises(ConfigError, match="cannot save the conversation") as caught:
        conv.save(target)
    assert caught.value.code == "CONFIG_INVALID"
    assert not target.parent.exists()


def test_load_rejects_garbage(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError):
        Conversation.load(path, ChatClient(ScriptedProvider(), model="m"))


def test_chat_client_accepts_a_registry() -> None:
    registry = ProviderRegistry()
    a, b = ScriptedProvider(["from a"], name="a"), ScriptedProvider(["from b"], name="b")
    registry.register(a)
    registry.register(b)
    registry.set_default("a")
    chat = ChatClient(registry, model="m")
    assert TextEvent("from b") in list(chat.chat("x", provider="b"))
    assert TextEvent("from a") in list(chat.chat("x"))


def test_bad_settings_raise_config_error() -> None:
    with pytest.raises(OllmError):
        ChatClient(ScriptedProvider(), max_turns=0)
    with pytest.raises(OllmError):
        ChatClient(ScriptedProvider(), max_parallel_tools=0)


def test_history_given_to_a_turn_is_a_snapshot() -> None:
    """Turn initialization: each turn starts from the conversation state as it was."""
    chat, provider = client([call("add", {"a": 1, "b": 1}), FinishEvent("tool")], "2", tools=[add])
    list(chat.chat("x"))
    assert len(provider.requests[0].messages) == 1
    assert len(provider.requests[1].messages) == 3
    assert isinstance(provider.requests[0].messages[0], Message)
