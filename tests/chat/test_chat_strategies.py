"""The chat runtime's parts on their own: the two tool strategies, the endings table, the
per-call cancel events of a tool batch, and the keyword-only chat signature."""

from __future__ import annotations

import inspect
import threading
import time
import typing
from typing import Any

import pytest
from support.transport_support import wait_for_threads

from ollm_lite.chat import ChatClient, Conversation
from ollm_lite.chat._strategies import (
    Answer,
    Calls,
    GiveUp,
    NativeTools,
    ReActTools,
    Retry,
    Turn,
)
from ollm_lite.providers.base import collect_result
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import (
    ChatFinishEvent,
    ChatFinishReason,
    FinishEvent,
    FinishReason,
    GenerationOptions,
    Message,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolSchema,
    WarningEvent,
)
from ollm_lite.types._finish_reasons import (
    chat_reason,
    ending_of,
    result_reason,
    run_phase,
    stop_error,
)

WEATHER = ToolSchema(
    "get_weather",
    "The weather in a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)


def request() -> ProviderRequest:
    options = GenerationOptions(stop=["END"])
    return ProviderRequest("m", [Message.user("hi")], system_prompt="Be brief.", options=options)


# --------------------------------------------------------------------------- native


def test_native_prepare_offers_the_schemas_and_leaves_the_request_alone() -> None:
    plain = request()
    prepared = NativeTools([WEATHER]).prepare(plain)
    assert prepared.tools == [WEATHER]
    assert plain.tools is None
    assert NativeTools([]).prepare(plain).tools is None


def test_native_answer_warns_when_the_answer_was_cut() -> None:
    step = NativeTools([]).interpret(Turn(1, text="Hel", finish_reason="length"))
    assert isinstance(step, Answer) and step.text == "Hel"
    assert [type(e) for e in step.events] == [WarningEvent]
    assert NativeTools([]).interpret(Turn(1, text="Hello", finish_reason="stop")).events == ()


def test_native_calls_get_ids_of_their_own_and_ride_on_the_assistant_message() -> None:
    calls = [ToolCall.from_arguments("", "get_weather", {"city": c}) for c in ("Oslo", "Rome")]
    step = NativeTools([WEATHER]).interpret(Turn(3, text="Checking.", tool_calls=calls))
    assert isinstance(step, Calls)
    assert [c.id for c in step.calls] == ["call_3_0", "call_3_1"]
    assert step.message.role == "assistant" and step.message.text == "Checking."
    assert step.message.tool_calls == step.calls
    assert [c.id for c in calls] == ["", ""]  # the model's calls are not changed


# --------------------------------------------------------------------------- ReAct


def test_react_prepare_writes_the_tools_into_the_prompt_and_stops_at_observation() -> None:
    plain = request()
    prepared = ReActTools([WEATHER]).prepare(plain)
    assert prepared.tools is None
    assert prepared.system_prompt is not None
    assert prepared.system_prompt.startswith("Be brief.\n\n")
    assert "get_weather" in prepared.system_prompt
    assert prepared.options.stop == ["END", "\nObservation:"]
    assert plain.options.stop == ["END"] and plain.system_prompt == "Be brief."


def test_react_final_answer_is_the_turns_text() -> None:
    turn = Turn(1, text="Thought: I know it.\nFinal Answer: 42")
    step = ReActTools([WEATHER]).interpret(turn)
    assert isinstance(step, Answer) and step.text == "42"
    assert step.events == (ThinkingEvent("I know it."), TextEvent("42"))
    assert turn.text == "42"


def test_react_action_becomes_one_call() -> None:
    text = 'Thought: look it up\nAction: get_weather\nAction Input: {"city": "Oslo"}'
    step = ReActTools([WEATHER]).interpret(Turn(2, text=text))
    assert isinstance(step, Calls)
    [call] = step.calls
    assert (call.id, call.name, call.args) == ("react_2", "get_weather", {"city": "Oslo"})
    assert step.message.tool_calls == [] and "Action: get_weather" in step.message.text


def test_react_asks_for_corrections_then_gives_up() -> None:
    strategy = ReActTools([WEATHER])
    bad = Turn(1, text="Action: get_weather\nAction Input: {city: Oslo")
    for _ in range(2):  # ReActToolHandler's default max_corrections
        step = strategy.interpret(bad)
        assert isinstance(step, Retry)
        said, correction = step.messages
        assert said.role == "assistant" and correction.role == "user"
    step = strategy.interpret(bad)
    assert isinstance(step, GiveUp) and step.error.code == "LLM_BAD_RESPONSE"


def test_react_a_good_step_resets_the_correction_count() -> None:
    strategy = ReActTools([WEATHER])
    bad = Turn(1, text="Action: get_weather\nAction Input: {city: Oslo")
    good = Turn(2, text='Action: get_weather\nAction Input: {"city": "Oslo"}')
    for _ in range(3):
        assert isinstance(strategy.interpret(bad), Retry)
        assert isinstance(strategy.interpret(bad), Retry)
        assert isinstance(strategy.interpret(good), Calls)


# --------------------------------------------------------------------------- endings


@pytest.mark.parametrize("reason", typing.get_args(FinishReason))
def test_every_provider_reason_has_one_chat_result_reason(reason: str) -> None:
    ending = ending_of(reason)
    if reason == "cancelled":
        assert ending == "cancelled"
        return
    assert result_reason(ending, has_calls=True) == "tool_calls"
    expected = "tool_calls" if reason == "tool" else reason
    assert result_reason(ending, has_calls=False) == expected
    answer = [TextEvent("x"), FinishEvent(reason)]  # type: ignore[arg-type]
    assert collect_result(answer).finish_reason == expected


@pytest.mark.parametrize("reason", typing.get_args(ChatFinishReason))
def test_every_chat_reason_has_a_run_phase(reason: str) -> None:
    phase = run_phase(reason, done=True)
    expected = {"complete": "completed", "cancelled": "cancelled"}.get(reason, "failed")
    assert phase == expected
    if reason == "complete":
        assert run_phase(reason, done=False) == "waiting_user"
    if phase == "failed":
        assert stop_error(reason).code


def test_the_chat_ends_map_to_the_chat_finish_reasons() -> None:
    ends = ["answered", "truncated", "cancelled", "max_turns", "loop", "token_limit", "failed"]
    assert [chat_reason(e) for e in ends] == [  # type: ignore[arg-type]
        "complete",
        "complete",
        "cancelled",
        "max_turns",
        "loop_detected",
        "token_limit",
        "error",
    ]


# --------------------------------------------------------------------------- tool batch


def test_a_timed_out_tool_is_told_through_its_own_cancel_event() -> None:
    seen: list[bool] = []

    @tool
    def stuck(cancel: threading.Event) -> str:
        """Waits until told to stop."""
        seen.append(cancel.wait(10))
        return "late"

    provider = ScriptedProvider(
        [[ToolCallEvent(ToolCall.from_arguments("c1", "stuck", {})), FinishEvent("tool")], "ok"]
    )
    baseline = threading.active_count()
    chat = ChatClient(provider, tools=ToolRegistry([stuck]), model="m", tool_timeout=0.2)
    caller = threading.Event()
    events = list(chat.chat("x", cancel=caller))
    [result] = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.error is not None and result.error.code == "TOOL_TIMEOUT"
    assert events[-1] == ChatFinishEvent("complete")
    assert wait_for_threads(baseline) <= baseline
    assert seen == [True]  # the tool's event was set: it stopped well before 10 s
    assert not caller.is_set()


def test_cancelling_a_chat_reaches_every_running_tool() -> None:
    started = threading.Barrier(3)
    seen: list[bool] = []

    @tool
    def slow(n: int, cancel: threading.Event) -> int:
        """Waits until told to stop.

        Args:
            n: Which call.
        """
        started.wait(10)
        seen.append(cancel.wait(10))
        return n

    calls = [ToolCallEvent(ToolCall.from_arguments(f"c{n}", "slow", {"n": n})) for n in (1, 2)]
    provider = ScriptedProvider([[*calls, FinishEvent("tool")], "never sent"])
    chat = ChatClient(provider, tools=ToolRegistry([slow]), model="m")
    cancel = threading.Event()

    def cancel_when_both_run() -> None:
        started.wait(10)
        cancel.set()

    helper = threading.Thread(target=cancel_when_both_run)
    helper.start()
    events = list(chat.chat("x", cancel=cancel))
    helper.join()
    assert events[-1] == ChatFinishEvent("cancelled")
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert seen == [True, True]


# --------------------------------------------------------------------------- signatures


@pytest.mark.parametrize("method", [ChatClient.chat, Conversation.send])
def test_everything_after_the_prompt_is_keyword_only(method: Any) -> None:
    params = list(inspect.signature(method).parameters.values())[2:]
    assert params and all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params)


def test_chat_refuses_a_positional_provider() -> None:
    chat = ChatClient(ScriptedProvider(["hi"]), model="m")
    with pytest.raises(TypeError):
        chat.chat("x", "scripted")  # type: ignore[misc]
