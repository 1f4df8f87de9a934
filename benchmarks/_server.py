"""A loopback streaming server for the benchmarks (stdlib only, raw sockets).

It serves OpenAI-shaped SSE on ``POST /v1/chat/completions`` and Ollama-shaped NDJSON on
``POST /api/chat``. What a request gets is chosen by the ``model`` field of its JSON body, so
every client (ollm_lite, openai-python, ollama-python, plain ``requests``) can ask for any
workload without special parameters::

    "<kind>-<mode>-<n>[-<size>]"

* ``kind``: ``text`` (``n`` content chunks, then a finish chunk), ``tools`` (one tool call whose
  arguments arrive in ``n`` fragments; SSE only), ``big`` (``n`` content chunks of ``size``
  characters each), ``silent`` (status and headers, then nothing until the client goes away),
  ``mute`` (nothing at all, not even a status line);
* ``mode``: ``event`` sends every event as its own HTTP chunk (one ``sendall`` each, as real
  servers do), ``bulk`` sends the body as 64 KiB HTTP chunks.

Bodies are built once per workload and cached, so the server costs a ``sendall`` per HTTP
chunk. Connections are kept alive (HTTP/1.1, chunked bodies). Run it in a child process
(:class:`ServerProcess`) so that it never competes with the measured client for the GIL.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType

__all__ = ["ServerProcess", "ollama_lines", "openai_events", "serve", "workload_body"]

BULK_CHUNK = 64 * 1024
_ROOT = Path(__file__).resolve().parent.parent

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
    else:
        head, events = _SSE_HEAD, openai_events(kind, n, size)
    if mode == "bulk":
        body = b"".join(events)
        events = [body[i : i + BULK_CHUNK] for i in range(0, len(body), BULK_CHUNK)]
    framed = (*(b"%x\r\n%s\r\n" % (len(e), e) for e in events), b"0\r\n\r\n")
    return head, framed


# --------------------------------------------------------------------------- serving


def _read_request(rfile: object) -> tuple[str, str, bytes] | None:
    readline = rfile.readline  # type: ignore[attr-defined]
    line = readline(65536)
    if not line:
        return None
    method, path, _ = line.decode("latin-1").split(" ", 2)
    length = 0
    chunked = False
    while True:
        header = readline(65536)
        if header in (b"\r\n", b"\n", b""):
            break
        name, _, value = header.decode("latin-1").partition(":")
        name = name.strip().lower()
        if name == "content-length":
            length = int(value.strip())
        elif name == "transfer-encoding" and "chunked" in value.lower():
            chunked = True
    if chunked:
        parts = []
        while True:
            size = int(readline(65536).split(b";")[0], 16)
            if size == 0:
                readline(65536)
                break
            parts.append(rfile.read(size))  # type: ignore[attr-defined]
            readline(65536)
        body = b"".join(parts)
    else:
        body = rfile.read(length) if length else b""  # type: ignore[attr-defined]
    return method, path, body


def _wait_for_close(conn: socket.socket) -> None:
    """Say nothing until the client goes away (a silent server)."""
    conn.settimeout(None)
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass


def _handle(conn: socket.socket) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rfile = conn.makefile("rb")
    sendall = conn.sendall
    try:
        while True:
            req = _read_request(rfile)
            if req is None:
                return
            method, path, body = req
            path = path.split("?")[0]
            if method != "POST" or path not in ("/v1/chat/completions", "/api/chat"):
                sendall(_NOT_FOUND)
                continue
            model = str(json.loads(body or b"{}").get("model", "text-event-1"))
            if model.startswith("mute-"):
                _wait_for_close(conn)
                return
            if model.startswith("silent-"):
                head = _SSE_HEAD if path.startswith("/v1/") else _NDJSON_HEAD
                sendall(head)
                _wait_for_close(conn)
                return
            head, chunks = workload_body(path, model)
            sendall(head)
            for chunk in chunks:
                sendall(chunk)
    except (OSError, ValueError):
        return
    finally:
        rfile.close()
        conn.close()


def serve(sock: socket.socket) -> None:
    """Accept connections forever, one thread each."""
    while True:
        try:
            conn, _ = sock.accept()
        except OSError:
            return
        threading.Thread(target=_handle, args=(conn,), daemon=True).start()


def _main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)
    print(sock.getsockname()[1], flush=True)
    threading.Thread(target=serve, args=(sock,), daemon=True).start()
    sys.stdin.read()  # the parent closes our stdin to stop us


class ServerProcess:
    """The server in a child process; ``url`` is its root. Use as a context manager."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(_ROOT)}
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks._server"],
            cwd=str(_ROOT),
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        if not line.strip():
            self.close()
            raise RuntimeError("the benchmark server did not start")
        self.port = int(line)
        self.url = f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> ServerProcess:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Stop the child process."""
        proc = self._proc
        if proc.poll() is None:
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def iter_chunks_for_tests(path: str, model: str) -> Iterator[bytes]:
    """The unframed body of a workload (what a client should receive), for checks."""
    if path.startswith("/api/"):
        kind, _mode, n, *rest = model.split("-")
        yield from ollama_lines(kind, int(n), int(rest[0]) if rest else 0)
    else:
        kind, _mode, n, *rest = model.split("-")
        yield from openai_events(kind, int(n), int(rest[0]) if rest else 0)


if __name__ == "__main__":
    _main()
