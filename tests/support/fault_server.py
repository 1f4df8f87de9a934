"""Fault scripts for the raw-socket loopback server of ``transport_support``, and leak checks.

``transport_support.serve(scripts)`` runs the server; this module adds the scripts a fault suite
needs (every framing, gzip, drips, statuses with any header, resets, request sequences, a
connect that never completes) and a :class:`Baseline` that checks threads and file descriptors
came back after a test. Everything here writes raw bytes, so faults HTTP libraries would hide
(a CRLF split across two TCP segments, a chunked body cut mid-chunk) happen exactly.

It also runs as a separate soak server process (``python fault_server.py --soak``): it prints
its port on stdout and serves streamed chats until stdin closes, so a soak run measures only the
client's memory, threads and descriptors.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

if __package__ in (None, ""):  # run as a script: make ``transport_support`` importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from ollm_lite.http.policy import Timeouts
from support.transport_support import (
    Request,
    Script,
    end_chunks,
    open_fds,
    respond,
    send_chunk,
    wait_for_threads,
)

OLLAMA_CHAT = "/api/chat"
OPENAI_CHAT = "/v1/chat/completions"
GEMINI_CHAT = "/v1beta/models/m:streamGenerateContent"
ANTHROPIC_CHAT = "/v1/messages"
CANARY = "sk-CANARY-7f3e9a1c2b4d6e8f0a1b"
"""An API key that must never appear anywhere but in the auth headers of its own host."""

RESET = b"\x01\x00\x00\x00\x00\x00\x00\x00"  # SO_LINGER on, 0 s: close() sends RST


# --------------------------------------------------------------------------- wire builders


def ollama_lines(words: Sequence[str], *, done: bool = True, model: str = "m") -> list[bytes]:
    """One ``/api/chat`` NDJSON line per word, then the ``done`` line."""
    out = []
    for word in words:
        obj = {
            "model": model,
            "created_at": "2025-01-01T00:00:00Z",
            "message": {"role": "assistant", "content": word},
            "done": False,
        }
        out.append(json.dumps(obj, ensure_ascii=False).encode() + b"\n")
    if done:
        out.append(ollama_done())
    return out


def ollama_done(reason: str = "stop", message: dict[str, Any] | None = None) -> bytes:
    """The final ``/api/chat`` line."""
    obj = {
        "model": "m",
        "created_at": "2025-01-01T00:00:01Z",
        "message": message or {"role": "assistant", "content": ""},
        "done": True,
        "done_reason": reason,
        "prompt_eval_count": 5,
        "eval_count": 3,
    }
    return json.dumps(obj).encode() + b"\n"


def ollama_tool_lines(calls: Sequence[tuple[str, Any]]) -> list[bytes]:
    """An Ollama turn carrying ``calls`` (name, arguments object) in one chunk, then done."""
    message = {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"function": {"name": n, "arguments": a}} for n, a in calls],
    }
    first = {"model": "m", "created_at": "t", "message": message, "done": False}
    return [json.dumps(first).encode() + b"\n", ollama_done()]


def sse_data(obj: Any, eol: bytes = b"\n") -> bytes:
    """One SSE event ``data: <json>`` (a string is sent raw)."""
    data = obj if isinstance(obj, str) else json.dumps(obj, ensure_ascii=False)
    return b"data: " + data.encode() + eol + eol


def oa_chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    """One ``chat.completion.chunk``."""
    return {
        "id": "c1",
        "object": "chat.completion.chunk",
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_events(
    words: Sequence[str], *, finish: str | None = "stop", done: bool = True, eol: bytes = b"\n"
) -> list[bytes]:
    """One SSE event per word, the finish chunk, then ``[DONE]``."""
    out = [sse_data(oa_chunk({"role": "assistant", "content": ""}), eol)]
    out += [sse_data(oa_chunk({"content": w}), eol) for w in words]
    if finish is not None:
        out.append(sse_data(oa_chunk({}, finish), eol))
    if done:
        out.append(b"data: [DONE]" + eol + eol)
    return out


def openai_tool_events(calls: Sequence[tuple[str, str, str]]) -> list[bytes]:
    """A turn of tool calls (id, name, raw arguments), arguments cut in 7-character pieces."""
    out = [sse_data(oa_chunk({"role": "assistant", "content": None}))]
    for index, (call_id, name, args) in enumerate(calls):
        head = {"index": index, "id": call_id, "type": "function"}
        first = {**head, "function": {"name": name, "arguments": ""}}
        out.append(sse_data(oa_chunk({"tool_calls": [first]})))
        for i in range(0, len(args), 7):
            frag = {"index": index, "function": {"arguments": args[i : i + 7]}}
            out.append(sse_data(oa_chunk({"tool_calls": [frag]})))
    out.append(sse_data(oa_chunk({}, "tool_calls")))
    out.append(b"data: [DONE]\n\n")
    return out


# --------------------------------------------------------------------------- scripts


def _keep(script: Script, keep_alive: bool) -> Script:
    script.keep_alive = keep_alive  # type: ignore[attr-defined]
    return script


def _head(
    client: socket.socket,
    status: int = 200,
    headers: dict[str, str] | None = None,
    content_type: str = "application/x-ndjson",
) -> None:
    # Like real servers (Go's net/http, uvicorn): no Nagle, so small writes are not held back
    # waiting for the client's delayed ACK.
    client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
    client.sendall(
        f"HTTP/1.1 {status} X\r\nContent-Type: {content_type}\r\n{extra}\r\n".encode("latin-1")
    )


def end_with(client: socket.socket, req: Request, then: str) -> None:
    """Finish a response: ``end`` (last chunk), ``hang``, ``reset`` (RST) or ``close`` (FIN)."""
    if then == "end":
        end_chunks(client)
    elif then == "hang":
        req.stop.wait(30)
    elif then == "reset":
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
        client.close()
    elif then == "close":
        client.shutdown(socket.SHUT_RDWR)


def chunks(
    parts: Sequence[bytes],
    *,
    then: str = "end",
    delay: float = 0.0,
    content_type: str = "application/x-ndjson",
    headers: dict[str, str] | None = None,
    keep_alive: bool = False,
) -> Script:
    """``Transfer-Encoding: chunked``: one HTTP chunk per part (``delay`` before each)."""

    def script(client: socket.socket, req: Request) -> None:
        _head(client, 200, {"Transfer-Encoding": "chunked", **(headers or {})}, content_type)
        for part in parts:
            if delay and req.stop.wait(delay):
                return
            send_chunk(client, part)
        end_with(client, req, then)

    return _keep(script, keep_alive)


def segments(
    parts: Sequence[bytes],
    *,
    framing: str = "close",
    content_type: str = "application/x-ndjson",
    then: str = "close",
    gap: float = 0.02,
) -> Script:
    """The body written as separate TCP segments (``gap`` apart, TCP_NODELAY).

    ``framing``: ``close`` (close-delimited), ``length`` (``Content-Length``) or ``chunked``
    (the HTTP chunks themselves cut at the segment boundaries, so a CRLF or a UTF-8
    character can straddle two reads).
    """

    def script(client: socket.socket, req: Request) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        body = b"".join(parts)
        if framing == "length":
            _head(client, 200, {"Content-Length": str(len(body))}, content_type)
            pieces = list(parts)
        elif framing == "chunked":
            _head(client, 200, {"Transfer-Encoding": "chunked"}, content_type)
            encoded = b"%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)
            header_len = encoded.index(b"\r\n") + 2
            pieces, pos = [encoded[:header_len]], header_len
            for part in parts:
                pieces.append(encoded[pos : pos + len(part)])
                pos += len(part)
            pieces.append(encoded[pos:])
        else:
            _head(client, 200, {"Connection": "close"}, content_type)
            pieces = list(parts)
        for piece in pieces:
            if req.stop.wait(gap):
                return
            client.sendall(piece)
        if framing == "close" or then != "end":
            end_with(client, req, "close" if then == "end" else then)

    return _keep(script, False)


def gzipped(
    parts: Sequence[bytes], *, content_type: str = "application/x-ndjson", chunked: bool = True
) -> Script:
    """The body gzip-compressed (``Content-Encoding: gzip``), streamed in small chunks."""
    body = gzip.compress(b"".join(parts))

    def script(client: socket.socket, req: Request) -> None:
        if chunked:
            _head(
                client,
                200,
                {"Transfer-Encoding": "chunked", "Content-Encoding": "gzip"},
                content_type,
            )
            for i in range(0, len(body), 17):
                send_chunk(client, body[i : i + 17])
            end_chunks(client)
        else:
            _head(
                client,
                200,
                {"Content-Length": str(len(body)), "Content-Encoding": "gzip"},
                content_type,
            )
            client.sendall(body)

    return _keep(script, False)


def drip(
    body: bytes, *, every: float, content_type: str = "application/x-ndjson", then: str = "end"
) -> Script:
    """The body one byte per HTTP chunk, ``every`` seconds apart."""

    def script(client: socket.socket, req: Request) -> None:
        _head(client, 200, {"Transfer-Encoding": "chunked"}, content_type)
        for i in range(len(body)):
            if req.stop.wait(every):
                return
            send_chunk(client, body[i : i + 1])
        end_with(client, req, then)

    return _keep(script, False)


def repeat_forever(
    part: bytes,
    *,
    every: float,
    first: Sequence[bytes] = (),
    content_type: str = "application/x-ndjson",
) -> Script:
    """``first``, then ``part`` every ``every`` seconds until the client goes away."""

    def script(client: socket.socket, req: Request) -> None:
        _head(client, 200, {"Transfer-Encoding": "chunked"}, content_type)
        for piece in first:
            send_chunk(client, piece)
        while not req.stop.wait(every):
            try:
                send_chunk(client, part)
            except OSError:
                return

    return _keep(script, False)


def headers_then_silence(content_type: str = "application/x-ndjson") -> Script:
    """A 200 head, then nothing."""

    def script(client: socket.socket, req: Request) -> None:
        _head(client, 200, {"Transfer-Encoding": "chunked"}, content_type)
        req.stop.wait(30)

    return _keep(script, False)


def status(
    code: int,
    body: bytes | str | dict[str, Any] = b"",
    *,
    headers: dict[str, str] | None = None,
    content_type: str = "application/json",
) -> Script:
    """A complete error (or any) answer with ``Content-Length``."""
    if isinstance(body, dict):
        raw = json.dumps(body).encode()
    elif isinstance(body, str):
        raw = body.encode()
    else:
        raw = body

    def script(client: socket.socket, req: Request) -> None:
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        respond(client, code, raw, headers=headers, content_type=content_type)

    return _keep(script, True)


def sequence(*scripts: Script) -> Script:
    """Each request gets the next script; the last one repeats."""
    queue = list(scripts)
    lock = threading.Lock()
    state = {"i": 0}

    def script(client: socket.socket, req: Request) -> None:
        with lock:
            current = queue[min(state["i"], len(queue) - 1)]
            state["i"] += 1
        current(client, req)
        if not getattr(current, "keep_alive", False):
            raise OSError("one-shot script: close the connection")

    return _keep(script, True)


def reset_without_answer(client: socket.socket, req: Request) -> None:
    """Read the request, then reset the connection."""
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, RESET)
    client.close()


def redirect(location: str, code: int = 307) -> Script:
    """Send the client elsewhere."""
    return status(code, b"", headers={"Location": location})


# --------------------------------------------------------------------------- other servers


@contextlib.contextmanager
def refused_url() -> Iterator[str]:
    """A loopback URL nobody listens on (bound, never listening, so the port stays ours)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        sock.close()


