"""The chat runtime's promises about what it does not do: write the caller's cancel event, hang
on a tool whose failure cannot be printed, or call a parallel batch of calls a loop."""

from __future__ import annotations

import threading
from typing import Any

from ollm_lite.chat import ChatClient
from ollm_lite.providers.scripted import ScriptedProvider, ScriptedTurn
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import (
    ChatFinishEvent,
    FinishEvent,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallStartEvent,
    ToolResult,
)

#: Generous bound for a chat that must end (a hang is the failure, not slowness).
HANG_S = 30.0


def call(name: str, args: dict[str, Any], id: str = "c1") -> ToolCallEvent:
    return ToolCallEvent(ToolCall.from_arguments(id, name, args))


def finish_of(events: list[Any]) -> ChatFinishEvent:
    assert isinstance(events[-1], ChatFinishEvent), events
    return events[-1]


# --------------------------------------------------------------------------- the caller's cancel


def test_leaving_a_chat_early_does_not_set_the_callers_cancel_event() -> None:
    """``break`` + ``close()`` stop the chat but leave the caller's event alone, so the next
    chat sharing that event still runs."""
    cancel = threading.Event()
    provider = ScriptedProvider([ScriptedTurn([TextEvent("a"), TextEvent("b")], delay=0.01), "ok"])
    client = ChatClient(provider, model="m")
    gen = client.chat("x", cancel=cancel)
    for event in gen:
        if isinstance(event, TextEvent):
            break
    gen.close()
    assert not cancel.is_set()
    events = list(client.chat("again", cancel=cancel))
    assert finish_of(events) == ChatFinishEvent("complete")
    assert [e.value for e in events if isinstance(e, TextEvent)] == ["ok"]


def test_closing_one_chat_does_not_cut_off_a_concurrent_chat_on_the_same_event() -> None:
    """Two chats share one cancel event; closing the first mid-tool leaves the second whole."""
    cancel = threading.Event()
    started = threading.Event()
    release = threading.Event()

    @tool
    def slow(cancel: threading.Event) -> str:
        """Wait until released or cancelled."""
        started.set()
        release.wait(HANG_S)
        return "cancelled" if cancel.is_set() else "done"

    first = ChatClient(
        ScriptedProvider([[call("slow", {}), FinishEvent("tool")], "never"]),
        tools=[slow],
        model="m",
    )
    gen = first.chat("x", cancel=cancel)
    for event in gen:
        if isinstance(event, ToolCallStartEvent):
            break
    assert started.wait(HANG_S)
    gen.close()
    assert not cancel.is_set()

    second = ChatClient(
        ScriptedProvider([[call("slow", {}), FinishEvent("tool")], "answer"]),
        tools=[slow],
        model="m",
    )
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.extend(second.chat("y", cancel=cancel)))
    worker.start()
    release.set()
    worker.join(HANG_S)
    assert not worker.is_alive()
    results = [e.result for e in out if e.type == "tool_call_result"]
    assert [r.data for r in results] == ["done"]
    assert finish_of(out) == ChatFinishEvent("complete")


def test_the_callers_event_still_cancels_tools_and_requests() -> None:
    """Setting the caller's event reaches a running tool (through the chat's own event)."""
    cancel = threading.Event()
    seen: list[bool] = []

    @tool
    def waiter(cancel: threading.Event) -> str:
        """Wait for the cancel event."""
        seen.append(cancel.wait(HANG_S))
        return "x"

    client = ChatClient(
        ScriptedProvider([[call("waiter", {}), FinishEvent("tool")], "never"]),
        tools=[waiter],
        model="m",
    )
    events = []
    for event in client.chat("x", cancel=cancel):
        events.append(event)
        if isinstance(event, ToolCallStartEvent):
            cancel.set()
    assert finish_of(events) == ChatFinishEvent("cancelled")
    assert cancel.is_set()


# --------------------------------------------------------------------------- loop detection


@tool
def roll_die() -> int:
    """Roll a die (always fails here)."""
    raise RuntimeError("the die fell off the table")


def test_identical_failing_calls_in_one_turn_are_not_a_loop() -> None:
    """Three identical parallel calls failing in one turn: the model sees the three errors
    and the chat goes on."""
    burst = [call("roll_die", {}, f"c{i}") for i in range(3)]
    provider = ScriptedProvider([[*burst, FinishEvent("tool")], "I could not roll."])
    client = ChatClient(provider, tools=ToolRegistry([roll_die]), model="m")
    events = list(client.chat("roll three dice"))
    assert finish_of(events) == ChatFinishEvent("complete")
    assert len(provider.requests) == 2
    tool_messages = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert len(tool_messages) == 3
    assert all('"ok": false' in m.text for m in tool_messages)


