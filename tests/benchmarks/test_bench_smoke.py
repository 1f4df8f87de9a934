"""Smoke test for ``benchmarks/``: every benchmark code path runs with tiny sizes.

No timing is asserted (the figures of a tiny run mean nothing); what is checked is that each
section runs to the end against the loopback server, that every contender received the whole
stream (the benchmarks verify their own counts and raise otherwise), and that the figures and
the output formats are well formed. Also here: properties for the decoder fast paths that the
benchmark work added to ``ollm_lite.streams`` (same results as the general path).
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from support.strategies import json_of

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import (  # noqa: E402
    ab_streams,
    bench_batch,
    bench_call_log,
    bench_cancel,
    bench_chat,
    bench_gate,
    bench_import,
    bench_memory,
    bench_parsers,
    bench_streams,
    run_all,
)
from benchmarks._common import Report, Settings, percentile  # noqa: E402
from benchmarks._server import ServerProcess, ollama_lines, openai_events  # noqa: E402
from ollm_lite.streams import NDJSONDecoder, SSEDecoder  # noqa: E402

TINY = Settings.tiny()


@pytest.fixture(scope="module")
def server() -> Iterator[ServerProcess]:
    with ServerProcess() as srv:
        yield srv


def _check(report: Report, section: str) -> None:
    assert report.section == section
    assert report.results, "a section must report figures"
    for result in report.results:
        assert result.section == section
        assert isinstance(result.value, float | int) and math.isfinite(result.value), result
        assert result.value >= 0, result
        assert result.unit
    for target in report.targets:
        assert math.isfinite(target.measured), target
        assert isinstance(target.met, bool)
    json.dumps(report.to_dict())  # JSON-ready


def test_streams_section_runs_every_contender(server: ServerProcess) -> None:
    """Throughput (both formats, both modes), tool-call stream and first-event probes run."""
    report = bench_streams.run(TINY, server)
    _check(report, "streams")
    names = {r.name for r in report.results}
    for label in ("SSE per-event", "SSE bulk", "NDJSON per-event", "NDJSON bulk"):
        assert f"{label}: ollm_lite" in names
        assert f"{label}: naive floor" in names
        assert f"{label}: naive str.split" in names
        assert f"{label}: ollm_lite, client CPU" in names
    assert any(n.startswith("tool call in") for n in names)
    assert "time to first event, SSE: ollm_lite" in names
    assert {t.name for t in report.targets} >= {
        "SSE per-event: ollm_lite / fastest naive loop (client CPU)",
        "SSE bulk: ollm_lite / fastest naive loop (client CPU)",
        "NDJSON per-event: ollm_lite / fastest naive loop (client CPU)",
        "NDJSON bulk: ollm_lite / fastest naive loop (client CPU)",
        "SSE time to first event: ollm_lite - plain requests",
    }


def test_chat_section_runs() -> None:
    """8 parallel tools, ReAct parsing and the per-turn overhead run to completion."""
    report = bench_chat.run(TINY)
    _check(report, "chat")
    assert any("8 tools" in r.name for r in report.results)
    assert any(r.name.startswith("ReAct parse") for r in report.results)


def test_cancel_section_runs(server: ServerProcess) -> None:
    """Every cancellation case ends with a cancelled finish (checked inside the benchmark)."""
    report = bench_cancel.run(TINY, server)
    _check(report, "cancel")
    assert len(report.targets) == 4


def test_memory_section_runs(server: ServerProcess) -> None:
    """Each memory case runs in its own interpreter and receives the whole answer."""
    report = bench_memory.run(TINY, server)
    _check(report, "memory")
    assert any(r.name.startswith("ollm_lite SSE, collect") for r in report.results)


def test_import_section_runs() -> None:
    """Import times come from fresh interpreters: requests, ollm_lite, and what a script pays."""
    only = (*TINY.import_only, bench_import.SCRIPT, bench_import.PROCESS)
    report = bench_import.run(dataclasses.replace(TINY, import_only=only))
    _check(report, "import")
    names = {r.name for r in report.results}
    assert {"import requests", "import ollm_lite", f"import {bench_import.SCRIPT}"} <= names
    assert f"{bench_import.PROCESS} / import requests, whole process (CPU)" in names


def test_parsers_section_runs() -> None:
    """The in-memory parser micro-benchmark runs."""
    _check(bench_parsers.run(TINY), "parsers")


def test_batch_section_runs() -> None:
    """The batch section runs both contenders against slot servers and reports its limit."""
    report = bench_batch.run(TINY)
    _check(report, "batch")
    names = [r.name for r in report.results]
    assert any(n.startswith("ollm_lite batch, 2 endpoint(s)") for n in names)
    assert "CPU per batch line (fleet, concurrency 1)" in names


def test_call_log_section_runs() -> None:
    """The call log section measures logging per call, batches, a cache hit and row size."""
    report = bench_call_log.run(TINY)
    _check(report, "call_log")
    names = [t.name for t in report.targets]
    assert "logging cost per one-turn ask (median)" in names
    assert "cache hit vs a 50 ms loopback server" in names
    assert any(r.unit == "bytes/row" for r in report.results)


def test_gate_section_runs() -> None:
    """The gate section measures its cost per call and the busiest window of a batch."""
    report = bench_gate.run(TINY)
    _check(report, "gate")
    assert "gate cost per one-turn ask beyond the log (median)" in [t.name for t in report.targets]
    assert bench_gate.busiest_window([0.0, 1.0, 59.9, 60.0, 61.0]) == 3


def test_run_all_json_and_tables(capsys: pytest.CaptureFixture[str]) -> None:
    """The one command prints JSON with every requested section; tables render."""
    status = run_all.main(["--smoke", "--only", "chat,parsers", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert [s["section"] for s in out["sections"]] == ["chat", "parsers"]
    assert status in (0, 1)
    assert "python" in out["machine"]
    reports = run_all.run_sections(["chat"], TINY)
    assert "== chat" in run_all.format_table(reports, {"python": "x"})
    assert "### chat" in run_all.format_markdown(reports, {"python": "x"})


def test_run_all_rejects_unknown_sections() -> None:
    """A misspelt section is a usage error, not a silent no-op."""
    with pytest.raises(SystemExit) as info:
        run_all.main(["--only", "streamz"])
    assert info.value.code == 2


@pytest.mark.parametrize("fmt", ["sse", "ndjson"])
def test_ab_streams_runs_both_contenders(fmt: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The A/B tool streams the whole workload with both contenders (they check their own
    counts) and reports finite figures, the quartiles in order."""
    figures = ab_streams.run(fmt, rounds=3, chunks=50)
    assert all(math.isfinite(v) and v > 0 for v in figures.values()), figures
    assert figures["ratio_q1"] <= figures["ratio_median"] <= figures["ratio_q3"]
    assert ab_streams.main([fmt, "--rounds", "1", "--chunks", "20"]) == 0
    assert f"{fmt} per-event, 1 rounds of 20 events" in capsys.readouterr().out


