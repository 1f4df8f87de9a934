"""Stream throughput, the long tool-call stream and time to first event.

Every contender talks HTTP to the same loopback server (a child process, see ``_server``) and
does the work a user needs: read the body, split it into events, ``json.loads`` each one and
take out the text. Contenders, each timed end to end as the user receives events:

* ``ollm_lite``: ``OpenAICompatibleProvider.chat_stream`` (SSE), ``LocalProvider.chat_stream``
  (NDJSON) or ``AnthropicProvider.chat_stream`` (the Messages API's SSE, named events),
  counting ``TextEvent`` values;
* ``naive floor``: ``requests`` (``iter_content(None)``, one item per HTTP chunk), ``bytes.split``
  on LF, ``json.loads``, take the content: fast, and wrong at chunk boundaries (a CR line end,
  U+2028, an event cut between chunks in the wrong place);
* ``naive str.split``: the same loop on text: each chunk decoded to ``str`` once, then
  ``str.split`` and ``json.loads(str)`` (faster than the bytes loop on 64 KiB chunks; as wrong);
* ``requests iter_lines``: the same with ``Response.iter_lines()`` (the first floor measured);
* ``openai-python`` (SSE) and ``ollama-python`` (NDJSON), streaming with their own clients.

Throughput runs are interleaved in one process (one warm-up round, then ``runs`` rounds of
every contender in turn) and the median is reported. Run this section alone with
``python -m benchmarks --only streams``.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

import requests

from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import Message, ProviderRequest, TextEvent, ToolCallEvent

from ._common import Report, Settings, interleave, median, peer
from ._server import ServerProcess, openai_events

SECTION = "streams"
NAIVE = ("naive floor", "naive str.split", "requests iter_lines")
"""The naive loops; the ratio targets compare ollm_lite with the fastest of them."""
RATIO_LIMIT = {"event": 1.10, "bulk": 1.15}
"""Most ollm_lite may cost, per event, over the fastest naive loop: per-event and bulk."""
_MESSAGES = [{"role": "user", "content": "hi"}]
_FORMATS = {"sse": "SSE", "ndjson": "NDJSON", "messages": "Messages SSE"}
"""Row labels of the wire formats raced."""


class Clients:
    """One client of each kind, reused across runs (warm connections)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.session = requests.Session()
        self.sse = OpenAICompatibleProvider(base_url=url, retries=0)
        self.ndjson = LocalProvider(base_url=url, retries=0)
        self.messages = AnthropicProvider(base_url=url, retries=0)
        openai = peer("openai")
        ollama = peer("ollama")
        self.openai = (
            openai.OpenAI(base_url=url + "/v1", api_key="bench", max_retries=0) if openai else None
        )
        self.ollama = ollama.Client(host=url) if ollama else None

    def close(self) -> None:
        """Close every client's connections."""
        self.session.close()
        self.sse.close()
        self.ndjson.close()
        self.messages.close()
        if self.openai is not None:
            self.openai.close()
        if self.ollama is not None:
            self.ollama._client.close()


# --------------------------------------------------------------------------- contenders


def ollm_stream(provider: Any, model: str, cancel: threading.Event | None = None) -> int:
    """Text events of one ``chat_stream``."""
    request = ProviderRequest(model=model, messages=[Message.user("hi")], cancel=cancel)
    n = 0
    for event in provider.chat_stream(request):
        if type(event) is TextEvent:
            n += 1
    return n


def _post_sse(session: requests.Session, url: str, model: str) -> requests.Response:
    """The streamed OpenAI-style request every naive SSE loop sends (once per stream)."""
    body = {"model": model, "messages": _MESSAGES, "stream": True}
    return session.post(url + "/v1/chat/completions", json=body, stream=True)


def _post_ndjson(session: requests.Session, url: str, model: str) -> requests.Response:
    """The streamed Ollama-style request every naive NDJSON loop sends (once per stream)."""
    body = {"model": model, "messages": _MESSAGES, "stream": True}
    return session.post(url + "/api/chat", json=body, stream=True)


# Each naive loop below is written out in full, as a user would write it: sharing the
# per-line work through a function would add a call per event to the floor being raced.


