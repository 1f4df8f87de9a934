"""Micro-benchmark: ollm_lite.streams against naive and requests-style line parsing.

Not a test. Part of ``python -m benchmarks`` (section ``parsers``); also runs alone with
``python benchmarks/bench_parsers.py``. No network: the chunks are in memory. Every
contender does the same work: split the body into lines and ``json.loads`` each payload, so the
SSE rows include parsing ``event.data``.

Workloads (one event per network chunk, the common case for a local server):

* 20 000 OpenAI-shaped SSE chunks ``data: {...}\\n\\n`` (LF, then the same with CRLF as Gemini);
* 20 000 Ollama-shaped NDJSON chunks ``{...}\\n``;
* a 20 MB line in 64 KiB chunks (checks that nothing is quadratic).
"""

from __future__ import annotations

import functools
import json
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import requests

from ollm_lite.errors import BadResponse
from ollm_lite.streams import NDJSONDecoder, SSEDecoder, iter_ndjson, iter_sse

if __package__:
    from ._common import Report, Settings, interleave, median
    from ._server import ServerProcess

N = 20_000
REPEAT = 7


def openai_chunks(n: int = N, eol: bytes = b"\n") -> list[bytes]:
    """``n`` chat.completion.chunk events, one per network chunk, then ``[DONE]``."""
    out = []
    for i in range(n):
        obj = {
            "id": "chatcmpl-9f3c1a2b7e",
            "object": "chat.completion.chunk",
            "created": 1718000000,
            "model": "qwen2.5-7b-instruct",
            "system_fingerprint": "fp_local",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f" token{i % 97}"},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        out.append(b"data: " + json.dumps(obj).encode() + eol + eol)
    out.append(b"data: [DONE]" + eol + eol)
    return out


def ollama_chunks(n: int = N) -> list[bytes]:
    """``n`` /api/chat stream lines, one per network chunk."""
    out = []
    for i in range(n):
        obj = {
            "model": "llama3.2",
            "created_at": "2025-01-01T12:00:00.123456789Z",
            "message": {"role": "assistant", "content": f" word{i % 89}"},
            "done": False,
        }
        out.append(json.dumps(obj).encode() + b"\n")
    return out


# --------------------------------------------------------------------------- contenders


def ours_sse(chunks: Iterable[bytes]) -> int:
    n = 0
    for ev in iter_sse(chunks):
        if ev.data != "[DONE]":
            json.loads(ev.data)
            n += 1
    return n


def ours_sse_decoder(chunks: Iterable[bytes]) -> int:
    """The decoder alone, driven as the transport drives it (feed per chunk)."""
    dec = SSEDecoder()
    n = 0
    for chunk in chunks:
        n += len(dec.feed(chunk))
    dec.flush()
    return n


def ours_ndjson(chunks: Iterable[bytes]) -> int:
    n = 0
    for _ in iter_ndjson(chunks):
        n += 1
    return n


def ours_ndjson_decoder(chunks: Iterable[bytes]) -> int:
    dec = NDJSONDecoder()
    n = 0
    for chunk in chunks:
        n += len(dec.feed(chunk))
    dec.flush()
    return n


def naive_sse(chunks: list[bytes]) -> int:
    """Whole body in memory, split on LF (wrong for CR, fine for this input)."""
    body = b"".join(chunks)
    return len(
        [
            json.loads(line[6:])
            for line in body.split(b"\n")
            if line.startswith(b"data: ") and line != b"data: [DONE]"
        ]
    )


def naive_ndjson(chunks: list[bytes]) -> int:
    body = b"".join(chunks)
    return len([json.loads(line) for line in body.split(b"\n") if line])


def _requests_lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    resp = requests.Response()
    resp.iter_content = lambda chunk_size=1, decode_unicode=False: iter(chunks)  # type: ignore[method-assign]
    yield from resp.iter_lines()


def requests_sse(chunks: Iterable[bytes]) -> int:
    """requests' ``iter_lines`` (splitlines: also splits on U+2028 in decoded text) + loads."""
    n = 0
    for line in _requests_lines(chunks):
        if line.startswith(b"data: ") and line != b"data: [DONE]":
            json.loads(line[6:])
            n += 1
    return n


def requests_ndjson(chunks: Iterable[bytes]) -> int:
    n = 0
    for line in _requests_lines(chunks):
        if line:
            json.loads(line)
            n += 1
    return n


# --------------------------------------------------------------------------- harness


