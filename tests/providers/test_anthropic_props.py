"""Properties of the Messages API wire (hypothesis).

* Any ``Message`` history → a ``/v1/messages`` body → a history read back by a decoder written
  here from the Messages API reference (https://platform.claude.com/docs/en/api/messages) is
  the history given, apart from the merging of consecutive turns of one role the API requires:
  text, images, tool calls, tool results (with ``is_error`` for ``ok: false``), kept thinking
  blocks, and the system prompt with the system messages.
* However a stream is cut into reads, the reader gives the same events and the same kept
  blocks (Anthropic's documented transcripts, and generated answers streamed).
* Bad bytes end only in the library's own error event, never an exception.
"""

from __future__ import annotations

import base64
import itertools
import json
from typing import Any

from hypothesis import given, settings, strategies as st
from support.anthropic_support import BASIC, THINKING, TOOL_USE, sse_of, whole_message
from support.strategies import arg_objects, json_values, names

from ollm_lite.providers._anthropic_answers import ChatStreamState, MessagesDecoder
from ollm_lite.providers._anthropic_wire import request_body
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    ImagePart,
    Message,
    Part,
    ProviderBlock,
    ProviderRequest,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolResult,
)

texts = st.text(max_size=20)
ids = st.from_regex(r"toolu_[A-Za-z0-9]{4,10}", fullmatch=True)
images = st.builds(
    ImagePart,
    st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]),
)
parts: st.SearchStrategy[list[Part]] = st.lists(st.builds(TextPart, texts) | images, max_size=4)
tool_calls = st.builds(ToolCall.from_arguments, ids, names, arg_objects)
thinking_blocks = st.one_of(
    st.builds(
        lambda t, s: ProviderBlock(
            "anthropic", {"type": "thinking", "thinking": t, "signature": s}
        ),
        texts,
        st.from_regex(r"[A-Za-z0-9+/]{8,16}", fullmatch=True),
    ),
    st.builds(
        lambda d: ProviderBlock("anthropic", {"type": "redacted_thinking", "data": d}),
        st.from_regex(r"[A-Za-z0-9+/]{8,16}", fullmatch=True),
    ),
)
other_blocks = st.builds(
    lambda sig: ProviderBlock("gemini", {"id": "x", "thoughtSignature": sig}), texts
)
messages = st.one_of(
    st.builds(lambda p: Message("user", p), parts),
    st.builds(
        lambda p, calls, blocks: Message(
            "assistant", p, tool_calls=calls, provider_blocks=tuple(blocks)
        ),
        st.lists(st.builds(TextPart, texts), max_size=2),
        st.lists(tool_calls, max_size=3),
        st.lists(thinking_blocks | other_blocks, max_size=2),
    ),
    st.builds(
        lambda ok, data, call: Message.tool(ToolResult(ok, data), call),
        st.booleans(),
        json_values,
        tool_calls,
    ),
    st.builds(Message.system, texts),
)


def decode(body: dict[str, Any]) -> tuple[str | None, list[Message]]:
    """The system prompt and messages a ``/v1/messages`` body holds, read as the API does:
    a ``user`` turn's ``tool_result`` blocks are tool messages, its other blocks one user
    message; an assistant turn's thinking blocks are its provider blocks."""
    out: list[Message] = []
    for turn in body["messages"]:
        role = turn["role"]
        assert role in ("user", "assistant")
        if role == "assistant":
            # A message holds thinking, then text, then calls: a block out of that order
            # (thinking after text or a call, text after a call) starts the next merged one.
            current: Message | None = None
            for block in turn["content"]:
                kind = block["type"]
                thinking = kind in ("thinking", "redacted_thinking")
                if (
                    current is None
                    or (thinking and (current.parts or current.tool_calls))
                    or (kind == "text" and current.tool_calls)
                ):
                    current = Message("assistant", [])
                    out.append(current)
                if kind == "text":
                    current.parts.append(TextPart(block["text"]))
                elif kind == "tool_use":
                    call = ToolCall.from_arguments(block["id"], block["name"], block["input"])
                    current.tool_calls.append(call)
                else:
                    assert thinking
                    kept = ProviderBlock("anthropic", block)
                    current.provider_blocks = (*current.provider_blocks, kept)
            continue
        pending: list[Part] = []
        for block in turn["content"]:
            if block["type"] == "tool_result":
                if pending:
                    out.append(Message("user", pending))
                    pending = []
                result = json.loads(block["content"])
                assert block.get("is_error", False) is (result["ok"] is False)
                out.append(
                    Message("tool", [TextPart(block["content"])], tool_call_id=block["tool_use_id"])
                )
            elif block["type"] == "text":
                pending.append(TextPart(block["text"]))
            else:
                source = block["source"]
                assert block["type"] == "image" and source["type"] == "base64"
                pending.append(ImagePart(source["data"], source["media_type"]))
        if pending:
            out.append(Message("user", pending))
    return body.get("system"), out


def turns(history: list[Message]) -> list[tuple[str, list[Any]]]:
    """What the API sees of a history: the wire role of each turn and its pieces, consecutive
    turns of one role merged (an empty text is no piece)."""
    out: list[tuple[str, list[Any]]] = []
    for m in history:
        if m.role == "system":
            continue
        role = "assistant" if m.role == "assistant" else "user"
        items: list[Any] = []
        if m.role == "tool":
            items.append(("result", m.tool_call_id, m.text))
        else:
            items += [("block", b.data) for b in m.provider_blocks if b.wire == "anthropic"]
            for p in m.parts:
                if isinstance(p, TextPart):
                    if p.text:
                        items.append(("text", p.text))
                else:
                    items.append(("image", p.data, p.mime_type))
            items += [("call", c.id, c.name, c.args) for c in m.tool_calls]
        if out and out[-1][0] == role:
            out[-1][1].extend(items)
        else:
            out.append((role, items))
    return out


