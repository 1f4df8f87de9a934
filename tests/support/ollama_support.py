"""A loopback Ollama stand-in and hand-written NDJSON transcripts for the ``LocalProvider`` tests.

The server (``transport_support.LoopbackServer``) listens on 127.0.0.1 at an ephemeral port and
serves *routes*: ``(method, path)`` → a handler that writes raw bytes to the client socket, so
faults an HTTP library would hide (a connection dropped mid-chunk, a stream that never ends) can
be produced exactly. Streamed answers go out one HTTP chunk per item with
``Transfer-Encoding: chunked``, like Ollama's.

The transcripts follow Ollama's API reference (docs/api.md in the ollama repository: field
order, metrics left out when zero, ``done_reason``), written here so the tests need nothing
outside the repository.
"""

from __future__ import annotations

import contextlib
import json
import socket
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from support.transport_support import LoopbackServer, Request

Seen = Request
"""One request as the server received it."""
OllamaServer = LoopbackServer
"""The shared loopback server; :func:`serve` starts it with Ollama's routes and its 404."""
Handler = Callable[[socket.socket, Seen], None]


@contextlib.contextmanager
def serve(routes: dict[tuple[str, str], Handler]) -> Iterator[LoopbackServer]:
    """Serve ``routes`` (method, path → handler) for a ``with`` block; connections stay open."""
    server = LoopbackServer(routes, keep_alive=True, fallback=not_found)
    try:
        yield server
    finally:
        server.close()


# --------------------------------------------------------------------------- handlers


def json_answer(obj: Any, status: int = 200) -> Handler:
    """A handler answering ``obj`` as JSON with ``status`` (``None``: empty body)."""
    body = b"" if obj is None else json.dumps(obj).encode()

    def handler(client: socket.socket, req: Seen) -> None:
        client.sendall(
            f"HTTP/1.1 {status} X\r\nContent-Type: application/json; charset=utf-8\r\n"
            f"Content-Length: {len(body)}\r\n\r\n".encode()
            + body
        )

    return handler


def not_found(client: socket.socket, req: Seen) -> None:
    json_answer({"error": "404 page not found"}, 404)(client, req)


def stream(
    chunks: Sequence[bytes],
    *,
    delay: float = 0.0,
    then: Literal["end", "hang", "drop"] = "end",
) -> Handler:
    """A handler streaming ``chunks`` (one HTTP chunk each) as ``application/x-ndjson``.

    ``then``: ``end`` finishes the chunked body properly; ``hang`` keeps the connection open
    and silent until the server closes; ``drop`` closes the socket without the last chunk.
    """

    def handler(client: socket.socket, req: Seen) -> None:
        client.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        for data in chunks:
            if delay and req.stop.wait(delay):
                return
            client.sendall(b"%x\r\n%s\r\n" % (len(data), data))
        if then == "end":
            client.sendall(b"0\r\n\r\n")
        elif then == "hang":
            # Wait until the client goes away (its close makes recv return b"").
            client.settimeout(0.05)
            while not req.stop.is_set():
                try:
                    if client.recv(1) == b"":
                        break
                except TimeoutError:
                    continue
            raise OSError("client went away")
        else:
            client.shutdown(socket.SHUT_RDWR)

    handler.keep_alive = then == "end"  # type: ignore[attr-defined]
    return handler