@contextlib.contextmanager
def unanswered_connect() -> Iterator[str]:
    """A URL whose TCP handshake never completes.

    A listening socket with a backlog of 0 that never accepts, its accept queue filled first:
    Linux then drops further SYNs, so ``connect()`` blocks until its timeout.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError, OSError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.05)
        if not _connect_hangs(port):  # a kernel that resets instead (tcp_abort_on_overflow)
            import pytest

            pytest.skip("this kernel does not leave an over-full accept queue unanswered")
        yield f"http://127.0.0.1:{port}"
    finally:
        for filler in fillers:
            filler.close()
        listener.close()


def _connect_hangs(port: int) -> bool:
    probe = socket.socket()
    probe.settimeout(0.1)
    try:
        probe.connect(("127.0.0.1", port))
    except TimeoutError:
        return True
    except OSError:
        return False
    finally:
        probe.close()
    return False


# --------------------------------------------------------------------------- leak checks


@dataclass
class Baseline:
    """Threads and open descriptors before a test; :meth:`check` waits for them to return."""

    threads: int
    fds: int

    @classmethod
    def take(cls) -> Baseline:
        return cls(threading.active_count(), open_fds())

    def check(self, *, slack_fds: int = 0, timeout: float = 3.0) -> None:
        """Assert the thread count and the descriptor count are back (within ``slack_fds``)."""
        threads = wait_for_threads(self.threads, timeout)
        deadline = time.monotonic() + timeout
        while open_fds() > self.fds + slack_fds and time.monotonic() < deadline:
            time.sleep(0.02)
        fds = open_fds()
        alive = [t.name for t in threading.enumerate()]
        assert threads <= self.threads, f"threads {threads} > {self.threads}: {alive}"
        assert fds <= self.fds + slack_fds, f"open fds {fds} > {self.fds} (+{slack_fds})"


def close_provider(provider: Any) -> None:
    """Close a provider's pooled connections so descriptors can be compared to a baseline."""
    close = getattr(provider, "close", None)
    if close is not None:
        close()


