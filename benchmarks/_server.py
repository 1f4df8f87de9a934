"""A loopback streaming server for the benchmarks (stdlib only, raw sockets).

It serves OpenAI-shaped SSE on ``POST /v1/chat/completions``, Ollama-shaped NDJSON on
``POST /api/chat`` and Messages API SSE (named events) on ``POST /v1/messages``. What a request
gets is chosen by the ``model`` field of its JSON body, so every client (ollm_lite,
openai-python, ollama-python, plain ``requests``) can ask for any workload without special
parameters::

    "<kind>-<mode>-<n>[-<size>]"

* ``kind``: ``text`` (``n`` content chunks, then a finish chunk), ``tools`` (one tool call whose
  arguments arrive in ``n`` fragments; SSE only), ``big`` (``n`` content chunks of ``size``
  characters each), ``silent`` (status and headers, then nothing until the client goes away),
  ``mute`` (nothing at all, not even a status line);
* ``mode``: ``event`` sends every event as its own HTTP chunk (one ``sendall`` each, as real
  servers do), ``bulk`` sends the body as 64 KiB HTTP chunks.

Bodies are built once per workload and cached, so the server costs a ``sendall`` per HTTP
chunk. Connections are kept alive (HTTP/1.1, chunked bodies). It runs on the tests' loopback
server (``tests/support/transport_support.py``), in a child process (:class:`ServerProcess`)
so that it never competes with the measured client for the GIL.
"""

from __future__ import annotations

import contextlib
import functools
import json
import socket
import sys
from collections.abc import Iterator
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT / "tests") not in sys.path:  # the one loopback server lives with the tests
    sys.path.insert(0, str(_ROOT / "tests"))

from support.transport_support import (  # noqa: E402
    ChildServer,
    LoopbackServer,
    Request,
    serve_until_stdin_closes,
)

__all__ = [
    "ServerProcess",
    "answer",
    "messages_events",
    "ollama_lines",
    "openai_events",
    "server",
    "workload_body",
]

BULK_CHUNK = 64 * 1024

_SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
_NDJSON_HEAD = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
)
_NOT_FOUND = (
    b"HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\nContent-Length: 21\r\n\r\n"
    b'{"error":"not found"}'
)


# --------------------------------------------------------------------------- bodies


def _openai_chunk(delta: dict[str, object], finish: str | None = None, **extra: object) -> bytes:
    obj = {
        "id": "chatcmpl-9f3c1a2b7e",
        "object": "chat.completion.chunk",
        "created": 1718000000,
        "model": "qwen2.5-7b-instruct",
        "system_fingerprint": "fp_local",
        "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        **extra,
    }
    return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"


