"""A ``tools/call`` result as the ToolResult the model reads (MCP specification, Server >
Tools > Tool Result): never raises, and every documented content type keeps its data."""

from __future__ import annotations

from typing import Any

from hypothesis import given, strategies as st
from support.strategies import json_values

from ollm_lite.mcp.content import tool_result
from ollm_lite.types import ToolResult

items = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, st.text(max_size=20)),
    st.builds(
        lambda d, m: {"type": "image", "data": d, "mimeType": m},
        st.text(max_size=20),
        st.sampled_from(["image/png", "image/jpeg"]),
    ),
    st.builds(
        lambda d: {"type": "audio", "data": d, "mimeType": "audio/wav"}, st.text(max_size=20)
    ),
    st.builds(
        lambda u, t: {"type": "resource", "resource": {"uri": u, "text": t}},
        st.text(max_size=20),
        st.text(max_size=20),
    ),
    st.builds(
        lambda u, n: {"type": "resource_link", "uri": u, "name": n},
        st.text(max_size=20),
        st.text(max_size=20),
    ),
    json_values,
)
results = st.one_of(
    json_values,
    st.fixed_dictionaries(
        {"content": st.lists(items, max_size=4)},
        optional={
            "isError": st.one_of(st.booleans(), json_values),
            "structuredContent": st.dictionaries(st.text(max_size=5), json_values, max_size=3),
        },
    ),
)


@given(results)
def test_never_raises_and_always_serialises(result: Any) -> None:
    mapped = tool_result(result)
    assert isinstance(mapped, ToolResult)
    assert mapped.to_json()
    if not mapped.ok:
        assert mapped.error is not None and mapped.error.code


@given(st.text(max_size=50))
def test_one_text_item_is_the_text(text: str) -> None:
    assert tool_result({"content": [{"type": "text", "text": text}]}) == ToolResult(True, text)


@given(st.dictionaries(st.text(max_size=5), json_values, max_size=3))
def test_structured_content_wins(data: dict[str, Any]) -> None:
    result = {"content": [{"type": "text", "text": "{}"}], "structuredContent": data}
    assert tool_result(result) == ToolResult(True, data)


@given(st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=3))
def test_is_error_is_not_ok_with_the_server_text(texts: list[str]) -> None:
    mapped = tool_result({"content": [{"type": "text", "text": t} for t in texts], "isError": True})
    assert not mapped.ok and mapped.error is not None
    assert mapped.error.code == "TOOL_EXECUTION_FAILED"
    assert mapped.error.message == "\n".join(texts)


def test_every_content_type_keeps_its_data() -> None:
    raw = [
        {"type": "text", "text": "hi", "annotations": {"audience": ["user"]}},
        {"type": "image", "data": "AAA=", "mimeType": "image/png"},
        {"type": "audio", "data": "BBB=", "mimeType": "audio/wav"},
        {
            "type": "resource",
            "resource": {"uri": "file:///a", "mimeType": "text/plain", "text": "t"},
        },
        {"type": "resource", "resource": {"uri": "file:///b", "blob": "CCC="}},
        {"type": "resource_link", "uri": "file:///c", "name": "c", "mimeType": "text/x"},
        {"type": "future_kind", "value": 1},
    ]
    assert tool_result({"content": raw}).data == [
        {"type": "text", "text": "hi"},
        {"type": "image", "mimeType": "image/png", "data": "AAA="},
        {"type": "audio", "mimeType": "audio/wav", "data": "BBB="},
        {"type": "resource", "uri": "file:///a", "mimeType": "text/plain", "text": "t"},
        {"type": "resource", "uri": "file:///b", "blob": "CCC="},
        {"type": "resource_link", "uri": "file:///c", "name": "c", "mimeType": "text/x"},
        {"type": "future_kind", "value": 1},
    ]


def test_malformed_results_are_result_invalid() -> None:
    for bad in (None, [], "x", {"content": "x"}, {"content": {"type": "text"}}):
        mapped = tool_result(bad)
        assert not mapped.ok and mapped.error is not None
        assert mapped.error.code == "TOOL_RESULT_INVALID"
    assert tool_result({}).data == []  # no content at all: an empty list
