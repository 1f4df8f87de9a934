"""Properties of the Ollama mapping (message, tool, request and stream mapping).

* Message format mapping: internal → Ollama → internal gives the message back (canonical
  messages exactly; any message its canonical form).
* Tool schema conversion: names, descriptions and parameters survive.
* Local provider request formatting: every body has model, messages, options, stream, with
  the options mapped and ``extra_body`` winning.
* Local provider event streaming: any stream of chunks, split anywhere, gives one event per
  piece of content in order and exactly one terminal event; garbage never escapes as anything
  but ``LLM_BAD_RESPONSE``.
* Connection error handling: an unreachable server gives one ``CONNECTION_FAILED`` event
  naming the URL.
"""

from __future__ import annotations

import base64
import json
import string
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from support.ollama_support import refuse_port
from support.strategies import json_of

from ollm_lite.errors import OllmError
from ollm_lite.providers import _ollama_wire as wire
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.streams import iter_ndjson
from ollm_lite.types import (
    ErrorEvent,
    FinishEvent,
    GenerationOptions,
    ImagePart,
    Message,
    ProviderRequest,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
)

# --------------------------------------------------------------------------- strategies

text = st.text(max_size=40)
nonempty = st.text(min_size=1, max_size=20)
json_scalar = st.none() | st.booleans() | st.integers() | st.text(max_size=10)
json_value = json_of(json_scalar, keys=st.text(max_size=5))
args = st.dictionaries(st.text(max_size=8), json_value, max_size=4)
call_ids = st.text(alphabet=string.ascii_letters + string.digits + "_-", min_size=1, max_size=16)

_HEADERS = {
    "image/png": b"\x89PNG\r\n\x1a\n",
    "image/jpeg": b"\xff\xd8\xff",
    "image/gif": b"GIF89a",
    "image/webp": b"RIFF",
}


@st.composite
def images(draw: st.DrawFn) -> ImagePart:
    mime = draw(st.sampled_from(sorted(_HEADERS)))
    payload = _HEADERS[mime] + draw(st.binary(max_size=24))
    return ImagePart(base64.b64encode(payload).decode(), mime)


@st.composite
def tool_calls(draw: st.DrawFn) -> ToolCall:
    return ToolCall.from_arguments(draw(call_ids), draw(nonempty), draw(args))


@st.composite
def canonical_messages(draw: st.DrawFn) -> Message:
    """Messages already in the shape Ollama can carry exactly."""
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    body = draw(text)
    parts: list[Any] = [TextPart(body)] if body else []
    if role in ("user", "system", "assistant"):
        parts += draw(st.lists(images(), max_size=2))
    calls = draw(st.lists(tool_calls(), max_size=3)) if role == "assistant" else []
    name = draw(st.none() | nonempty) if role == "tool" else None
    call_id = draw(st.none() | call_ids) if role == "tool" else None
    return Message(role, parts, name=name, tool_call_id=call_id, tool_calls=calls)


@st.composite
def any_messages(draw: st.DrawFn) -> Message:
    """Messages in any shape: interleaved and empty parts, stray names, raw argument text."""
    role = draw(st.sampled_from(["system", "user", "assistant", "tool"]))
    parts = draw(st.lists(st.builds(TextPart, text) | images(), max_size=4))
    calls = draw(
        st.lists(
            st.builds(
                lambda cid, name, a, spaced: ToolCall(
                    cid, name, a, json.dumps(a, indent=2 if spaced else None)
                ),
                call_ids,
                nonempty,
                args,
                st.booleans(),
            ),
            max_size=2,
        )
    )
    return Message(
        role,
        parts,
        name=draw(st.none() | text),
        tool_call_id=draw(st.none() | text),
        tool_calls=calls,
    )


schemas = st.builds(
    ToolSchema,
    nonempty,
    st.none() | text,
    st.none() | st.dictionaries(st.text(max_size=6), json_value, max_size=3),
)

options = st.builds(
    GenerationOptions,
    temperature=st.none() | st.floats(0, 2),
    max_tokens=st.none() | st.integers(1, 4096),
    top_p=st.none() | st.floats(0, 1),
    top_k=st.none() | st.integers(1, 100),
    repeat_penalty=st.none() | st.floats(0.5, 2),
    seed=st.none() | st.integers(0, 2**31),
    stop=st.none() | st.lists(nonempty, max_size=3),
    presence_penalty=st.none() | st.floats(-2, 2),
    frequency_penalty=st.none() | st.floats(-2, 2),
    extra_body=st.fixed_dictionaries(
        {},
        optional={
            "options": st.dictionaries(
                st.sampled_from(["num_ctx", "temperature", "min_p", "num_predict"]),
                st.integers(1, 9),
            ),
            "keep_alive": st.sampled_from(["5m", 0, -1]),
            "think": st.booleans() | st.sampled_from(["low", "high"]),
            "truncate": st.booleans(),
        },
    ),
)