def openai_events(kind: str, n: int, size: int = 0) -> list[bytes]:
    """The SSE events of one ``/v1/chat/completions`` answer, one ``bytes`` per event."""
    out = [_openai_chunk({"role": "assistant", "content": ""})]
    if kind == "tools":
        args = json.dumps({"path": "/srv/data/report.txt", "text": "lorem ipsum " * n})
        step = max(1, -(-len(args) // n))
        pieces = [args[i : i + step] for i in range(0, len(args), step)]
        out.append(
            _openai_chunk(
                {
                    "tool_calls": [
                        {
                            "index": 0,
                            "id": "call_bench0",
                            "type": "function",
                            "function": {"name": "write_file", "arguments": ""},
                        }
                    ]
                }
            )
        )
        out.extend(
            _openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": piece}}]})
            for piece in pieces
        )
        finish = "tool_calls"
    elif kind == "big":
        piece = "abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 1)
        out.extend(_openai_chunk({"content": piece[:size]}) for _ in range(n))
        finish = "stop"
    else:
        out.extend(_openai_chunk({"content": f" token{i % 97}"}) for i in range(n))
        finish = "stop"
    out.append(_openai_chunk({}, finish))
    out.append(
        b"data: "
        + json.dumps(
            {
                "id": "chatcmpl-9f3c1a2b7e",
                "object": "chat.completion.chunk",
                "choices": [],
                "usage": {"prompt_tokens": 12, "completion_tokens": n, "total_tokens": n + 12},
            },
            separators=(",", ":"),
        ).encode()
        + b"\n\n"
    )
    out.append(b"data: [DONE]\n\n")
    return out


def _messages_event(obj: dict[str, object]) -> bytes:
    data = json.dumps(obj, separators=(",", ":")).encode()
    return b"event: " + str(obj["type"]).encode() + b"\ndata: " + data + b"\n\n"


def messages_events(kind: str, n: int, size: int = 0) -> list[bytes]:
    """The SSE events of one ``/v1/messages`` answer (``event:`` and ``data:`` lines, as
    https://platform.claude.com/docs/en/build-with-claude/streaming shows), one ``bytes`` each."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_bench",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "bench",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 12, "output_tokens": 1},
        },
    }
    out = [_messages_event(start)]
    out.append(
        _messages_event(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            }
        )
    )
    if kind == "big":
        piece = ("abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 1))[:size]
        texts = [piece] * n
    else:
        texts = [f" token{i % 97}" for i in range(n)]
    out.extend(
        _messages_event(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": t}}
        )
        for t in texts
    )
    out.append(_messages_event({"type": "content_block_stop", "index": 0}))
    out.append(
        _messages_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": n},
            }
        )
    )
    out.append(_messages_event({"type": "message_stop"}))
    return out


def ollama_lines(kind: str, n: int, size: int = 0) -> list[bytes]:
    """The NDJSON lines of one ``/api/chat`` answer, one ``bytes`` per line."""

    def line(content: str, done: bool = False, **extra: object) -> bytes:
        obj = {
            "model": "llama3.2",
            "created_at": "2025-01-01T12:00:00.123456789Z",
            "message": {"role": "assistant", "content": content},
            "done": done,
            **extra,
        }
        return json.dumps(obj, separators=(",", ":")).encode() + b"\n"

    if kind == "big":
        piece = ("abcdefghijklmnopqrstuvwxyz0123456789" * (size // 36 + 1))[:size]
        out = [line(piece) for _ in range(n)]
    else:
        out = [line(f" word{i % 89}") for i in range(n)]
    out.append(
        line(
            "",
            True,
            done_reason="stop",
            total_duration=1_000_000,
            load_duration=1000,
            prompt_eval_count=12,
            prompt_eval_duration=1000,
            eval_count=n,
            eval_duration=1_000_000,
        )
    )
    return out


@functools.lru_cache(maxsize=16)
def workload_body(path: str, model: str) -> tuple[bytes, tuple[bytes, ...]]:
    """Response head and the framed HTTP chunks (terminating chunk included) for a request."""
    kind, mode, n_text, *rest = model.split("-")
    n = int(n_text)
    size = int(rest[0]) if rest else 0
    if path.startswith("/api/"):
        head, events = _NDJSON_HEAD, ollama_lines(kind, n, size)
    elif path.startswith("/v1/messages"):
        head, events = _SSE_HEAD, messages_events(kind, n, size)
    else:
        head, events = _SSE_HEAD, openai_events(kind, n, size)
    if mode == "bulk":
        body = b"".join(events)
        events = [body[i : i + BULK_CHUNK] for i in range(0, len(body), BULK_CHUNK)]
    framed = (*(b"%x\r\n%s\r\n" % (len(e), e) for e in events), b"0\r\n\r\n")
    return head, framed


# --------------------------------------------------------------------------- serving


def _wait_for_close(conn: socket.socket) -> None:
    """Say nothing until the client goes away (a silent server)."""
    conn.settimeout(None)
    with contextlib.suppress(OSError):
        while conn.recv(65536):
            pass


def answer(conn: socket.socket, req: Request) -> None:
    """The script for both chat paths: the workload named by the body's ``model``."""
    if req.method != "POST":
        conn.sendall(_NOT_FOUND)
        return
    path = req.path.split("?")[0]
    model = str((req.json or {}).get("model", "text-event-1"))
    if model.startswith("mute-"):
        _wait_for_close(conn)
        raise ConnectionAbortedError("the client went away")  # ends this connection
    if model.startswith("silent-"):
        conn.sendall(_SSE_HEAD if path.startswith("/v1/") else _NDJSON_HEAD)
        _wait_for_close(conn)
        raise ConnectionAbortedError("the client went away")
    head, chunks = workload_body(path, model)
    sendall = conn.sendall
    sendall(head)
    for chunk in chunks:
        sendall(chunk)


def _not_found(conn: socket.socket, req: Request) -> None:
    conn.sendall(_NOT_FOUND)


def server() -> LoopbackServer:
    """The benchmark server in this process (keep-alive connections, one thread each)."""
    routes = {"/v1/chat/completions": answer, "/api/chat": answer, "/v1/messages": answer}
    return LoopbackServer(routes, keep_alive=True, fallback=_not_found)


class ServerProcess(ChildServer):
    """The server in a child process; ``url`` is its root. Use as a context manager."""

    def __init__(self) -> None:
        super().__init__(["-m", "benchmarks._server"])


def iter_chunks_for_tests(path: str, model: str) -> Iterator[bytes]:
    """The unframed body of a workload (what a client should receive), for checks."""
    if path.startswith("/api/"):
        kind, _mode, n, *rest = model.split("-")
        yield from ollama_lines(kind, int(n), int(rest[0]) if rest else 0)
    else:
        kind, _mode, n, *rest = model.split("-")
        yield from openai_events(kind, int(n), int(rest[0]) if rest else 0)


if __name__ == "__main__":
    serve_until_stdin_closes(server())
