"""``Session``: multi-turn in a script — history kept, saved and loaded."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.client_support import client

import ollm_lite
from ollm_lite import (
    ConfigError,
    ErrorEvent,
    ErrorInfo,
    Message,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    ToolResult,
    tool,
)


@tool
def add(a: float, b: float) -> float:
    """Add two numbers."""
    return a + b


def test_two_turns_share_the_history() -> None:
    llm, provider = client("Oslo is in Norway.", "About 700,000.")
    chat = llm.session(system="Be brief.")
    assert chat.ask("Where is Oslo?") == "Oslo is in Norway."
    assert chat.ask("How many people live there?") == "About 700,000."
    second = provider.requests[1]
    assert second.system_prompt == "Be brief."
    assert [(m.role, m.text) for m in second.messages] == [
        ("user", "Where is Oslo?"),
        ("assistant", "Oslo is in Norway."),
        ("user", "How many people live there?"),
    ]
    assert [m.role for m in chat.messages] == ["user", "assistant", "user", "assistant"]


def test_messages_is_a_copy() -> None:
    llm, _ = client("a")
    chat = llm.session()
    chat.ask("q")
    chat.messages.clear()
    assert len(chat.messages) == 2


def test_stream_run_and_events_continue_the_session() -> None:
    call = ToolCallEvent(ToolCall.from_arguments("c1", "add", {"a": 1, "b": 2}))
    llm, provider = client("one", [call], "three", "four")
    chat = llm.session(tools=[add])
    assert "".join(chat.stream("first")) == "one"
    reply = chat.run("1+2?")
    assert reply.text == "three"
    assert [m.role for m in reply.messages] == [
        "user",
        "assistant",
        "user",
        "assistant",
        "tool",
        "assistant",
    ]
    events = list(chat.events("again"))
    assert events[-1].type == "chat_finish"
    assert len(provider.requests[-1].messages) == 7
    assert len(chat.messages) == 8


def test_a_failed_call_keeps_the_partial_answer_and_the_session_goes_on() -> None:
    llm, _ = client([TextEvent("half"), ErrorEvent(ErrorInfo("cut", "CONNECTION_FAILED"))], "whole")
    chat = llm.session()
    with pytest.raises(ollm_lite.ConnectionFailed):
        chat.ask("first")
    assert chat.ask("second") == "whole"
    assert [m.text for m in chat.messages] == ["first", "half", "second", "whole"]


def test_a_bad_input_leaves_the_history_alone() -> None:
    llm, _ = client("a")
    chat = llm.session()
    with pytest.raises(ConfigError):
        chat.ask([{"role": "user", "content": "ok"}, {"role": "nobody"}])
    assert chat.messages == []


def test_tool_calls_left_to_the_caller_are_answered_in_the_session() -> None:
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    call = ToolCallEvent(ToolCall.from_arguments("c1", "lookup", {"q": "x"}))
    llm, provider = client([call], "found it")
    chat = llm.session(tools=[lookup])
    reply = chat.run("find x")
    assert reply.finish == "tool_calls"
    pending = reply.tool_calls[0]
    final = chat.run([Message.tool(ToolResult(True, "x=1"), pending)])
    assert final.text == "found it"
    assert [m.role for m in provider.requests[1].messages] == ["user", "assistant", "tool"]


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    llm, provider = client("Oslo.", "Norway.")
    chat = llm.session(system="Be brief.")
    chat.ask("Capital?")
    path = tmp_path / "chat.json"
    chat.save(path)
    data = json.loads(path.read_text("utf-8"))
    assert data["system"] == "Be brief." and len(data["messages"]) == 2
    again = ollm_lite.load_session(path, client=llm)
    assert again.messages == chat.messages
    assert again.system == "Be brief."
    assert again.ask("Country?") == "Norway."
    assert len(provider.requests[1].messages) == 3


def test_load_session_uses_the_default_client(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm, _ = client("hi")
    monkeypatch.setattr(ollm_lite.client, "_default", llm)
    path = tmp_path / "s.json"
    llm.session().save(path)
    assert ollm_lite.load_session(path).client is llm


@pytest.mark.parametrize("content", ["not json", '{"messages": [{"role": "x"}]}', "[]"])
def test_loading_a_bad_file_is_a_config_error(tmp_path: Path, content: str) -> None:
    llm, _ = client()
    path = tmp_path / "bad.json"
    path.write_text(content, "utf-8")
    with pytest.raises(ConfigError):
        ollm_lite.load_session(path, client=llm)
    with pytest.raises(ConfigError):
        ollm_lite.load_session(tmp_path / "missing.json", client=llm)


def test_saving_where_it_cannot_write_is_a_config_error(tmp_path: Path) -> None:
    llm, _ = client()
    with pytest.raises(ConfigError):
        llm.session().save(tmp_path / "no" / "such" / "dir" / "s.json")