def best_of(fn: Callable[[list[bytes]], Any], chunks: list[bytes]) -> tuple[float, Any]:
    best = float("inf")
    result = None
    for _ in range(REPEAT):
        t0 = time.perf_counter()
        result = fn(chunks)
        best = min(best, time.perf_counter() - t0)
    return best, result


def report(title: str, chunks: list[bytes], contenders: dict[str, Callable[..., Any]]) -> None:
    print(f"\n{title}: {len(chunks)} chunks, {sum(map(len, chunks)) / len(chunks):.0f} B/chunk")
    for name, fn in contenders.items():
        secs, result = best_of(fn, chunks)
        print(f"  {name:<34} {secs / len(chunks) * 1e6:7.3f} µs/chunk   ({result} items)")


def long_line() -> None:
    """A 20 MB line in 64 KiB chunks: pending pieces, no rescans; a 16 MiB limit trips."""
    piece = b"x" * 65536
    chunks = [piece] * (20 * 1024 * 1024 // len(piece))
    for name, make in (("SSE", SSEDecoder), ("NDJSON", NDJSONDecoder)):
        dec = make()
        t0 = time.perf_counter()
        fed = 0
        try:
            for chunk in chunks:
                dec.feed(chunk)
                fed += len(chunk)
        except BadResponse:
            pass
        secs = time.perf_counter() - t0
        print(
            f"  {name:<7} over-long line: BadResponse after {fed / 2**20:.1f} MiB "
            f"in {secs * 1e3:.1f} ms"
        )
    dec2 = NDJSONDecoder(max_line=32 * 1024 * 1024)
    t0 = time.perf_counter()
    for chunk in chunks:
        dec2.feed(chunk)
    dec2.feed(b"\n")
    print(
        f"  NDJSON  20 MiB line accepted (limit 32 MiB) in "
        f"{(time.perf_counter() - t0) * 1e3:.1f} ms (skipped={dec2.skipped})"
    )


def main() -> None:
    print(f"Python {sys.version.split()[0]}, best of {REPEAT}")
    sse = openai_chunks()
    report(
        "OpenAI SSE (LF)",
        sse,
        {
            "ollm_lite iter_sse + json.loads": ours_sse,
            "ollm_lite SSEDecoder.feed only": ours_sse_decoder,
            "requests iter_lines + json.loads": requests_sse,
            "naive join/split + json.loads": naive_sse,
        },
    )
    gemini_like = openai_chunks(eol=b"\r\n")
    report(
        "SSE with CRLF (Gemini-style)",
        gemini_like,
        {
            "ollm_lite iter_sse + json.loads": ours_sse,
            "ollm_lite SSEDecoder.feed only": ours_sse_decoder,
        },
    )
    nd = ollama_chunks()
    report(
        "Ollama NDJSON",
        nd,
        {
            "ollm_lite iter_ndjson (parses)": ours_ndjson,
            "ollm_lite NDJSONDecoder.feed": ours_ndjson_decoder,
            "requests iter_lines + json.loads": requests_ndjson,
            "naive join/split + json.loads": naive_ndjson,
        },
    )
    print("\nLong line")
    long_line()


def run(settings: Settings, server: ServerProcess | None = None) -> Report:
    """The decoders alone (no HTTP), interleaved, median µs per chunk."""
    report = Report("parsers")
    n = settings.chunks
    workloads: dict[str, tuple[list[bytes], dict[str, Callable[[list[bytes]], int]]]] = {
        "OpenAI SSE (LF)": (
            openai_chunks(n),
            {
                "ollm_lite iter_sse + json.loads": ours_sse,
                "ollm_lite SSEDecoder.feed only": ours_sse_decoder,
                "requests iter_lines + json.loads": requests_sse,
                "naive join/split + json.loads": naive_sse,
            },
        ),
        "SSE with CRLF": (
            openai_chunks(n, eol=b"\r\n"),
            {
                "ollm_lite iter_sse + json.loads": ours_sse,
            },
        ),
        "Ollama NDJSON": (
            ollama_chunks(n),
            {
                "ollm_lite iter_ndjson (parses)": ours_ndjson,
                "requests iter_lines + json.loads": requests_ndjson,
                "naive join/split + json.loads": naive_ndjson,
            },
        ),
    }
    for title, (chunks, contenders) in workloads.items():
        bench = {name: functools.partial(fn, chunks) for name, fn in contenders.items()}
        times = interleave(bench, settings.runs)
        for name, values in times.items():
            report.add(
                f"{title}: {name}",
                median(values) / len(chunks) * 1e6,
                "µs/chunk",
                "in memory, no HTTP",
            )
    return report


if __name__ == "__main__":
    main()