@settings(max_examples=100, deadline=None)
@given(st.lists(messages, max_size=8), st.none() | texts.filter(bool))
def test_history_round_trips_through_the_body(history: list[Message], system: str | None) -> None:
    body = request_body(ProviderRequest("m", history, system_prompt=system), stream=True)
    got_system, back = decode(body)
    expected_system = [system] if system else []
    expected_system += [m.text for m in history if m.role == "system"]
    assert got_system == ("\n\n".join(expected_system) or None)
    assert turns(back) == turns(history)
    roles = [t["role"] for t in body["messages"]]
    assert all(a != b for a, b in itertools.pairwise(roles))  # merged
    assert all(t["content"] for t in body["messages"])  # never an empty turn


def _cuts(data: bytes, points: list[int]) -> list[bytes]:
    cuts = sorted({p % (len(data) + 1) for p in points})
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True) if b > a]


def read(chunks: list[bytes]) -> list[Any]:
    decoder, state = MessagesDecoder(), ChatStreamState()
    events: list[Any] = []
    for chunk in chunks:
        for item in decoder.feed(chunk):
            events += state.feed(item)
    for item in decoder.flush():
        events += state.feed(item)
    return events + state.end()


TRANSCRIPTS = [BASIC, TOOL_USE, THINKING]


@given(st.sampled_from(TRANSCRIPTS), st.lists(st.integers(0, 10**6), max_size=30), st.booleans())
def test_any_cut_gives_the_same_events(
    transcript: list[bytes], points: list[int], crlf: bool
) -> None:
    body = b"".join(transcript)
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    whole = read([b"".join(transcript)])
    events = read(_cuts(body, points))
    assert events == whole
    assert events[-1].provider_blocks == whole[-1].provider_blocks


answer_blocks = st.one_of(
    st.builds(lambda t: {"type": "text", "text": t}, texts.filter(bool)),
    st.builds(
        lambda t: {"type": "thinking", "thinking": t, "signature": "c2ln"}, texts.filter(bool)
    ),
    st.builds(
        lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a},
        ids,
        names,
        arg_objects,
    ),
)


def _joined(events: list[Any]) -> list[Any]:
    out: list[Any] = []
    for e in events:
        if out and type(e) is type(out[-1]) and isinstance(e, TextEvent | ThinkingEvent):
            out[-1] = type(e)(out[-1].value + e.value)
        else:
            out.append(e)
    return out


@given(
    st.lists(answer_blocks, max_size=5),
    st.sampled_from(["end_turn", "tool_use", "max_tokens", "stop_sequence"]),
    st.lists(st.integers(0, 10**6), max_size=20),
)
def test_generated_answers_streamed_or_whole_agree(
    content: list[dict[str, Any]], stop: str, points: list[int]
) -> None:
    message = whole_message(content, stop)
    state = ChatStreamState()
    whole = state.handle_message(message) + state.end()
    streamed = read(_cuts(b"".join(sse_of(message)), points))
    assert _joined(streamed) == _joined(whole)
    assert streamed[-1].provider_blocks == whole[-1].provider_blocks
    assert isinstance(whole[-1], FinishEvent)


@given(st.binary(max_size=300), st.lists(st.integers(0, 400), max_size=10))
def test_bad_bytes_end_in_one_terminal_event(data: bytes, points: list[int]) -> None:
    events = read(_cuts(b"".join(BASIC[:2]) + data, points))
    assert isinstance(events[-1], FinishEvent | ErrorEvent)
    assert len([e for e in events if isinstance(e, FinishEvent | ErrorEvent)]) == 1


PING_EVENT = b'event: ping\ndata: {"type": "ping"}\n\n'
#: llama.cpp's llama-server: its own error object as an ``error`` event's data.
SERVER_ERROR = b'event: error\ndata: {"code": 500, "message": "boom", "type": "server_error"}\n\n'


@given(
    st.lists(st.sampled_from(["ping", "text", "error"]), max_size=8),
    st.lists(st.integers(0, 10**6), max_size=30),
    st.booleans(),
)
def test_pings_give_no_items_and_a_servers_error_event_is_an_error(
    kinds: list[str], points: list[int], crlf: bool
) -> None:
    """Under any cut: a ``ping`` gives the decoder nothing (it is no content, so it does not
    hold off the idle limit), every other event one item; an ``error`` event whose data is a
    server's own error object ends the stream with its message."""
    text = b"".join(BASIC[1:4])  # content_block_start, ping, a text delta
    parts = {"ping": PING_EVENT, "text": text, "error": SERVER_ERROR}
    body = BASIC[0] + b"".join(parts[k] for k in kinds)
    if crlf:
        body = body.replace(b"\n", b"\r\n")
    decoder = MessagesDecoder()
    items = [i for c in _cuts(body, points) for i in decoder.feed(c)] + decoder.flush()
    assert all('"ping"' not in i for i in items)
    assert len(items) == 1 + 2 * kinds.count("text") + kinds.count("error")
    events = read(_cuts(body, points))
    if "error" in kinds:
        assert isinstance(events[-1], ErrorEvent) and "boom" in events[-1].error.message
        assert events[-1].error.code == "LLM_HTTP_ERROR"