def refuse_port() -> int:
    """A loopback port with nothing listening on it."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# --------------------------------------------------------------------------- transcripts


def lines(objs: Sequence[dict[str, Any]]) -> list[bytes]:
    """Each object as one compact NDJSON line (what Go's encoder writes), one chunk each."""
    return [json.dumps(o, separators=(",", ":"), ensure_ascii=False).encode() + b"\n" for o in objs]


def _stamp(i: int) -> str:
    return f"2025-07-07T20:22:19.{184789 + i * 11731:06d}Z"


def chunk(
    model: str, i: int, *, content: str = "", thinking: str | None = None, **extra: Any
) -> dict[str, Any]:
    """One ``done: false`` chat chunk."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if thinking is not None:
        message["thinking"] = thinking
    message.update(extra)
    return {"model": model, "created_at": _stamp(i), "message": message, "done": False}


METRICS = {
    "total_duration": 498215833,
    "load_duration": 25617667,
    "prompt_eval_count": 31,
    "prompt_eval_duration": 61849250,
    "eval_count": 30,
    "eval_duration": 409442375,
}


def final(model: str, i: int, reason: str | None = "stop", **metrics: Any) -> dict[str, Any]:
    """The ``done: true`` chunk (``reason=None`` leaves ``done_reason`` out, as old servers)."""
    out: dict[str, Any] = {
        "model": model,
        "created_at": _stamp(i),
        "message": {"role": "assistant", "content": ""},
        "done": True,
    }
    if reason is not None:
        out["done_reason"] = reason
    out.update(metrics or METRICS)
    return out


TEXT_WORDS = ["The", " sky", " is", " blue", " because", " of", " Rayleigh", " scattering", "."]


def text_transcript(model: str = "llama3.2", words: Sequence[str] = TEXT_WORDS) -> list[bytes]:
    return lines(
        [chunk(model, i, content=w) for i, w in enumerate(words)] + [final(model, len(words))]
    )


def tool_call_transcript(model: str = "llama3.2") -> list[bytes]:
    call = {
        "id": "call_x8fb2k1q",
        "function": {"index": 0, "name": "get_weather", "arguments": {"city": "Tokyo"}},
    }
    return lines(
        [
            chunk(model, 0, tool_calls=[call]),
            final(
                model,
                1,
                total_duration=182242375,
                load_duration=41295167,
                prompt_eval_count=169,
                prompt_eval_duration=24573166,
                eval_count=15,
                eval_duration=115959084,
            ),
        ]
    )


THINKING = ["Okay", ",", " 17", " times", " 23", " is", " 391", "."]
ANSWER = ["17", " ×", " 23", " =", " **", "391", "**"]  # noqa: RUF001 - a 2-byte UTF-8 char


def thinking_tools_transcript(model: str = "qwen3:8b") -> list[bytes]:
    """Thinking, then two parallel tool calls in successive chunks (the second without id)."""
    objs = [chunk(model, i, thinking=t) for i, t in enumerate(THINKING)]
    n = len(objs)
    objs.append(
        chunk(
            model,
            n,
            tool_calls=[
                {
                    "id": "call_0b9t1w3m",
                    "function": {
                        "index": 0,
                        "name": "get_temperature",
                        "arguments": {"city": "New York"},
                    },
                }
            ],
        )
    )
    objs.append(
        chunk(
            model,
            n + 1,
            tool_calls=[
                {"function": {"name": "get_conditions", "arguments": {"city": "New York"}}}
            ],
        )
    )
    objs.append(final(model, n + 2))
    return lines(objs)


def thinking_transcript(model: str = "qwen3:8b") -> list[bytes]:
    objs = [chunk(model, i, thinking=t) for i, t in enumerate(THINKING)]
    objs += [chunk(model, len(objs) + i, content=a) for i, a in enumerate(ANSWER)]
    objs.append(final(model, len(objs), prompt_eval_count=18, eval_count=34))
    return lines(objs)


def error_midstream_transcript(model: str = "llama3.2") -> list[bytes]:
    objs: list[dict[str, Any]] = [
        chunk(model, i, content=w) for i, w in enumerate([" Yes", ".", " I", " can"])
    ]
    objs.append({"error": "an error was encountered while running the model"})
    return lines(objs)


PULL_DIGEST = "sha256:dde5aa3fc5ffc17176b5e8bdc82f587b24b2678c6c66101bf7da77af9f7ccdff"
PULL_TOTAL = 2019377376


def pull_transcript() -> list[bytes]:
    objs: list[dict[str, Any]] = [{"status": "pulling manifest"}]
    status = "pulling " + PULL_DIGEST[7:19]
    objs.append({"status": status, "digest": PULL_DIGEST})
    objs.append({"status": status, "digest": PULL_DIGEST, "total": PULL_TOTAL})
    for done in (1048576, 352321536, 1207959552, PULL_TOTAL):
        objs.append(
            {"status": status, "digest": PULL_DIGEST, "total": PULL_TOTAL, "completed": done}
        )
    objs += [
        {"status": "verifying sha256 digest"},
        {"status": "writing manifest"},
        {"status": "success"},
    ]
    return lines(objs)


def pull_error_transcript() -> list[bytes]:
    return lines(
        [{"status": "pulling manifest"}, {"error": "pull model manifest: file does not exist"}]
    )