# ------------------------------------------------------------------------------- message round trip


@given(canonical_messages())
def test_round_trip_canonical(message: Message) -> None:
    """Message round trip: a canonical message survives internal → Ollama → internal unchanged."""
    wire_msg = json.loads(json.dumps(wire.message_to_ollama(message)))  # through real JSON
    assert wire.message_from_ollama(wire_msg) == message


@given(any_messages())
def test_round_trip_any_message_is_canonical(message: Message) -> None:
    """Message round trip: any message comes back as its canonical form, which is a fixed point."""
    canon = wire.canonical_message(message)
    back = wire.message_from_ollama(json.loads(json.dumps(wire.message_to_ollama(message))))
    assert back == canon
    assert wire.canonical_message(canon) == canon
    assert back.text == message.text
    assert [c.args for c in back.tool_calls] == [c.args for c in message.tool_calls]


# --------------------------------------------------------------------------- tool schema conversion


@given(st.lists(schemas, max_size=5))
def test_tool_schemas_preserved(tools: list[ToolSchema]) -> None:
    """Names, descriptions and parameter definitions are all kept, in order."""
    out = wire.tools_to_ollama(tools)
    assert len(out) == len(tools)
    for schema, item in zip(tools, out, strict=True):
        fn = item["function"]
        assert item["type"] == "function" and fn["name"] == schema.name
        assert fn.get("description") == schema.description
        if schema.parameters is not None:
            assert fn["parameters"] == schema.parameters


# ---------------------------------------------------------------------------------- request mapping


@given(
    st.lists(canonical_messages(), min_size=1, max_size=4),
    st.none() | nonempty,
    options,
    st.booleans(),
    st.none() | st.integers(256, 131072),
)
def test_request_body_has_required_fields(
    messages: list[Message],
    system: str | None,
    opts: GenerationOptions,
    streaming: bool,
    num_ctx: int | None,
) -> None:
    """Request mapping: model, messages, options and stream are present and correctly mapped."""
    request = ProviderRequest("m", messages, system_prompt=system, options=opts)
    body = wire.chat_body(request, stream=streaming, num_ctx=num_ctx)
    json.dumps(body)  # always serialisable
    assert body["model"] == "m" and body["stream"] is streaming
    sent = body["messages"]
    offset = 1 if system else 0
    assert len(sent) == len(messages) + offset
    if system:
        assert sent[0] == {"role": "system", "content": system}
    assert [m["role"] for m in sent[offset:]] == [m.role for m in messages]
    want = wire.options_to_ollama(opts, num_ctx) | opts.extra_body.get("options", {})
    assert body["options"] == want  # extra_body's options win key by key
    if opts.max_tokens is not None and "num_predict" not in opts.extra_body.get("options", {}):
        assert body["options"]["num_predict"] == opts.max_tokens
    for key, value in opts.extra_body.items():
        if key != "options":
            assert body[key] == value


# ----------------------------------------------------------------------------------- stream parsing


piece = st.one_of(
    st.tuples(st.just("text"), st.text(min_size=1, max_size=12)),
    st.tuples(st.just("thinking"), st.text(min_size=1, max_size=12)),
    st.tuples(st.just("call"), st.tuples(st.none() | call_ids, nonempty, args)),
)


def _encode(pieces: list[tuple[str, Any]], ending: str) -> tuple[bytes, list[Any]]:
    """NDJSON for ``pieces`` plus the events a correct adapter must produce (ids aside)."""
    objs: list[dict[str, Any]] = []
    expected: list[Any] = []
    for kind, value in pieces:
        message: dict[str, Any] = {"role": "assistant", "content": ""}
        if kind == "text":
            message["content"] = value
            expected.append(TextEvent(value))
        elif kind == "thinking":
            message["thinking"] = value
            expected.append(ThinkingEvent(value))
        else:
            cid, name, a = value
            call: dict[str, Any] = {"function": {"name": name, "arguments": a}}
            if cid is not None:
                call["id"] = cid
            message["tool_calls"] = [call]
            expected.append(("call", cid, name, a))
        objs.append(
            {"model": "m", "created_at": "2025-01-01T00:00:00Z", "message": message, "done": False}
        )
    if ending == "done":
        objs.append(
            {
                "model": "m",
                "message": {"role": "assistant", "content": ""},
                "done": True,
                "done_reason": "length",
                "eval_count": 3,
            }
        )
    elif ending == "error":
        objs.append({"error": "boom"})
    data = b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in objs)
    return data, expected


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    out, last = [], 0
    for p in points:
        out.append(data[last:p])
        last = p
    out.append(data[last:])
    return out