def naive_sse(session: requests.Session, url: str, model: str) -> int:
    """The naive floor for SSE: ``iter_content`` + split on LF + ``json.loads``."""
    resp = _post_sse(session, url, model)
    n = 0
    buf = b""
    loads = json.loads
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if line[:6] == b"data: " and line != b"data: [DONE]":
                choices = loads(line[6:])["choices"]
                if choices and choices[0]["delta"].get("content"):
                    n += 1
    resp.close()
    return n


def naive_ndjson(session: requests.Session, url: str, model: str) -> int:
    """The naive floor for NDJSON: ``iter_content`` + split on LF + ``json.loads``."""
    resp = _post_ndjson(session, url, model)
    n = 0
    buf = b""
    loads = json.loads
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if line and loads(line)["message"]["content"]:
                n += 1
    resp.close()
    return n


def naive_str_sse(session: requests.Session, url: str, model: str) -> int:
    """A naive loop on text: each chunk decoded to ``str`` once, ``str.split``, ``json.loads``."""
    resp = _post_sse(session, url, model)
    n = 0
    buf = ""
    loads = json.loads
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk.decode()
        lines = buf.split("\n")
        buf = lines.pop()
        for line in lines:
            if line[:6] == "data: " and line != "data: [DONE]":
                choices = loads(line[6:])["choices"]
                if choices and choices[0]["delta"].get("content"):
                    n += 1
    resp.close()
    return n


def naive_str_ndjson(session: requests.Session, url: str, model: str) -> int:
    """The text loop for NDJSON: decode once to ``str``, ``str.split``, ``json.loads``."""
    resp = _post_ndjson(session, url, model)
    n = 0
    buf = ""
    loads = json.loads
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk.decode()
        lines = buf.split("\n")
        buf = lines.pop()
        for line in lines:
            if line and loads(line)["message"]["content"]:
                n += 1
    resp.close()
    return n


def lines_sse(session: requests.Session, url: str, model: str) -> int:
    """``Response.iter_lines`` + ``json.loads`` (a naive floor)."""
    resp = _post_sse(session, url, model)
    n = 0
    for line in resp.iter_lines():
        if line[:6] == b"data: " and line != b"data: [DONE]":
            choices = json.loads(line[6:])["choices"]
            if choices and choices[0]["delta"].get("content"):
                n += 1
    resp.close()
    return n


def lines_ndjson(session: requests.Session, url: str, model: str) -> int:
    """``Response.iter_lines`` + ``json.loads`` for NDJSON."""
    resp = _post_ndjson(session, url, model)
    n = 0
    for line in resp.iter_lines():
        if line and json.loads(line)["message"]["content"]:
            n += 1
    resp.close()
    return n


def _post_messages(session: requests.Session, url: str, model: str) -> requests.Response:
    """The streamed Messages API request every naive Messages loop sends (once per stream)."""
    body = {"model": model, "max_tokens": 4096, "messages": _MESSAGES, "stream": True}
    return session.post(url + "/v1/messages", json=body, stream=True)


def naive_messages(session: requests.Session, url: str, model: str) -> int:
    """The naive floor for the Messages API: ``iter_content`` + split on LF + ``json.loads``
    of each ``data:`` line (the ``event:`` lines skipped), text deltas counted."""
    resp = _post_messages(session, url, model)
    n = 0
    buf = b""
    loads = json.loads
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if line[:6] == b"data: ":
                obj = loads(line[6:])
                if obj["type"] == "content_block_delta" and obj["delta"].get("text"):
                    n += 1
    resp.close()
    return n


def naive_str_messages(session: requests.Session, url: str, model: str) -> int:
    """The text loop for the Messages API: decode once to ``str``, ``str.split``, ``json.loads``."""
    resp = _post_messages(session, url, model)
    n = 0
    buf = ""
    loads = json.loads
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk.decode()
        lines = buf.split("\n")
        buf = lines.pop()
        for line in lines:
            if line[:6] == "data: ":
                obj = loads(line[6:])
                if obj["type"] == "content_block_delta" and obj["delta"].get("text"):
                    n += 1
    resp.close()
    return n


def lines_messages(session: requests.Session, url: str, model: str) -> int:
    """``Response.iter_lines`` + ``json.loads`` for the Messages API."""
    resp = _post_messages(session, url, model)
    n = 0
    for line in resp.iter_lines():
        if line[:6] == b"data: ":
            obj = json.loads(line[6:])
            if obj["type"] == "content_block_delta" and obj["delta"].get("text"):
                n += 1
    resp.close()
    return n


