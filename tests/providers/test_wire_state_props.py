"""Every wire's stream state keeps the one contract the provider skeleton relies on.

``feed(item)`` returns only non-terminal events; once ``terminal`` is set nothing more needs
to be read; ``end()`` returns the remaining events with exactly one ``FinishEvent`` or
``ErrorEvent``, last, and leaves it in ``terminal``. Checked for the Ollama (NDJSON objects),
OpenAI (SSE events) and Gemini (SSE data) wires over arbitrary item sequences, well-formed
or not, whether the read stops at ``terminal`` or runs to the end of the body.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import given, settings, strategies as st
from support.strategies import arg_objects, json_values, names

from ollm_lite.providers import _gemini_wire, _ollama_wire, _openai_wire
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

WIRES: dict[str, tuple[Callable[[], Any], Any]] = {
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
