"""``Conversation.load`` on damaged files: success or ``ConfigError``, never anything else.

A saved conversation is mutated the way a disk, an editor or a bad merge damages a file: a value
anywhere in the JSON tree replaced by any JSON value, a key or item deleted, a key added, or the
raw bytes flipped, cut or spliced. ``load`` must either raise ``ConfigError`` (``CONFIG_INVALID``)
or return a conversation whose every field has the type ``save`` writes, and that saves again.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from support.strategies import json_of

from ollm_lite.chat import ChatClient, Conversation
from ollm_lite.errors import ConfigError
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.types import ImagePart, Message, TextPart, ToolCall, ToolResult

STRUCTURE_EXAMPLES = 1500
BYTES_EXAMPLES = 600

CLIENT = ChatClient(ScriptedProvider(), model="m")

json_values = json_of(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)


def saved_conversation() -> dict[str, Any]:
    """A conversation with every kind of field ``save`` writes."""
    call = ToolCall.from_arguments("c1", "weather", {"city": "Oslo", "days": [1, 2]})
    history = [
        Message.user("What is the weather?", [ImagePart("aGVsbG8=", "image/png")]),
        Message("assistant", [TextPart("")], tool_calls=[call]),
        Message.tool(ToolResult(ok=True, data={"temp": 3}), call),
        Message.assistant("It is 3 degrees."),
    ]
    conversation = Conversation(CLIENT, system_prompt="Be brief.", history=history)
    return conversation.to_dict()


BASE = saved_conversation()


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a JSON tree, the root included."""
    found = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            found += paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += paths(value, (*prefix, index))
    return found


def mutate(tree: Any, path: tuple[Any, ...], operation: str, value: Any, key: str) -> Any:
    """``tree`` with one change at ``path`` (a fresh copy; ``tree`` is left alone)."""
    tree = json.loads(json.dumps(tree))
    if not path:
        return value if operation == "replace" else tree
    parent = tree
    for step in path[:-1]:
        parent = parent[step]
    last = path[-1]
    if operation == "replace":
        parent[last] = value
    elif operation == "delete":
        del parent[last]
    elif isinstance(parent[last], dict):
        parent[last][key] = value
    elif isinstance(parent[last], list):
        parent[last].insert(0, value)
    else:
        parent[last] = value
    return tree


def assert_well_formed(conversation: Conversation) -> None:
    """Every loaded field has the type ``save`` writes; the conversation saves again."""
    assert conversation.system_prompt is None or isinstance(conversation.system_prompt, str)
    for message in conversation.history:
        assert message.role in ("system", "user", "assistant", "tool")
        for part in message.parts:
            if isinstance(part, TextPart):
                assert isinstance(part.text, str)
            else:
                assert isinstance(part, ImagePart)
                assert isinstance(part.data, str) and isinstance(part.mime_type, str)
        assert message.name is None or isinstance(message.name, str)
        assert message.tool_call_id is None or isinstance(message.tool_call_id, str)
        for call in message.tool_calls:
            assert isinstance(call.id, str) and isinstance(call.name, str)
            assert isinstance(call.args, dict) and isinstance(call.arguments, str)
        assert isinstance(message.text, str)
    with tempfile.TemporaryDirectory() as tmp:
        again = Path(tmp) / "again.json"
        conversation.save(again)
        assert Conversation.load(again, CLIENT).history == conversation.history


def load_text(text: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "conversation.json"
        path.write_bytes(text)
        try:
            conversation = Conversation.load(path, CLIENT)
        except ConfigError as exc:
            assert exc.code == "CONFIG_INVALID"
            assert str(path) in exc.message
            return
        assert_well_formed(conversation)


@settings(
    max_examples=STRUCTURE_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.data(),
    st.sampled_from(["replace", "delete", "insert"]),
    json_values,
    st.text(max_size=6),
)
def test_any_structural_damage_loads_or_raises_config_error(
    data: st.DataObject, operation: str, value: Any, key: str
) -> None:
    path = data.draw(st.sampled_from(paths(BASE)), label="path")
    damaged = mutate(BASE, path, operation, value, key)
    load_text(json.dumps(damaged).encode())


@settings(max_examples=BYTES_EXAMPLES, deadline=None)
@given(
    st.integers(0, 10_000),
    st.sampled_from(["flip", "cut", "splice"]),
    st.binary(min_size=1, max_size=4),
)
def test_any_byte_damage_loads_or_raises_config_error(
    position: int, operation: str, junk: bytes
) -> None:
    raw = bytearray(json.dumps(BASE, indent=1).encode())
    at = position % len(raw)
    if operation == "flip":
        raw[at] ^= junk[0] or 1
    elif operation == "cut":
        del raw[at:]
    else:
        raw[at:at] = junk
    load_text(bytes(raw))


@pytest.mark.parametrize(
    ("where", "value"),
    [
        (("messages", 0, "parts", 0), "just a string"),
        (("messages", 1, "tool_calls", 0, "arguments"), 42),
        (("messages", 0), ["a", "list"]),
        (("messages",), {"not": "a list"}),
        (("messages", 1, "tool_calls"), "calls"),
        (("messages", 0, "parts", 0, "text"), 7),
        (("messages", 2, "name"), ["tool"]),
        (("system_prompt",), {"a": 1}),
        ((), ["top", "level", "list"]),
        (("version",), 99),
    ],
)
def test_known_damage_is_a_config_error(where: tuple[Any, ...], value: Any, tmp_path: Path) -> None:
    """The damage seen in the field: each is a ``ConfigError`` naming the file, not a crash."""
    path = tmp_path / "conversation.json"
    path.write_text(json.dumps(mutate(BASE, where, "replace", value, "")))
    with pytest.raises(ConfigError) as caught:
        Conversation.load(path, CLIENT)
    assert str(path) in caught.value.message


def test_a_directory_or_deep_nesting_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        Conversation.load(tmp_path, CLIENT)
    deep = tmp_path / "deep.json"
    deep.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError):
        Conversation.load(deep, CLIENT)
