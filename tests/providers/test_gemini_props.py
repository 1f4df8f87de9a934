"""Properties of the Gemini wire mapping (hypothesis).

* Whole histories (text, images, assistant tool calls with their signatures, tool results,
  system messages beside ``system_prompt``) map to ``contents``/``systemInstruction`` without
  losing anything: a decoder written here from Google's API reference gives every piece back.
* Assistant turns round-trip: ``contents`` → a ``GenerateContentResponse`` → the stream state
  → the same text, the same calls (ids kept unless generated) with their signatures.
* Tools map to ``functionDeclarations`` in order and ``tool_choice`` to ``toolConfig``.
* ``GenerationOptions`` map to ``generationConfig``, and ``extra_body`` merges over them key by
  key (a nested object never wipes the options beside it).
* However the body of a stream is cut into reads, :class:`StreamDecoder` gives the same JSON
  texts: the ``data:`` events and the bare JSON objects (one line or pretty-printed), in order.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import json
from typing import Any

import pytest
from hypothesis import given, strategies as st
from support.strategies import arg_objects, json_values, names

from ollm_lite.errors import ConfigError
from ollm_lite.providers._gemini_wire import (
    ChatStreamState,
    StreamDecoder,
    contents_from_messages,
    is_generated_id,
    request_body,
)
from ollm_lite.providers.base import collect_result
from ollm_lite.types import (
    GenerationOptions,
    ImagePart,
    Message,
    Part,
    ProviderRequest,
    TextPart,
    ToolCall,
    ToolResult,
    ToolSchema,
)

texts = st.text(max_size=20)
# Ids Google issued (kept and sent back) and ids made up on this side (never sent).
call_ids = st.from_regex(r"[a-z0-9]{4,10}", fullmatch=True) | st.builds(
    lambda n: f"call_{n}", st.integers(0, 10**6)
)
images = st.builds(
    ImagePart,
    st.binary(min_size=1, max_size=12).map(lambda b: base64.b64encode(b).decode()),
    st.sampled_from(["image/png", "image/jpeg", "image/webp"]),
)
parts: st.SearchStrategy[list[Part]] = st.lists(st.builds(TextPart, texts) | images, max_size=4)
tool_calls = st.builds(ToolCall.from_arguments, call_ids, names, arg_objects)
tool_results = st.builds(ToolResult, st.booleans(), json_values)  # not ok: the default error
messages = st.one_of(
    st.builds(lambda p: Message("user", p), parts),
    st.builds(
        lambda p, calls: Message("assistant", p, tool_calls=calls),
        parts,
        st.lists(tool_calls, max_size=3),
    ),
    st.builds(lambda result, call: Message.tool(result, call), tool_results, tool_calls),
    st.builds(Message.system, texts),
)
signature_values = st.from_regex(r"[A-Za-z0-9+/]{4,12}={0,2}", fullmatch=True)


# --------------------------------------------------------------------------- a decoder


def decode_parts(raw: list[dict[str, Any]]) -> tuple[list[Part], list[tuple[Any, ...]]]:
    """``parts`` of a user/model content back to library parts, and the calls as
    ``(id or None, name, args, signature or None)``."""
    out: list[Part] = []
    calls: list[tuple[Any, ...]] = []
    for part in raw:
        assert len(set(part) - {"thoughtSignature"}) == 1, part
        if "text" in part:
            out.append(TextPart(part["text"]))
        elif "inlineData" in part:
            data = part["inlineData"]
            assert set(data) == {"mimeType", "data"}
            out.append(ImagePart(data["data"], data["mimeType"]))
        else:
            fc = part["functionCall"]
            assert set(fc) <= {"id", "name", "args"}
            calls.append((fc.get("id"), fc["name"], fc["args"], part.get("thoughtSignature")))
    return out, calls


def decode(body: dict[str, Any]) -> tuple[str | None, list[tuple[Any, ...]], list[str]]:
    """A request body back to (system text, one tuple per message, role per content)."""
    system = body.get("systemInstruction")
    system_text = None
    if system is not None:
        [part] = system["parts"]
        system_text = part["text"]
    out: list[tuple[Any, ...]] = []
    roles: list[str] = []
    for content in body["contents"]:
        assert set(content) == {"role", "parts"} and content["parts"]
        roles.append(content["role"])
        if content["role"] == "user" and "functionResponse" in content["parts"][0]:
            for part in content["parts"]:
                [(key, fr)] = part.items()
                assert key == "functionResponse" and set(fr) <= {"id", "name", "response"}
                assert isinstance(fr["response"], dict)
                out.append(("tool", fr.get("id"), fr["name"], fr["response"]))
            continue
        decoded, calls = decode_parts(content["parts"])
        role = "assistant" if content["role"] == "model" else "user"
        assert role == "assistant" or not calls
        out.append((role, decoded, calls))
    return system_text, out, roles


def expected(
    history: list[Message], system_prompt: str | None, signatures: dict[str, str]
) -> tuple[str | None, list[tuple[Any, ...]], list[str]]:
    """What :func:`decode` must give back: every piece of information of ``history``."""
    system = [m.text for m in history if m.role == "system"]
    if system_prompt:
        system.insert(0, system_prompt)
    out: list[tuple[Any, ...]] = []
    roles: list[str] = []
    previous_tool = False
    for m in history:
        if m.role == "system":
            continue
        if m.role == "tool":
            call_id = None if is_generated_id(m.tool_call_id) else m.tool_call_id
            out.append(("tool", call_id, m.name, json.loads(m.text)))
            if not previous_tool:
                roles.append("user")
            previous_tool = True
            continue
        previous_tool = False
        kept = [p for p in m.parts if not isinstance(p, TextPart) or p.text]
        calls = [
            (None if is_generated_id(c.id) else c.id, c.name, c.args, signatures.get(c.id))
            for c in m.tool_calls
        ]
        if not kept and not calls:
            kept = [TextPart("")]
        out.append((m.role, kept, calls))
        roles.append("model" if m.role == "assistant" else "user")
    return ("\n\n".join(system) if system else None), out, roles


@given(
    st.lists(messages, max_size=8),
    st.none() | st.text(min_size=1, max_size=20),
    st.dictionaries(call_ids, signature_values, max_size=3),
)
def test_property_history_mapping_keeps_every_piece(
    history: list[Message], system_prompt: str | None, signatures: dict[str, str]
) -> None:
    """Roles, text, images, calls (name, args, Google's id, signature), results (name,
    response object, id) and the system prompt all reach the body; consecutive tool results
    share one ``user`` turn; generated ids never go out."""
    request = ProviderRequest("m", history, system_prompt=system_prompt)
    body = request_body(request, signatures)
    assert decode(body) == expected(history, system_prompt, signatures)
    # the mapping is a pure function of the history: same input, same body
    assert contents_from_messages(history, signatures) == body["contents"]


def _assistant_messages() -> st.SearchStrategy[Message]:
    return st.builds(
        lambda text, calls: Message("assistant", [TextPart(t) for t in text], tool_calls=calls),
        st.lists(texts, max_size=3),
        st.lists(tool_calls, max_size=3),
    )


@given(_assistant_messages(), st.dictionaries(call_ids, signature_values, max_size=3))
def test_property_assistant_turn_round_trip(message: Message, signatures: dict[str, str]) -> None:
    """internal → ``contents`` → Gemini's answer format → internal gives the turn back: the
    text, each call's name and args, Google's ids, and each signature with its call (a
    generated id is replaced by a fresh one, which the signature follows)."""
    [content] = contents_from_messages([message], signatures)
    answer = {"candidates": [{"content": content, "finishReason": "STOP"}]}
    fresh = (f"call_new{n}" for n in itertools.count())
    state = ChatStreamState(lambda: next(fresh))
    events = [*state.feed(json.dumps(answer)), *state.end()]
    result = collect_result(events)
    assert (result.content or "") == message.text
    assert result.finish_reason == ("tool_calls" if message.tool_calls else "stop")
    assert len(result.tool_calls) == len(message.tool_calls)
    for sent, back in zip(message.tool_calls, result.tool_calls, strict=True):
        assert (back.name, back.args, json.loads(back.arguments)) == (
            sent.name,
            sent.args,
            sent.args,
        )
        if is_generated_id(sent.id):
            assert back.id.startswith("call_new")
        else:
            assert back.id == sent.id
        assert state.signatures.get(back.id) == signatures.get(sent.id)


tool_lists = st.lists(
    st.builds(
        ToolSchema,
        names,
        st.none() | st.text(max_size=20),
        st.none()
        | st.builds(
            lambda props: {"type": "object", "properties": props},
            st.dictionaries(names, st.sampled_from([{"type": "string"}, {"type": "integer"}])),
        ),
    ),
    min_size=1,
    max_size=4,
    unique_by=lambda t: t.name,
)


@given(tool_lists, st.data())
def test_property_tools_and_tool_choice(tools: list[ToolSchema], data: st.DataObject) -> None:
    """Every tool is declared in order (name, description, parameters); ``"none"`` →
    ``NONE``, ``"auto"`` → ``AUTO``, ``{"name"}`` → ``ANY`` limited to that function."""
    choice: Any = data.draw(
        st.sampled_from(["none", "auto"]) | st.sampled_from([{"name": t.name} for t in tools])
    )
    body = request_body(ProviderRequest("m", [Message.user("x")], tools=tools, tool_choice=choice))
    [group] = body["tools"]
    assert [
        (d["name"], d["description"], d["parameters"]) for d in group["functionDeclarations"]
    ] == [
        (t.name, t.description or "", t.parameters or {"type": "object", "properties": {}})
        for t in tools
    ]
    config = body["toolConfig"]["functionCallingConfig"]
    if choice == "none":
        assert config == {"mode": "NONE"}
    elif choice == "auto":
        assert config == {"mode": "AUTO"}
    else:
        assert isinstance(choice, dict)
        assert config == {"mode": "ANY", "allowedFunctionNames": [choice["name"]]}
    missing = "".join(t.name for t in tools) + "_x"
    with pytest.raises(ConfigError):
        request_body(
            ProviderRequest("m", [Message.user("x")], tools=tools, tool_choice={"name": missing})
        )


def _leaves(obj: Any, path: tuple[str, ...] = ()) -> dict[tuple[str, ...], Any]:
    """Every non-object value (an empty object counts as one) by its key path."""
    if isinstance(obj, dict) and obj:
        out: dict[tuple[str, ...], Any] = {}
        for key, value in obj.items():
            out.update(_leaves(value, (*path, key)))
        return out
    return {path: obj}


extra_bodies = st.recursive(
    st.dictionaries(
        st.sampled_from(["generationConfig", "thinkingConfig", "temperature", "topK", "x"]),
        json_values,
        max_size=3,
    ),
    lambda inner: st.dictionaries(
        st.sampled_from(["generationConfig", "thinkingConfig", "safetySettings", "y"]),
        inner,
        max_size=3,
    ),
    max_leaves=6,
)


@given(
    st.builds(
        GenerationOptions,
        temperature=st.none() | st.floats(0, 2),
        max_tokens=st.none() | st.integers(1, 10**5),
        top_p=st.none() | st.floats(0, 1),
        top_k=st.none() | st.integers(1, 100),
        seed=st.none() | st.integers(0, 2**31),
        stop=st.none() | st.lists(st.text(min_size=1, max_size=5), min_size=1, max_size=3),
    ),
    st.none() | st.just("json") | st.just({"type": "object"}),
    extra_bodies,
)
def test_property_generation_config_and_extra_body_merge(
    options: GenerationOptions, fmt: Any, extra: dict[str, Any]
) -> None:
    """Each option has its camelCase field; ``extra_body`` wins leaf by leaf and every leaf
    it does not name (or replace a parent of) stays."""
    request = ProviderRequest("m", [Message.user("x")], options=options, response_format=fmt)
    base = request_body(request)
    generation = base.get("generationConfig", {})
    for key, value in (
        ("temperature", options.temperature),
        ("maxOutputTokens", options.max_tokens),
        ("topP", options.top_p),
        ("topK", options.top_k),
        ("seed", options.seed),
        ("stopSequences", options.stop),
    ):
        assert generation.get(key) == value
    assert ("responseMimeType" in generation) == (fmt is not None)
    assert ("responseSchema" in generation) == isinstance(fmt, dict)

    request.options = dataclasses.replace(options, extra_body=extra)
    merged = request_body(request)
    extra_leaves = _leaves(extra)
    for path, value in extra_leaves.items():
        if value == {}:  # an empty object merged over an object adds nothing
            assert isinstance(_get(merged, path), dict)
        else:
            assert _get(merged, path) == value
    for path, value in _leaves(base).items():
        if not any(path[: len(p)] == p or p[: len(path)] == path for p in extra_leaves):
            assert _get(merged, path) == value


def _get(obj: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        obj = obj[key]
    return obj


# --------------------------------------------------------------------------- stream decoder

stream_objects = st.dictionaries(st.sampled_from(["a", "b", "error"]), json_values, max_size=3)
stream_items = st.one_of(
    st.tuples(st.just("data"), stream_objects),
    st.tuples(st.just("bare"), stream_objects),
    st.tuples(st.just("pretty"), stream_objects),
    st.tuples(st.just("array"), stream_objects),
    st.tuples(st.just("noise"), st.sampled_from([": ping", "event: message", "id: 7", "retry: x"])),
)


def _encode(items: list[tuple[str, Any]], eol: bytes) -> tuple[bytes, list[Any]]:
    body: list[bytes] = []
    want: list[Any] = []
    for kind, value in items:
        if kind == "noise":
            body.append(value.encode() + eol)
            continue
        if kind == "data":
            text = json.dumps(value)
            body.append(b"data: " + text.encode() + eol + eol)
        elif kind == "bare":
            text = json.dumps(value, ensure_ascii=False)
            body.append(text.encode() + eol)
        elif kind == "pretty":
            text = json.dumps(value, indent=2, ensure_ascii=False)
            body.append(text.replace("\n", eol.decode()).encode() + eol)
        else:
            text = json.dumps([value], indent=1)
            body.append(text.replace("\n", eol.decode()).encode() + eol)
            value = [value]
        want.append(value)
    return b"".join(body), want


@given(
    st.lists(stream_items, max_size=6),
    st.sampled_from([b"\r\n", b"\n", b"\r"]),
    st.lists(st.integers(0, 10**6), max_size=12),
)
def test_property_stream_decoder_reads_sse_and_bare_json_however_cut(
    items: list[tuple[str, Any]], eol: bytes, points: list[int]
) -> None:
    """The JSON texts are the ``data:`` events and the bare objects, in order, whatever the
    line ends and the read boundaries (down to a byte inside a CRLF or a UTF-8 character)."""
    body, want = _encode(items, eol)
    bounds = sorted({p % (len(body) + 1) for p in points} | {0, len(body)})
    decoder = StreamDecoder()
    texts: list[str] = []
    for a, b in itertools.pairwise(bounds):
        texts += decoder.feed(body[a:b])
    texts += decoder.flush()
    assert [json.loads(t) for t in texts] == want
