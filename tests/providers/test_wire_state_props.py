"""Every wire's stream state keeps the one contract the provider skeleton relies on.

``feed(item)`` returns only non-terminal events; once ``terminal`` is set nothing more needs
to be read; ``end()`` returns the remaining events with exactly one ``FinishEvent`` or
``ErrorEvent``, last, and leaves it in ``terminal``. Checked for the Ollama (NDJSON objects),
OpenAI (SSE events), Gemini (SSE data) and Messages API (SSE data) wires over arbitrary item
sequences, well-formed or not, whether the read stops at ``terminal`` or runs to the end of the
body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings, strategies as st
from support.strategies import arg_objects, json_values, names

from ollm_lite.providers import _anthropic_answers, _gemini_wire, _ollama_wire, _openai_wire
from ollm_lite.streams import SSEEvent
from ollm_lite.types import ErrorEvent, FinishEvent

texts = st.text(max_size=8)
reasons = st.sampled_from(["stop", "length", "tool_calls", "content_filter", None, 7])

ollama_items = st.one_of(
    st.fixed_dictionaries(
        {"message": st.fixed_dictionaries({"role": st.just("assistant"), "content": texts})},
        optional={"done": st.booleans(), "done_reason": st.sampled_from(["stop", "length"])},
    ),
    st.fixed_dictionaries(
        {
            "message": st.fixed_dictionaries(
                {"tool_calls": st.lists(st.fixed_dictionaries(
                    {"function": st.fixed_dictionaries({"name": names, "arguments": arg_objects})}
                ), max_size=2)}
            )
        }
    ),
    st.fixed_dictionaries({"error": texts}),
    json_values,
)  # fmt: skip

openai_data = st.one_of(
    st.builds(
        lambda content, reason: json.dumps(
            {"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": reason}]}
        ),
        texts,
        reasons,
    ),
    st.builds(
        lambda name, args: json.dumps(
            {"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "c", "function": {"name": name, "arguments": json.dumps(args)}}
            ]}}]}
        ),
        names,
        arg_objects,
    ),
    st.just("[DONE]"),
    st.builds(lambda m: json.dumps({"error": {"message": m}}), texts),
    st.builds(json.dumps, json_values),
    texts,
)  # fmt: skip
openai_items = st.builds(
    SSEEvent, event=st.sampled_from(["message", "message", "error"]), data=openai_data
)


def _call_part(name: str, args: object) -> dict[str, object]:
    return {"functionCall": {"name": name, "args": args}}


gemini_items = st.one_of(
    st.builds(
        lambda text, finish: json.dumps(
            {"candidates": [{"content": {"parts": [{"text": text}]}, "finishReason": finish}]}
        ),
        texts,
        st.sampled_from(["STOP", "MAX_TOKENS", "SAFETY", None]),
    ),
    st.builds(
        lambda name, args: json.dumps(
            {"candidates": [{"content": {"parts": [_call_part(name, args)]}}]}
        ),
        names,
        arg_objects,
    ),
    st.builds(lambda m: json.dumps({"error": {"code": 500, "message": m}}), texts),
    st.builds(json.dumps, json_values),
    texts,
)  # fmt: skip


def _block(index: int, kind: str) -> dict[str, object]:
    content: dict[str, object] = {"type": kind}
    if kind in ("text", "thinking"):
        content[kind] = ""
    if kind == "tool_use":
        content.update({"id": "toolu_1", "name": "f", "input": {}})
    return {"type": "content_block_start", "index": index, "content_block": content}


indexes = st.integers(0, 2)
messages_items = st.one_of(
    st.builds(
        lambda i, k: json.dumps(_block(i, k)),
        indexes,
        st.sampled_from(["text", "thinking", "tool_use", "x"]),
    ),
    st.builds(
        lambda i, d: json.dumps({"type": "content_block_delta", "index": i, "delta": d}),
        indexes,
        st.one_of(
            st.builds(lambda t: {"type": "text_delta", "text": t}, texts),
            st.builds(lambda t: {"type": "thinking_delta", "thinking": t}, texts),
            st.builds(lambda t: {"type": "signature_delta", "signature": t}, texts),
            st.builds(lambda t: {"type": "input_json_delta", "partial_json": t}, texts),
        ),
    ),
    st.builds(lambda i: json.dumps({"type": "content_block_stop", "index": i}), indexes),
    st.builds(
        lambda r: json.dumps(
            {"type": "message_delta", "delta": {"stop_reason": r}, "usage": {"output_tokens": 3}}
        ),
        st.sampled_from(["end_turn", "tool_use", "max_tokens", None]),
    ),
    st.just(json.dumps({"type": "message_stop"})),
    st.builds(
        lambda m: json.dumps(
            {"type": "error", "error": {"type": "overloaded_error", "message": m}}
        ),
        texts,
    ),
    st.builds(json.dumps, json_values),
    texts,
)

WIRES: dict[str, tuple[Callable[[], Any], Any]] = {
    "messages": (lambda: _anthropic_answers.ChatStreamState(), messages_items),
    "ollama": (lambda: _ollama_wire.ChatStreamState(model="m"), ollama_items),
    "openai": (lambda: _openai_wire.ChatStreamState(model="m"), openai_items),
    "gemini": (lambda: _gemini_wire.ChatStreamState(), gemini_items),
}


def _terminal(event: object) -> bool:
    return isinstance(event, FinishEvent | ErrorEvent)


@settings(max_examples=300, deadline=None)
@given(
    wire=st.sampled_from(sorted(WIRES)),
    data=st.data(),
    stop_at_terminal=st.booleans(),
)
def test_every_wire_keeps_the_state_contract(
    wire: str, data: st.DataObject, stop_at_terminal: bool
) -> None:
    make, items = WIRES[wire]
    state = make()
    fed: list[object] = []
    for item in data.draw(st.lists(items, max_size=8), label="items"):
        fed += state.feed(item)
        if stop_at_terminal and state.terminal is not None:
            break
    assert not any(_terminal(e) for e in fed), fed
    tail = list(state.end())
    assert tail and _terminal(tail[-1]), tail
    assert not any(_terminal(e) for e in tail[:-1]), tail
    assert state.terminal is tail[-1]
