"""Value types: constructors, helpers, JSON forms."""

from __future__ import annotations

import json

from ollm_lite.types import (
    ChatResult,
    ErrorInfo,
    FinishEvent,
    ImagePart,
    Message,
    TextEvent,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
)


def test_message_helpers_and_text() -> None:
    """The helper constructors build the documented shapes."""
    img = ImagePart("aGk=", "image/png")
    user = Message.user("look", images=[img])
    assert user.role == "user" and user.text == "look" and user.images == [img]
    call = ToolCall("c1", "f", {"a": 1}, '{"a": 1}')
    asst = Message.assistant("", tool_calls=[call])
    assert asst.parts == [] and asst.tool_calls == [call]
    tool_msg = Message.tool(ToolResult(ok=True, data=3), call)
    assert (tool_msg.role, tool_msg.name, tool_msg.tool_call_id) == ("tool", "f", "c1")
    assert json.loads(tool_msg.text) == {"ok": True, "data": 3}
    assert Message("user", [TextPart("a"), TextPart("b")]).text == "ab"


def test_tool_call_from_arguments() -> None:
    """Strings are parsed, objects are dumped, garbage gives empty args and keeps the raw text."""
    assert ToolCall.from_arguments("1", "f", '{"x": 2}').args == {"x": 2}
    obj = ToolCall.from_arguments("1", "f", {"x": 2})
    assert json.loads(obj.arguments) == {"x": 2}
    bad = ToolCall.from_arguments("1", "f", '{"x": ')
    assert bad.args == {} and bad.arguments == '{"x": '
    assert ToolCall.from_arguments("1", "f", "[1, 2]").args == {}
    assert ToolCall.from_arguments("1", "f", "[" * 100000).args == {}


def test_tool_result_to_json_never_raises() -> None:
    """Unserialisable data falls back to text; errors carry code and message."""
    assert json.loads(ToolResult(ok=True, data={1, 2}).to_json())["ok"] is True
    err = ToolResult(ok=False, error=ErrorInfo("nope", "TOOL_NOT_FOUND", {"name": "x"}))
    assert json.loads(err.to_json()) == {
        "ok": False,
        "error": {"code": "TOOL_NOT_FOUND", "message": "nope", "details": {"name": "x"}},
    }
    circular: list[object] = []
    circular.append(circular)
    assert json.loads(ToolResult(ok=True, data=circular).to_json())["ok"] is True


def test_chat_result_to_openai() -> None:
    """to_openai gives OpenAI-format tool calls with JSON-string arguments."""
    call = ToolCall("call_1", "get", {"q": "x"}, '{"q": "x"}')
    result = ChatResult(None, "tool_calls", [call], Usage(1, 2, 3))
    assert result.to_openai() == {
        "content": None,
        "finish_reason": "tool_calls",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get", "arguments": '{"q": "x"}'},
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
    }


def test_events_have_class_level_types() -> None:
    """Events match on .type without it being a field."""
    assert TextEvent("a").type == "text" and TextEvent.type == "text"
    assert FinishEvent("stop").type == "finish"
    assert TextEvent("a") == TextEvent("a")