def openai_stream(client: Any, model: str) -> int:
    """openai-python's streamed chat completion, counting content deltas."""
    n = 0
    stream = client.chat.completions.create(model=model, messages=_MESSAGES, stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            n += 1
    return n


def ollama_stream(client: Any, model: str) -> int:
    """ollama-python's streamed chat, counting content pieces."""
    n = 0
    for chunk in client.chat(model=model, messages=_MESSAGES, stream=True):
        if chunk.message.content:
            n += 1
    return n


def contenders(clients: Clients, fmt: str, model: str) -> dict[str, Callable[[], int]]:
    """Every contender for one wire format, bound to one workload."""
    url, session = clients.url, clients.session
    out: dict[str, Callable[[], int]]
    if fmt == "sse":
        out = {
            "ollm_lite": lambda: ollm_stream(clients.sse, model),
            "naive floor": lambda: naive_sse(session, url, model),
            "naive str.split": lambda: naive_str_sse(session, url, model),
            "requests iter_lines": lambda: lines_sse(session, url, model),
        }
        if clients.openai is not None:
            out["openai-python"] = lambda: openai_stream(clients.openai, model)
    elif fmt == "messages":
        out = {
            "ollm_lite": lambda: ollm_stream(clients.messages, model),
            "naive floor": lambda: naive_messages(session, url, model),
            "naive str.split": lambda: naive_str_messages(session, url, model),
            "requests iter_lines": lambda: lines_messages(session, url, model),
        }
    else:
        out = {
            "ollm_lite": lambda: ollm_stream(clients.ndjson, model),
            "naive floor": lambda: naive_ndjson(session, url, model),
            "naive str.split": lambda: naive_str_ndjson(session, url, model),
            "requests iter_lines": lambda: lines_ndjson(session, url, model),
        }
        if clients.ollama is not None:
            out["ollama-python"] = lambda: ollama_stream(clients.ollama, model)
    return out


def _checked(fn: Callable[[], int], expected: int, name: str) -> Callable[[], int]:
    def call() -> int:
        got = fn()
        if got != expected:
            raise RuntimeError(f"{name} received {got} text chunks, expected {expected}")
        return got

    return call


# --------------------------------------------------------------------------- sections


def throughput(report: Report, clients: Clients, settings: Settings) -> None:
    """µs per chunk and chunks/s for every contender on four workloads; the ratio targets.

    The ratio targets use the client's CPU time per event (this process; the server is
    another): on a shared machine, wall time moves by tens of per cent between rounds while
    CPU time, the work each contender does, stays put. Both are reported.
    """
    n = settings.chunks
    per_chunk: dict[tuple[str, str], dict[str, float]] = {}
    cpu_per_chunk: dict[tuple[str, str], dict[str, float]] = {}
    for fmt in ("sse", "ndjson", "messages"):
        for mode in ("event", "bulk"):
            model = f"text-{mode}-{n}"
            bench = {
                name: _checked(fn, n, name) for name, fn in contenders(clients, fmt, model).items()
            }
            cpu: dict[str, list[float]] = {}
            times = interleave(bench, settings.runs, cpu=cpu)
            figures = {name: median(t) / n * 1e6 for name, t in times.items()}
            cpu_figures = {name: median(t) / n * 1e6 for name, t in cpu.items()}
            per_chunk[(fmt, mode)] = figures
            cpu_per_chunk[(fmt, mode)] = cpu_figures
            floor = min(figures[name] for name in NAIVE)
            cpu_floor = min(cpu_figures[name] for name in NAIVE)
            label = f"{_FORMATS[fmt]} {'per-event' if mode == 'event' else 'bulk'}"
            for name, us in figures.items():
                report.add(
                    f"{label}: {name}",
                    us,
                    "µs/chunk",
                    f"{1e6 / us:,.0f} chunks/s; {us / floor:.2f}x the fastest naive loop",
                )
            for name, us in cpu_figures.items():
                report.add(
                    f"{label}: {name}, client CPU",
                    us,
                    "µs/chunk",
                    f"{us / cpu_floor:.2f}x the fastest naive loop's CPU",
                )
    for (fmt, mode), fig in cpu_per_chunk.items():
        floor_name = min(NAIVE, key=lambda k: fig[k])
        label = f"{_FORMATS[fmt]} {'per-event' if mode == 'event' else 'bulk'}"
        report.target(
            f"{label}: ollm_lite / fastest naive loop (client CPU)",
            fig["ollm_lite"] / fig[floor_name],
            RATIO_LIMIT[mode],
            "x",
            f"{fig['ollm_lite']:.2f} vs {fig[floor_name]:.2f} µs/chunk ({floor_name})",
        )
    sse, nd = per_chunk[("sse", "event")], per_chunk[("ndjson", "event")]
    if "openai-python" in sse:
        report.target(
            "SSE per-event: openai-python / ollm_lite",
            sse["openai-python"] / sse["ollm_lite"],
            10.0,
            "x",
            f"{sse['openai-python']:.1f} vs {sse['ollm_lite']:.2f} µs/chunk",
            at_least=True,
        )
    if "ollama-python" in nd:
        report.target(
            "NDJSON per-event: ollama-python / ollm_lite",
            nd["ollama-python"] / nd["ollm_lite"],
            1.5,
            "x",
            f"{nd['ollama-python']:.2f} vs {nd['ollm_lite']:.2f} µs/chunk",
            at_least=True,
        )


def _tool_stream(provider: Any, model: str, expect_len: int) -> int:
    calls = 0
    for event in provider.chat_stream(ProviderRequest(model=model, messages=[Message.user("hi")])):
        if type(event) is ToolCallEvent:
            if len(event.value.args.get("text", "")) != expect_len:
                raise RuntimeError("the tool call's arguments were not assembled correctly")
            calls += 1
    if calls != 1:
        raise RuntimeError(f"expected one tool call, got {calls}")
    return calls


def _openai_tool_stream(client: Any, model: str) -> int:
    parts: list[str] = []
    stream = client.chat.completions.create(model=model, messages=_MESSAGES, stream=True)
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.tool_calls:
            fn = chunk.choices[0].delta.tool_calls[0].function
            if fn is not None and fn.arguments:
                parts.append(fn.arguments)
    json.loads("".join(parts))
    return 1


def tool_calls(report: Report, clients: Clients, settings: Settings) -> None:
    """One tool call whose arguments arrive in F and 10·F fragments: cost per fragment."""
    small = settings.fragments
    per_fragment: dict[int, float] = {}
    for count in (small, small * 10):
        model = f"tools-event-{count}"
        fragments = len(openai_events("tools", count)) - 5  # role, name, finish, usage, DONE
        text_len = len("lorem ipsum " * count)
        bench: dict[str, Callable[[], object]] = {
            "ollm_lite": lambda m=model, t=text_len: _tool_stream(clients.sse, m, t),  # type: ignore[misc]
        }
        if clients.openai is not None and count == small:
            bench["openai-python (+ user joins fragments)"] = (
                lambda m=model: _openai_tool_stream(clients.openai, m)  # type: ignore[misc]
            )
        times = interleave(bench, settings.runs)
        for name, t in times.items():
            us = median(t) / fragments * 1e6
            if name == "ollm_lite":
                per_fragment[count] = us
            report.add(
                f"tool call in {fragments} fragments: {name}",
                us,
                "µs/fragment",
                f"{median(t) * 1e3:.1f} ms for the whole call",
            )
    ratio = per_fragment[small * 10] / per_fragment[small]
    report.target(
        "tool-call assembly stays linear (cost/fragment at 10·F ÷ at F)",
        ratio,
        1.5,
        "x",
        f"{per_fragment[small]:.2f} → {per_fragment[small * 10]:.2f} µs/fragment",
    )


def _first_sse_requests(session: requests.Session, url: str, fresh: bool = False) -> float:
    t0 = time.perf_counter()
    resp = session.post(
        url + "/v1/chat/completions",
        json={"model": "text-event-8", "messages": _MESSAGES, "stream": True},
        stream=True,
    )
    first = 0.0
    buf = b""
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if not first and line[:6] == b"data: " and line != b"data: [DONE]":
                choices = json.loads(line[6:])["choices"]
                if choices and choices[0]["delta"].get("content"):
                    first = time.perf_counter() - t0
    resp.close()
    if fresh:
        session.close()  # drops the pooled connection: the next request connects again
    return first


def _first_ndjson_requests(session: requests.Session, url: str) -> float:
    t0 = time.perf_counter()
    resp = session.post(
        url + "/api/chat",
        json={"model": "text-event-8", "messages": _MESSAGES, "stream": True},
        stream=True,
    )
    first = 0.0
    buf = b""
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk
        lines = buf.split(b"\n")
        buf = lines.pop()
        for line in lines:
            if not first and line and json.loads(line)["message"]["content"]:
                first = time.perf_counter() - t0
    resp.close()
    return first


def _first_ollm(provider: Any, cancel: bool = False) -> float:
    request = ProviderRequest(
        model="text-event-8",
        messages=[Message.user("hi")],
        cancel=threading.Event() if cancel else None,
    )
    t0 = time.perf_counter()
    first = 0.0
    for event in provider.chat_stream(request):
        if not first and type(event) is TextEvent:
            first = time.perf_counter() - t0
    return first


def _first_openai(client: Any) -> float:
    t0 = time.perf_counter()
    first = 0.0
    for chunk in client.chat.completions.create(
        model="text-event-8", messages=_MESSAGES, stream=True
    ):
        if not first and chunk.choices and chunk.choices[0].delta.content:
            first = time.perf_counter() - t0
    return first


def _first_ollama(client: Any) -> float:
    t0 = time.perf_counter()
    first = 0.0
    for chunk in client.chat(model="text-event-8", messages=_MESSAGES, stream=True):
        if not first and chunk.message.content:
            first = time.perf_counter() - t0
    return first


def first_event(report: Report, clients: Clients, settings: Settings) -> None:
    """Time from the call to the first text event on a warm connection (median)."""
    url, session = clients.url, clients.session
    fresh_session = requests.Session()
    probes: dict[str, Callable[[], float]] = {
        "SSE: plain requests": lambda: _first_sse_requests(session, url),
        "SSE: plain requests, new connection each time": lambda: _first_sse_requests(
            fresh_session, url, fresh=True
        ),
        "SSE: ollm_lite": lambda: _first_ollm(clients.sse),
        "SSE: ollm_lite with a cancel event": lambda: _first_ollm(clients.sse, cancel=True),
        "NDJSON: plain requests": lambda: _first_ndjson_requests(session, url),
        "NDJSON: ollm_lite": lambda: _first_ollm(clients.ndjson),
        "NDJSON: ollm_lite with a cancel event": lambda: _first_ollm(clients.ndjson, cancel=True),
    }
    if clients.openai is not None:
        probes["SSE: openai-python"] = lambda: _first_openai(clients.openai)
    if clients.ollama is not None:
        probes["NDJSON: ollama-python"] = lambda: _first_ollama(clients.ollama)
    samples: dict[str, list[float]] = {name: [] for name in probes}
    for round_no in range(settings.samples + 3):  # 3 warm-up rounds
        for name, probe in probes.items():
            value = probe()
            if not value:
                raise RuntimeError(f"{name}: no text event arrived")
            if round_no >= 3:
                samples[name].append(value)
    fresh_session.close()
    ms = {name: median(values) * 1e3 for name, values in samples.items()}
    for name, value in ms.items():
        report.add(f"time to first event, {name}", value, "ms", f"median of {settings.samples}")
    for fmt in ("SSE", "NDJSON"):
        base = ms[f"{fmt}: plain requests"]
        report.target(
            f"{fmt} time to first event: ollm_lite - plain requests",
            ms[f"{fmt}: ollm_lite"] - base,
            0.5,
            "ms",
            f"{ms[f'{fmt}: ollm_lite']:.3f} vs {base:.3f} ms",
        )


def run(settings: Settings, server: ServerProcess | None = None) -> Report:
    """Throughput, tool-call stream and time to first event."""
    report = Report(SECTION)
    own = server is None
    srv = server or ServerProcess()
    clients = Clients(srv.url)
    try:
        throughput(report, clients, settings)
        tool_calls(report, clients, settings)
        first_event(report, clients, settings)
    finally:
        clients.close()
        if own:
            srv.close()
    if clients.openai is None or clients.ollama is None:
        report.notes.append("peer clients missing: pip install -e '.[bench]'")
    return report
