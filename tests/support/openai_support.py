"""Hand-written OpenAI-style SSE transcripts and loopback helpers for the OpenAI-compatible tests.

The transcripts follow the vendors' documentation (chunk shapes of OpenAI's chat streaming
reference, vLLM, llama.cpp's native server README and llama-cpp-python's server), written here so
the tests need nothing outside the repository. Streams are served by the raw-socket loopback server
of ``transport_support`` (one HTTP chunk per SSE event, ``Transfer-Encoding: chunked``).
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from typing import Any

from support.transport_support import Request, Script, respond

CHAT = "/v1/chat/completions"


def sse(
    objs: Sequence[dict[str, Any] | str], *, done: bool = True, eol: bytes = b"\n"
) -> list[bytes]:
    """Each object as one ``data:`` event (a string is sent as the raw data), then ``[DONE]``."""
    out = []
    for obj in objs:
        data = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        out.append(b"data: " + data.encode() + eol + eol)
    if done:
        out.append(b"data: [DONE]" + eol + eol)
    return out


def chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    *,
    model: str = "qwen2.5-7b-instruct",
    **extra: Any,
) -> dict[str, Any]:
    """One ``chat.completion.chunk`` with a single choice."""
    out: dict[str, Any] = {
        "id": "chatcmpl-7f3a9c",
        "object": "chat.completion.chunk",
        "created": 1718000000,
        "model": model,
        "choices": [{"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish}],
    }
    out.update(extra)
    return out


def usage_chunk(prompt: int = 14, completion: int = 9, **extra: Any) -> dict[str, Any]:
    """The ``include_usage`` chunk: empty ``choices`` and the totals."""
    out = chunk()
    out["choices"] = []
    out["usage"] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    out.update(extra)
    return out


WORDS = ["The", " sky", " is", " blue", " because", " of", " Rayleigh", " scattering", "."]


def text_transcript(words: Sequence[str] = WORDS, *, usage: bool = True) -> list[bytes]:
    objs: list[dict[str, Any]] = [chunk({"role": "assistant", "content": ""})]
    objs += [chunk({"content": w}) for w in words]
    objs.append(chunk({}, "stop"))
    if usage:
        objs.append(usage_chunk())
    return sse(objs)


def tool_fragment(
    index: int | None = None,
    *,
    id: str | None = None,
    name: str | None = None,
    args: str | dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One element of ``delta.tool_calls``."""
    frag: dict[str, Any] = {}
    if index is not None:
        frag["index"] = index
    if id is not None:
        frag["id"] = id
        frag["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if args is not None:
        function["arguments"] = args
    if function:
        frag["function"] = function
    return frag


def tools_chunk(*fragments: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return chunk({"tool_calls": list(fragments)}, finish)


def split(text: str, n: int) -> list[str]:
    """``text`` cut into pieces of ``n`` characters (mid-key, mid-escape)."""
    return [text[i : i + n] for i in range(0, len(text), n)]


def parallel_tools_transcript() -> list[bytes]:
    """OpenAI's parallel shape: index 0 then index 1, id/name on the first fragment only."""
    a = '{"city": "Edinburgh", "country": "GB", "units": "c"}'
    b = '{"ticker": "AAPL", "exchange": "NASDAQ"}'
    objs = [chunk({"role": "assistant", "content": None})]
    objs.append(tools_chunk(tool_fragment(0, id="call_A1", name="get_weather", args="")))
    objs += [tools_chunk(tool_fragment(0, args=p)) for p in split(a, 5)]
    objs.append(tools_chunk(tool_fragment(1, id="call_B2", name="get_stock_price", args="")))
    objs += [tools_chunk(tool_fragment(1, args=p)) for p in split(b, 4)]
    objs.append(chunk({}, "tool_calls"))
    objs.append(usage_chunk(81, 47))
    return sse(objs)


def llamacpp_python_tools_transcript() -> list[bytes]:
    """llama-cpp-python: id and name repeated in every fragment, plus legacy function_call."""
    call_id = "call__0_get_weather_cmpl-1b2c"
    objs = [
        chunk({"role": "assistant", "content": None, "function_call": None, "tool_calls": None})
    ]
    for piece in ["{", ' "', "city", '":', ' "', "Os", "lo", '"', " }"]:
        objs.append(
            chunk(
                {
                    "role": None,
                    "content": None,
                    "function_call": {"name": "get_weather", "arguments": piece},
                    "tool_calls": [tool_fragment(0, id=call_id, name="get_weather", args=piece)],
                }
            )
        )
    objs.append(
        chunk(
            {"role": None, "content": None, "function_call": None, "tool_calls": None}, "tool_calls"
        )
    )
    return sse(objs)


TIMINGS = {
    "prompt_n": 26,
    "prompt_ms": 105.3,
    "prompt_per_second": 246.9,
    "predicted_n": 5,
    "predicted_ms": 76.4,
    "predicted_per_second": 52.4,
}


def llamacpp_native_transcript() -> list[bytes]:
    """llama-server: comment pings, usage and timings on the usage chunk."""
    base = {"system_fingerprint": "b6000-abc", "model": "gemma.gguf"}
    objs: list[Any] = [chunk({"role": "assistant", "content": None}, **base)]
    objs += [
        chunk({"content": w}, **base) for w in ["Hello", "!", " How", " can", " I", " help", "?"]
    ]
    objs.append(chunk({}, "stop", **base))
    objs.append(usage_chunk(26, 7, timings=TIMINGS, **base))
    out = sse(objs)
    out.insert(3, b": ping\n\n")  # SSE keep-alive comment
    return out


# --------------------------------------------------------------------------- scripts


def json_script(obj: Any, status: int = 200, *, keep_alive: bool = False) -> Script:
    """A script answering ``obj`` as JSON with ``status`` (``None``: empty body)."""
    body = b"" if obj is None else json.dumps(obj).encode()

    def script(client: socket.socket, req: Request) -> None:
        respond(client, status, body)

    script.keep_alive = keep_alive  # type: ignore[attr-defined]
    return script