def test_the_same_failing_call_in_three_turns_is_a_loop_however_many_per_turn() -> None:
    """Repeats count turn by turn: three turns of the same burst end with loop_detected."""
    burst = [call("roll_die", {}, f"c{i}") for i in range(3)]
    turns = [[*burst, FinishEvent("tool")] for _ in range(4)]
    provider = ScriptedProvider(turns)
    client = ChatClient(provider, tools=[roll_die], model="m")
    assert finish_of(list(client.chat("x"))) == ChatFinishEvent("loop_detected")
    assert len(provider.requests) == 3


# --------------------------------------------------------------------------- unprintable failures


class Unprintable(Exception):
    """An exception whose text cannot be produced: ``str()`` and ``repr()`` raise."""

    def __str__(self) -> str:
        raise Unprintable()

    def __repr__(self) -> str:
        raise Unprintable()


@tool
def broken() -> str:
    """Fails with an exception that cannot be printed."""
    raise Unprintable()


def run_bounded(client: ChatClient, prompt: str) -> list[Any]:
    """The chat's events, collected on a thread: a hang fails the test instead of the run."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.extend(client.chat(prompt)), daemon=True)
    worker.start()
    worker.join(HANG_S)
    assert not worker.is_alive(), "the chat hung"
    return out


def test_execute_reports_an_exception_that_cannot_be_printed_by_its_type() -> None:
    result = ToolRegistry([broken]).execute(ToolCall.from_arguments("c1", "broken", {}))
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_EXECUTION_FAILED"
    assert "Unprintable" in result.error.message
    assert '"ok": false' in result.to_json()


def test_a_tool_whose_exception_cannot_be_printed_does_not_hang_the_chat() -> None:
    provider = ScriptedProvider([[call("broken", {}), FinishEvent("tool")], "sorry"])
    events = run_bounded(ChatClient(provider, tools=[broken], model="m"), "x")
    results = [e.result for e in events if e.type == "tool_call_result"]
    assert len(results) == 1 and not results[0].ok
    assert finish_of(events) == ChatFinishEvent("complete")


class RaisingRegistry(ToolRegistry):
    """A registry subclass that breaks the never-raises contract of ``execute``."""

    def execute(self, call: ToolCall, cancel: threading.Event | None = None) -> Any:
        raise Unprintable()


class NoneRegistry(ToolRegistry):
    """A registry subclass whose ``execute`` answers something that is no ToolResult."""

    def execute(self, call: ToolCall, cancel: threading.Event | None = None) -> Any:
        return None


def test_a_worker_whose_registry_raises_still_answers_every_call() -> None:
    """The worker thread cannot even describe the failure it caught, yet every call of the
    batch gets an ``ok=False`` result and the chat goes on."""
    calls = [call("broken", {"n": i}, f"c{i}") for i in range(3)]
    provider = ScriptedProvider([[*calls, FinishEvent("tool")], "done"])
    client = ChatClient(provider, tools=RaisingRegistry([broken]), model="m")
    events = run_bounded(client, "x")
    results = [e.result for e in events if e.type == "tool_call_result"]
    assert len(results) == 3 and not any(r.ok for r in results)
    assert finish_of(events) == ChatFinishEvent("complete")


def test_a_registry_answering_no_tool_result_gives_an_invalid_result() -> None:
    provider = ScriptedProvider([[call("broken", {}), FinishEvent("tool")], "done"])
    client = ChatClient(provider, tools=NoneRegistry([broken]), model="m")
    events = run_bounded(client, "x")
    results = [e.result for e in events if e.type == "tool_call_result"]
    assert [r.error.code for r in results if r.error] == ["TOOL_RESULT_INVALID"]
    assert finish_of(events) == ChatFinishEvent("complete")


def test_a_tool_result_with_data_json_cannot_carry_is_an_invalid_result() -> None:
    """A tool may return a ``ToolResult`` itself; its data is checked like any return value."""

    @tool
    def odd() -> ToolResult:
        """Returns a result that cannot be serialised."""
        return ToolResult(ok=True, data={"when": object(), "nan": float("nan")})

    result = ToolRegistry([odd]).execute(ToolCall.from_arguments("c1", "odd", {}))
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_RESULT_INVALID"