def _run(chunks: list[bytes]) -> list[Any]:
    state = wire.ChatStreamState(model="m")
    events: list[Any] = []
    try:
        for obj in iter_ndjson(chunks):
            events += state.feed(obj)
            if state.terminal is not None:
                break
    except OllmError as exc:
        events.append(ErrorEvent(exc.to_info()))
        return events
    events += state.end()
    return events


@given(
    st.lists(piece, max_size=8),
    st.sampled_from(["done", "error", "truncated"]),
    st.lists(st.integers(0, 10_000), max_size=6),
)
def test_events_follow_chunks(pieces: list[tuple[str, Any]], ending: str, cuts: list[int]) -> None:
    """Stream parsing: one event per content piece, in order, then exactly one terminal event."""
    data, expected = _encode(pieces, ending)
    events = _run(_split(data, cuts))
    body, last = events[:-1], events[-1]
    assert len(body) == len(expected)
    for got, want in zip(body, expected, strict=True):
        if isinstance(want, tuple):
            _, cid, name, a = want
            assert isinstance(got, ToolCallEvent)
            assert (got.value.name, got.value.args) == (name, a)
            assert got.value.arguments == json.dumps(a)
            assert got.value.id == cid if cid is not None else got.value.id.startswith("call_")
        else:
            assert got == want
    assert not any(isinstance(e, FinishEvent | ErrorEvent) for e in body)
    if ending == "done":
        has_calls = any(isinstance(w, tuple) for w in expected)
        assert isinstance(last, FinishEvent) and last.reason == ("tool" if has_calls else "length")
    else:
        assert isinstance(last, ErrorEvent) and last.error.code == "LLM_BAD_RESPONSE"
        assert ("boom" if ending == "error" else "ended early") in last.error.message


@given(st.lists(piece, max_size=5), st.lists(st.integers(0, 10_000), max_size=4))
def test_split_points_do_not_matter(pieces: list[tuple[str, Any]], cuts: list[int]) -> None:
    """Stream parsing: any split of the byte stream gives the same events as the whole."""
    fixed = [(k, (v[0] or "call_fixed00", v[1], v[2]) if k == "call" else v) for k, v in pieces]
    data, _ = _encode(fixed, "done")
    assert _run(_split(data, cuts)) == _run([data])


@given(st.lists(st.binary(max_size=40), max_size=6))
def test_garbage_only_ends_in_bad_response(chunks: list[bytes]) -> None:
    """Stream parsing: arbitrary bytes never raise; the stream ends with one terminal event."""
    events = _run(chunks)
    assert isinstance(events[-1], FinishEvent | ErrorEvent)
    assert sum(isinstance(e, FinishEvent | ErrorEvent) for e in events) == 1
    if isinstance(events[-1], ErrorEvent):
        assert events[-1].error.code == "LLM_BAD_RESPONSE"


# ------------------------------------------------------------------------------- connection failure


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["http://127.0.0.1:{port}", "127.0.0.1:{port}", ":{port}", "0.0.0.0:{port}"])
)
def test_unreachable_server_is_connection_failed(form: str) -> None:
    """Connection failure: any refused connection gives one CONNECTION_FAILED naming the URL."""
    port = refuse_port()
    provider = LocalProvider(base_url=form.format(port=port), retries=0)
    events = list(provider.chat_stream(ProviderRequest("m", [Message.user("hi")])))
    assert len(events) == 1
    (event,) = events
    assert isinstance(event, ErrorEvent) and event.error.code == "CONNECTION_FAILED"
    assert f"http://127.0.0.1:{port}" in event.error.message
    assert "ollama serve" in event.error.message


@given(
    st.sampled_from(["", "http://", "https://"]),
    st.sampled_from(["localhost", "gpu-box", "10.0.0.7", "0.0.0.0", "[::1]", "ollama.example.com"]),
    st.none() | st.integers(1, 65535),
    st.sampled_from(["", "/", "/ollama"]),
)
def test_host_parsing_is_stable(scheme: str, host: str, port: int | None, path: str) -> None:
    """Host strings parse to a URL that parses to itself, keeping an explicit port."""
    value = f"{scheme}{host}{'' if port is None else f':{port}'}{path}"
    url = wire.parse_ollama_host(value)
    assert wire.parse_ollama_host(url) == url
    assert url.startswith(("http://", "https://"))
    if port is not None and (scheme, port) not in (("http://", 80), ("https://", 443), ("", 80)):
        assert f":{port}" in url