# --------------------------------------------------------------------------- stream helpers

#: Small limits so every fault resolves in well under a second on loopback.
FAST = Timeouts(connect=1.0, idle=1.0)


class Wire:
    """One streaming wire format: how to build its provider and what its chat path is."""

    def __init__(self, name: str, path: str, content_type: str) -> None:
        self.name = name
        self.path = path
        self.content_type = content_type

    def provider(self, url: str, *, timeout: Any = FAST, retries: int = 0, **kw: Any) -> Any:
        if self.name == "ndjson":
            from ollm_lite.providers.ollama import LocalProvider

            return LocalProvider(base_url=url, timeout=timeout, retries=retries, **kw)
        from ollm_lite.providers.openai_compat import OpenAICompatibleProvider

        return OpenAICompatibleProvider(base_url=url, timeout=timeout, retries=retries, **kw)

    def __repr__(self) -> str:
        return self.name


NDJSON = Wire("ndjson", OLLAMA_CHAT, "application/x-ndjson")
SSE = Wire("sse", OPENAI_CHAT, "text/event-stream")


@dataclass
class Outcome:
    """What one ``chat_stream`` produced, and how long it took."""

    events: list[Any]
    elapsed: float

    @property
    def text(self) -> str:
        return "".join(e.value for e in self.events if e.type == "text")

    @property
    def terminals(self) -> list[Any]:
        return [e for e in self.events if e.type in ("finish", "error")]

    @property
    def last(self) -> Any:
        """The one terminal event (asserting there is exactly one, and that it is last)."""
        terms = self.terminals
        assert len(terms) == 1, f"expected exactly one terminal event, got {terms}"
        assert self.events[-1] is terms[0], "the terminal event is not the last one"
        return terms[0]

    @property
    def code(self) -> str | None:
        last = self.last
        return last.error.code if last.type == "error" else None


