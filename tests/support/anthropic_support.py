"""Messages API transcripts and helpers for the ``AnthropicProvider`` tests.

The streams are the examples of Anthropic's streaming page
(https://platform.claude.com/docs/en/build-with-claude/streaming: "Basic streaming request",
"Streaming request with tool use", "Streaming request with extended thinking", "Error events"),
written here event for event so the tests need nothing outside the repository; the whole
message is the example answer of the Messages API reference
(https://platform.claude.com/docs/en/api/messages). A stream is served one HTTP chunk per SSE
event by the loopback server of ``transport_support``.
"""

from __future__ import annotations

import json
from typing import Any

MESSAGES = "/v1/messages"
MODEL = "claude-opus-4-6"


def event(obj: dict[str, Any]) -> bytes:
    """One SSE event as the API writes it: ``event: <type>`` then ``data: <json>``."""
    return b"event: " + obj["type"].encode() + b"\ndata: " + json.dumps(obj).encode() + b"\n\n"


def stream(*objs: dict[str, Any]) -> list[bytes]:
    """The events, one chunk each."""
    return [event(o) for o in objs]


def message_start(usage: dict[str, Any] | None = None, msg_id: str = "msg_01") -> dict[str, Any]:
    return {
        "type": "message_start",
        "message": {
            "id": msg_id,
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": MODEL,
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage if usage is not None else {"input_tokens": 25, "output_tokens": 1},
        },
    }


def block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def delta(index: int, body: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": body}


def text_delta(index: int, text: str) -> dict[str, Any]:
    return delta(index, {"type": "text_delta", "text": text})


def block_stop(index: int) -> dict[str, Any]:
    return {"type": "content_block_stop", "index": index}


def message_delta(stop: str, output_tokens: int = 15, **usage: Any) -> dict[str, Any]:
    return {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": output_tokens, **usage},
    }


MESSAGE_STOP = {"type": "message_stop"}
PING = {"type": "ping"}


def text_stream(
    *pieces: str, stop: str = "end_turn", usage: dict[str, Any] | None = None
) -> list[bytes]:
    """The streaming page's "Basic streaming request" answer, with other text."""
    return stream(
        message_start(usage, msg_id="msg_1nZdL29xx5MUA1yADyHTEsnR8uuvGzszyY"),
        block_start(0, {"type": "text", "text": ""}),
        PING,
        *(text_delta(0, p) for p in pieces),
        block_stop(0),
        message_delta(stop),
        MESSAGE_STOP,
    )


#: "Basic streaming request": "Hello" "!" then end_turn (usage 25 in, 15 out).
BASIC = text_stream("Hello", "!")

#: "Streaming request with tool use": text, then a get_weather call in input_json_delta pieces.
TOOL_FRAGMENTS = [
    "",
    '{"location":',
    ' "San',
    " Francisc",
    "o,",
    ' CA"',
    ", ",
    '"unit": "fah',
    'renheit"}',
]
TOOL_USE = stream(
    message_start({"input_tokens": 472, "output_tokens": 2}, msg_id="msg_014p7gG3wDgGV9EUtLvnow3U"),
    block_start(0, {"type": "text", "text": ""}),
    PING,
    text_delta(0, "Okay"),
    text_delta(0, ","),
    text_delta(0, " let's check the weather for San Francisco, CA:"),
    block_stop(0),
    block_start(
        1,
        {
            "type": "tool_use",
            "id": "toolu_01T1x1fJ34qAmk2tNTrN7Up6",
            "name": "get_weather",
            "input": {},
        },
    ),
    *(delta(1, {"type": "input_json_delta", "partial_json": f}) for f in TOOL_FRAGMENTS),
    block_stop(1),
    message_delta("tool_use", 89),
    MESSAGE_STOP,
)
TOOL_ARGS = {"location": "San Francisco, CA", "unit": "fahrenheit"}

THINKING_SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
THINKING_TEXT = [
    "I need to find the GCD of 1071 and 462 using the Euclidean algorithm.\n\n"
    "1071 = 2 \u00d7 462 + 147",
    "\n462 = 3 \u00d7 147 + 21\n147 = 7 \u00d7 21 + 0\n\nSo GCD(1071, 462) = 21",
]
#: "Streaming request with extended thinking": a thinking block, its signature, the answer.
THINKING = stream(
    message_start(),
    block_start(0, {"type": "thinking", "thinking": ""}),
    *(delta(0, {"type": "thinking_delta", "thinking": t}) for t in THINKING_TEXT),
    delta(0, {"type": "signature_delta", "signature": THINKING_SIGNATURE}),
    block_stop(0),
    block_start(1, {"type": "text", "text": ""}),
    text_delta(1, "The greatest common divisor of 1071 and 462 is **21**."),
    block_stop(1),
    message_delta("end_turn"),
    MESSAGE_STOP,
)

#: "Error events": the overloaded error Anthropic may send inside a 200 stream.
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}


def whole_message(
    content: list[dict[str, Any]], stop: str = "end_turn", usage: dict[str, Any] | None = None
) -> dict[str, Any]:
    """A non-streamed answer (the Messages API reference's example shape)."""
    return {
        "id": "msg_013Zva2CMHLNnXjNJJKqJ2EF",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": usage or {"input_tokens": 2095, "output_tokens": 503},
    }


def error_body(kind: str, message: str) -> dict[str, Any]:
    """An error answer (https://platform.claude.com/docs/en/api/errors)."""
    return {"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_01"}


def sse_of(message: dict[str, Any]) -> list[bytes]:
    """The stream a whole message stands for (one delta per text, thinking and input)."""
    objs: list[dict[str, Any]] = [message_start(message.get("usage"))]
    for i, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            objs += [block_start(i, {"type": "text", "text": ""}), text_delta(i, block["text"])]
        elif kind == "thinking":
            objs += [
                block_start(i, {"type": "thinking", "thinking": ""}),
                delta(i, {"type": "thinking_delta", "thinking": block["thinking"]}),
                delta(i, {"type": "signature_delta", "signature": block["signature"]}),
            ]
        elif kind == "tool_use":
            objs += [
                block_start(i, {**block, "input": {}}),
                delta(i, {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}),
            ]
        else:
            objs.append(block_start(i, block))
        objs.append(block_stop(i))
    out = (message.get("usage") or {}).get("output_tokens", 0)
    objs += [message_delta(message["stop_reason"], out), MESSAGE_STOP]
    return stream(*objs)