def test_quartiles_by_nearest_rank() -> None:
    assert ab_streams.quartiles([4.0, 1.0, 3.0, 2.0]) == (2.0, 3.0, 4.0)
    assert ab_streams.quartiles([5.0]) == (5.0, 5.0, 5.0)


def test_percentile_nearest_rank() -> None:
    """p99 of 100 samples is the 99th smallest; p50 of 1..4 is 2."""
    assert percentile(list(range(1, 101)), 99) == 99
    assert percentile([4, 1, 3, 2], 50) == 2
    assert math.isnan(percentile([], 99))


def test_server_workloads_are_well_formed() -> None:
    """The canned bodies parse: n text chunks, a tool call in fragments, [DONE] last."""
    dec = SSEDecoder()
    events = [e for chunk in openai_events("text", 5) for e in dec.feed(chunk)]
    assert events[-1].data == "[DONE]"
    texts = [json.loads(e.data)["choices"] for e in events[:-1]]
    assert sum(1 for c in texts if c and c[0]["delta"].get("content")) == 5
    nd = NDJSONDecoder()
    lines = [o for chunk in ollama_lines("text", 5) for o in nd.feed(chunk)]
    assert len(lines) == 6 and lines[-1]["done"] is True


# --------------------------------------------------------------------------- fast paths

_json_values = json_of(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    keys=st.text(),
)
_objects = st.dictionaries(st.text(), _json_values, max_size=4)


def _reference(line: bytes) -> object:
    """What the decoder returned for one line before the fast path: json.loads, else skip."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        try:
            obj = json.loads(line.decode("utf-8", "replace").removeprefix("\ufeff"))
        except (ValueError, RecursionError):
            return None
    return obj if type(obj) is dict else None


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            _objects.map(lambda o: json.dumps(o).encode()),
            _objects.map(lambda o: json.dumps(o, ensure_ascii=False).encode() + b"\r"),
            _objects.map(lambda o: json.dumps(o).encode() + b" trailing"),
            st.binary(max_size=20).map(lambda b: b"{" + b),
            st.binary(max_size=20),
        ),
        max_size=8,
    )
)
def test_ndjson_fast_path_matches_json_loads(lines: list[bytes]) -> None:
    """Every line gives what json.loads gives (objects kept, everything else skipped)."""
    lines = [line.replace(b"\n", b" ") for line in lines]
    expected = [obj for obj in map(_reference, lines) if obj is not None]
    dec = NDJSONDecoder()
    got = [obj for line in lines for obj in dec.feed(line + b"\n")]
    assert got == expected


_fields = st.sampled_from(
    [b"event: delta\n", b"id: 7\n", b"retry: 250\n", b": ping\n", b"data: partial\n", b"\n"]
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.text(max_size=12)
            .filter(lambda t: "\n" not in t and "\r" not in t)
            .map(lambda t: b"data: " + t.encode() + b"\n\n"),
            _fields,
        ),
        max_size=10,
    )
)
def test_sse_one_event_per_chunk_matches_whole_body(chunks: list[bytes]) -> None:
    """Feeding events one chunk each (fast path) equals feeding the whole body at once."""
    prefix = b"data: start\n\n"  # the first chunk settles the BOM question
    per_chunk = SSEDecoder()
    got = [e for c in [prefix, *chunks] for e in per_chunk.feed(c)]
    whole = SSEDecoder()
    expected = whole.feed(prefix + b"".join(chunks))
    assert got == expected