def run_stream(provider: Any, request: Any) -> Outcome:
    """Drain ``provider.chat_stream(request)``."""
    started = time.monotonic()
    events = list(provider.chat_stream(request))
    return Outcome(events, time.monotonic() - started)


def cancel_after(event: threading.Event, seconds: float) -> threading.Timer:
    """Set ``event`` after ``seconds`` from a timer thread (joined by the caller)."""
    timer = threading.Timer(seconds, event.set)
    timer.start()
    return timer


# --------------------------------------------------------------------------- soak server


def soak_scripts(words: int = 20) -> dict[str, Script]:
    """Keep-alive streamed chats for every wire (Ollama, OpenAI, Gemini, Messages), failing
    ones, and one that never answers."""
    text = [f" w{i}" for i in range(words)]
    ndjson = ollama_lines(text)
    sse = openai_events(text)

    def hang(client: socket.socket, req: Request) -> None:
        _head(client, 200, {"Transfer-Encoding": "chunked"}, "application/x-ndjson")
        send_chunk(client, ndjson[0])
        with contextlib.suppress(OSError):
            client.recv(1)  # returns when the client goes away

    gemini = [
        b"data: "
        + json.dumps(
            {
                "candidates": [
                    {
                        "content": {"parts": [{"text": w}], "role": "model"},
                        **({"finishReason": "STOP"} if i == len(text) - 1 else {}),
                    }
                ]
            }
        ).encode()
        + b"\r\n\r\n"
        for i, w in enumerate(text)
    ]
    # The Messages API's stream (https://platform.claude.com/docs/en/build-with-claude/streaming).
    messages = [
        {"type": "message_start", "message": {"content": [], "usage": {"input_tokens": 3}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": w}}
            for w in text
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 2},
        },
        {"type": "message_stop"},
    ]
    anthropic = [
        b"event: " + e["type"].encode() + b"\ndata: " + json.dumps(e).encode() + b"\n\n"
        for e in messages
    ]
    return {
        GEMINI_CHAT: chunks(gemini, content_type="text/event-stream", keep_alive=True),
        ANTHROPIC_CHAT: chunks(anthropic, content_type="text/event-stream", keep_alive=True),
        ANTHROPIC_CHAT + "/count_tokens": status(200, {"input_tokens": 3}),
        "/v1beta/models/m:countTokens": status(200, {"totalTokens": 3}),
        "/err" + OLLAMA_CHAT: status(500, {"error": "model crashed"}),
        "/reset" + OPENAI_CHAT: chunks(sse[:3], then="reset", content_type="text/event-stream"),
        OLLAMA_CHAT: chunks(ndjson, keep_alive=True),
        OPENAI_CHAT: chunks(sse, content_type="text/event-stream", keep_alive=True),
        "/hang/api/chat": _keep(hang, False),
    }


def _main() -> None:
    from support.transport_support import LoopbackServer, serve_until_stdin_closes

    serve_until_stdin_closes(LoopbackServer(soak_scripts()))


if __name__ == "__main__" and "--soak" in sys.argv:
    _main()
