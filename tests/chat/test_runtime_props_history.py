"""Every tool message names its tool, checked with hypothesis.

A message with role ``tool`` carries a name field identifying the tool that produced the
result. Checked where tool messages are made (``Message.tool``), in the history
a chat builds (tools that succeed, fail, or do not exist; several tools per turn), in what the
provider is sent on the next turn, and across ``Conversation.save`` / ``load``.
test_runtime_props_chat.py's history test covers the rest of the history's shape.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st

from ollm_lite.chat import ChatClient, Conversation, message_from_dict, message_to_dict
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tools import Tool, tool
from ollm_lite.types import (
    ErrorInfo,
    FinishEvent,
    Message,
    ProviderEvent,
    ToolCall,
    ToolCallEvent,
    ToolResult,
)

THREADED = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

tool_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_-]{0,20}", fullmatch=True)
json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
results = st.one_of(
    json_scalars.map(lambda v: ToolResult(ok=True, data=v)),
    st.tuples(
        st.text(max_size=20), st.sampled_from(["TOOL_EXECUTION_FAILED", "TOOL_NOT_FOUND"])
    ).map(lambda p: ToolResult(ok=False, error=ErrorInfo(p[0], p[1]))),
)


def tool_messages_answer_their_calls(history: list[Message]) -> None:
    """Each tool message names the tool of the call it answers (found by its id)."""
    calls: dict[str, ToolCall] = {}
    for message in history:
        if message.role == "assistant":
            calls.update((c.id, c) for c in message.tool_calls)
        if message.role == "tool":
            assert isinstance(message.name, str) and message.name
            assert message.tool_call_id in calls
            assert message.name == calls[message.tool_call_id].name


@given(tool_names, st.text(min_size=1, max_size=12), results)
def test_message_tool_names_the_tool(name: str, call_id: str, result: ToolResult) -> None:
    """``Message.tool`` always carries the tool's name (and the call's id), and
    the history file format keeps it."""
    call = ToolCall.from_arguments(call_id, name, {})
    message = Message.tool(result, call)
    assert message.role == "tool"
    assert (message.name, message.tool_call_id) == (name, call_id)
    assert message_from_dict(message_to_dict(message)) == message


def make_tool(name: str, fails: bool) -> Tool:
    def run(x: int) -> int:
        """Answer or fail, as planned.

        Args:
            x: A number.
        """
        if fails:
            raise ValueError(f"{name} failed on {x}")
        return x

    return tool(name=name)(run)


@st.composite
def plans(draw: st.DrawFn) -> tuple[list[Tool], list[list[ToolCall]]]:
    """Registered tools (some failing), and turns of calls to them or to unknown names."""
    names = draw(st.lists(tool_names, min_size=2, max_size=5, unique_by=str.casefold))
    registered = names[: draw(st.integers(1, len(names) - 1))]
    tools = [make_tool(n, draw(st.booleans())) for n in registered]
    turns: list[list[ToolCall]] = []
    serial = 0
    for t in range(draw(st.integers(1, 3))):
        calls: list[ToolCall] = []
        for _ in range(draw(st.integers(1, 4))):
            serial += 1  # distinct arguments: no call repeats, so no loop detection
            called = draw(st.sampled_from(names))
            calls.append(ToolCall.from_arguments(f"t{t}_{serial}", called, {"x": serial}))
        turns.append(calls)
    return tools, turns


@THREADED
@given(plans())
def test_every_tool_message_of_a_chat_names_its_tool(
    plan: tuple[list[Tool], list[list[ToolCall]]],
) -> None:
    """In the history and in every later request, each tool message — for a tool
    that succeeded, failed or does not exist — names the tool that was called."""
    tools, turns = plan
    script: list[list[ProviderEvent]] = [
        [*(ToolCallEvent(c) for c in calls), FinishEvent("tool")] for calls in turns
    ]
    provider = ScriptedProvider([*script, "done"])
    client = ChatClient(provider, tools=tools, model="m")
    conversation = client.conversation()
    list(conversation.send("go"))
    history = conversation.history
    tool_messages = [m for m in history if m.role == "tool"]
    assert [m.name for m in tool_messages] == [c.name for calls in turns for c in calls]
    tool_messages_answer_their_calls(history)
    assert len(provider.requests) == len(turns) + 1
    for request in provider.requests:
        tool_messages_answer_their_calls(request.messages)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.json"
        conversation.save(path)
        loaded = Conversation.load(path, client).history
    assert [m for m in loaded if m.role == "tool"] == tool_messages
