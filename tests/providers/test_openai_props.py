"""Properties of the OpenAI wire mapping (hypothesis).

* However the arguments of tool calls are cut into fragments (and whichever server quirk is
  used: repeated id/name, missing index after the first fragment), assembly gives back the
  calls exactly.
* However the SSE bytes of a stream are cut into network chunks, the events are the same.
* Any sequence of data values ends in exactly one terminal event, and nothing but the library's
  own events (no exception) comes out.
* Messages survive ``message_to_openai`` → ``message_from_openai``.
* Tool names, descriptions and parameter schemas survive ``tools_to_openai``.
"""

from __future__ import annotations

import contextlib
import itertools
import json
from typing import Any

from hypothesis import given, settings, strategies as st
from support.strategies import arg_objects, json_values, names

from ollm_lite.providers import _openai_wire as wire
from ollm_lite.streams import SSEDecoder, SSEEvent
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    ImagePart,
    Message,
    ProviderEvent,
    TextEvent,
    TextPart,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
)


def cuts(text: str, points: list[int]) -> list[str]:
    bounds = sorted({p % (len(text) + 1) for p in points} | {0, len(text)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def feed(data_values: list[str]) -> list[ProviderEvent]:
    state = wire.ChatStreamState()
    out: list[ProviderEvent] = []
    for data in data_values:
        out.extend(state.feed(SSEEvent(data=data)))
        if state.terminal is not None:
            break
    return [*out, *state.end()]


def chunk_data(delta: dict[str, Any], finish: str | None = None) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


@settings(max_examples=150, deadline=None)
@given(
    calls=st.lists(st.tuples(names, arg_objects), min_size=1, max_size=3),
    points=st.lists(st.integers(0, 400), max_size=8),
    repeat_id=st.booleans(),
    drop_index=st.booleans(),
)
def test_fragments_assemble_to_the_calls(
    calls: list[tuple[str, dict[str, Any]]], points: list[int], repeat_id: bool, drop_index: bool
) -> None:
    data: list[str] = []
    for i, (name, args) in enumerate(calls):
        text = json.dumps(args)
        first = {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        data.append(chunk_data({"tool_calls": [first]}))
        for piece in cuts(text, points):
            frag: dict[str, Any] = {"function": {"arguments": piece}}
            if not drop_index:
                frag["index"] = i
            if repeat_id:
                frag["id"] = f"call_{i}"
                frag["function"]["name"] = name
            data.append(chunk_data({"tool_calls": [frag]}))
    data.append(chunk_data({}, "stop"))
    data.append("[DONE]")
    events = feed(data)
    got = [e.value for e in events if isinstance(e, ToolCallEvent)]
    assert [(c.id, c.name, c.args) for c in got] == [
        (f"call_{i}", name, args) for i, (name, args) in enumerate(calls)
    ]
    assert isinstance(events[-1], FinishEvent) and events[-1].reason == "tool"


@settings(max_examples=100, deadline=None)
@given(
    words=st.lists(st.text(min_size=1, max_size=10), min_size=1, max_size=12),
    points=st.lists(st.integers(0, 5000), max_size=12),
    crlf=st.booleans(),
)
def test_network_chunking_does_not_change_events(
    words: list[str], points: list[int], crlf: bool
) -> None:
    eol = b"\r\n" if crlf else b"\n"
    body = b"".join(
        b"data: " + d.encode() + eol + eol
        for d in [*(chunk_data({"content": w}) for w in words), chunk_data({}, "stop"), "[DONE]"]
    )

    def run(pieces: list[bytes]) -> list[ProviderEvent]:
        decoder = SSEDecoder()
        data = [e.data for p in pieces for e in decoder.feed(p)] + [e.data for e in decoder.flush()]
        return feed(data)

    whole = run([body])
    bounds = sorted({p % (len(body) + 1) for p in points} | {0, len(body)})
    split = run([body[a:b] for a, b in itertools.pairwise(bounds)])
    assert split == whole
    assert "".join(e.value for e in whole if isinstance(e, TextEvent)) == "".join(words)


garbage = st.one_of(
    st.text(max_size=30),
    st.just("[DONE]"),
    json_values.map(json.dumps),
    st.builds(
        lambda d, f: chunk_data(d, f),
        st.dictionaries(
            st.sampled_from(["content", "reasoning", "tool_calls", "function_call", "role"]),
            json_values,
            max_size=3,
        ),
        st.sampled_from([None, "stop", "length", "tool_calls", "weird"]),
    ),
    st.builds(lambda e: json.dumps({"error": e}), json_values),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(garbage, max_size=12))
def test_any_data_ends_in_exactly_one_terminal(data: list[str]) -> None:
    events = feed(data)
    terminals = [e for e in events if isinstance(e, FinishEvent | ErrorEvent)]
    assert len(terminals) == 1 and events[-1] is terminals[0]
    if isinstance(terminals[0], ErrorEvent):
        assert terminals[0].error.code == "LLM_BAD_RESPONSE"


text_parts = st.text(min_size=1, max_size=20)
b64 = st.from_regex(r"[A-Za-z0-9+/]{4,16}", fullmatch=True)


@settings(max_examples=100, deadline=None)
@given(
    role=st.sampled_from(["system", "user", "assistant", "tool"]),
    text=text_parts,
    images=st.lists(st.tuples(b64, st.sampled_from(["image/png", "image/jpeg"])), max_size=2),
    calls=st.lists(st.tuples(names, arg_objects), max_size=2),
)
def test_message_round_trip(
    role: str,
    text: str,
    images: list[tuple[str, str]],
    calls: list[tuple[str, dict[str, Any]]],
) -> None:
    parts: list[Any] = [TextPart(text)]
    if role == "user":
        parts += [ImagePart(d, m) for d, m in images]
    tool_calls = (
        [ToolCall.from_arguments(f"c{i}", n, a) for i, (n, a) in enumerate(calls)]
        if role == "assistant"
        else []
    )
    message = Message(
        role,
        parts,
        tool_call_id="c0" if role == "tool" else None,  # type: ignore[arg-type]
        tool_calls=tool_calls,
    )
    back = wire.message_from_openai(wire.message_to_openai(message))
    assert back.role == message.role
    assert back.parts == message.parts
    assert back.tool_calls == message.tool_calls
    assert back.tool_call_id == message.tool_call_id


_chunk_objects = st.builds(
    lambda text, extra: {"choices": [{"index": 0, "delta": {"content": text}}], **extra},
    st.text(max_size=10),
    st.dictionaries(st.sampled_from(["id", "model", "x"]), json_values, max_size=2),
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            _chunk_objects.map(json.dumps),
            _chunk_objects.map(lambda o: json.dumps(o) + " \t"),
            _chunk_objects.map(lambda o: json.dumps(o) + " trailing"),
            st.text(max_size=12).map(lambda t: "{" + t),
        ),
        max_size=8,
    )
)
def test_data_values_parse_exactly_as_json_loads(values: list[str]) -> None:
    """The scanner fast path in ``handle`` accepts and rejects exactly what json.loads does."""
    accepted = []
    for value in values:
        with contextlib.suppress(ValueError):
            accepted.append(json.loads(value))
    state = wire.ChatStreamState()
    texts = [
        e.value for v in values for e in state.feed(SSEEvent(data=v)) if isinstance(e, TextEvent)
    ]
    contents = [obj["choices"][0]["delta"]["content"] for obj in accepted if "choices" in obj]
    expected = [c for c in contents if c]
    assert texts == expected
    assert state.skipped == len(values) - len(accepted)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            _chunk_objects.map(json.dumps),
            _chunk_objects.map(lambda o: json.dumps(o) + " trailing"),
            st.sampled_from(["[DONE]", "", "ping", '{"error": {"message": "boom"}}']),
        ),
        max_size=8,
    )
)
def test_a_data_string_is_read_as_its_message_event(values: list[str]) -> None:
    """The state reads a bare data string (what SSEDataDecoder gives for ``message`` events)
    exactly as the SSEEvent carrying it: same events, same terminal, same skip count."""

    def run(items: list[Any]) -> tuple[list[ProviderEvent], int]:
        state = wire.ChatStreamState()
        out: list[ProviderEvent] = []
        for item in items:
            out.extend(state.feed(item))
            if state.terminal is not None:
                break
        return [*out, *state.end()], state.skipped

    assert run(values) == run([SSEEvent(data=v) for v in values])


parameter_schemas = st.builds(
    lambda props, required: {
        "type": "object",
        "properties": {k: {"type": t} for k, t in props.items()},
        **({"required": sorted(props)[:required]} if required else {}),
    },
    st.dictionaries(names, st.sampled_from(["string", "integer", "boolean", "array"]), max_size=4),
    st.integers(0, 2),
)
tool_schemas = st.builds(
    ToolSchema, names, st.none() | st.text(max_size=40), st.none() | parameter_schemas
)


@given(st.lists(tool_schemas, max_size=5))
def test_tool_schemas_are_preserved(tools: list[ToolSchema]) -> None:
    """Names, descriptions and parameter definitions are all kept, in order."""
    out = wire.tools_to_openai(tools)
    assert json.loads(json.dumps(out)) == out  # the body is plain JSON
    assert len(out) == len(tools)
    for schema, item in zip(tools, out, strict=True):
        fn = item["function"]
        assert item["type"] == "function" and fn["name"] == schema.name
        assert (fn.get("description") or None) == (schema.description or None)
        expected = schema.parameters or {"type": "object", "properties": {}}
        assert fn["parameters"] == expected
