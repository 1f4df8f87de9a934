"""Properties of the batch files: round trips, resume after a crash at any byte, exactly once."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings, strategies as st
from support.batch_support import EchoBackend, client_for, read_output, write_lines
from support.strategies import json_of

from ollm_lite.batch import BatchFileError, make_input, run_batch
from ollm_lite.batch._format import (
    encode_line,
    error_line,
    parse_input,
    parse_output_line,
    success_line,
)
from ollm_lite.batch._output import scan_output
from ollm_lite.errors import ConnectionFailed, HTTPStatusError

ids = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12)
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
json_values = json_of(st.none() | st.booleans() | st.integers() | texts, keys=texts)


@given(st.lists(st.tuples(ids, texts), unique_by=lambda x: x[0], min_size=1, max_size=8))
def test_input_lines_round_trip(pairs: list[tuple[str, str]]) -> None:
    """Any set of unique ids and prompts, written as JSONL, reads back the same, in order."""
    lines = [
        json.dumps(
            {
                "custom_id": cid,
                "method": "POST",
                "url": "/v1/chat/completions",
                "body": {"messages": [{"role": "user", "content": text}]},
            },
            ensure_ascii=False,
        )
        for cid, text in pairs
    ]
    items = parse_input("\n".join(lines).encode("utf-8"))
    assert [(i.custom_id, i.body["messages"][0]["content"]) for i in items] == pairs


@given(ids, json_values)
def test_output_lines_round_trip(custom_id: str, body: object) -> None:
    """Every record we write is one line that parses back to itself."""
    for record in (
        success_line(custom_id, {"x": body}),
        error_line(custom_id, HTTPStatusError("no", status=503, details={"status": 503})),
        error_line(custom_id, ConnectionFailed("down")),
    ):
        raw = encode_line(record)
        assert raw.endswith(b"\n") and raw.count(b"\n") == 1
        assert parse_output_line(raw[:-1]) == record


@given(st.binary(max_size=300))
def test_any_bytes_either_parse_or_raise_the_batch_error(data: bytes) -> None:
    """The input reader never raises anything but BatchFileError."""
    try:
        parse_input(data)
    except BatchFileError as exc:
        assert exc.details["problems"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=3, max_value=8), st.data())
def test_resume_after_truncation_at_any_byte_is_exactly_once(n: int, data: st.DataObject) -> None:
    """A crash can leave the output cut at any byte; the next run yields exactly one valid
    line per input line, and resends only what was lost."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        prompts = [f"p{i}" + ("" if i % 3 else " fail") for i in range(n)]
        lines = [
            {
                "custom_id": f"c{i}",
                "url": "/v1/chat/completions",
                "body": {"model": "m", "messages": [{"role": "user", "content": p}]},
            }
            for i, p in enumerate(prompts)
        ]
        inp = write_lines(root / "in.jsonl", lines)
        out = root / "out.jsonl"
        run_batch(inp, out, client=client_for(EchoBackend()))
        full = out.read_bytes()
        cut = data.draw(st.integers(min_value=0, max_value=len(full)), label="cut")
        out.write_bytes(full[:cut])
        whole = full[:cut].count(b"\n")
        complete_tail = cut < len(full) and full[cut - 1 : cut + 1] == b"}\n" if cut else False
        again = EchoBackend()
        summary = run_batch(inp, out, client=client_for(again))
        result = read_output(out)
        assert sorted(x["custom_id"] for x in result) == sorted(f"c{i}" for i in range(n))
        kept = whole + (1 if complete_tail else 0)
        assert summary.skipped == kept
        assert len(again.prompts) == n - kept
        assert out.read_bytes().startswith(full[: full[:cut].rfind(b"\n") + 1])


@given(st.binary(min_size=1, max_size=40).filter(lambda b: b"\n" not in b))
def test_garbage_after_the_last_good_line_is_cut(tail: bytes) -> None:
    """Zero-filled or partial trailing bytes (an OS crash, a killed write) are a torn tail."""
    good = encode_line(success_line("a", {}))
    resume = scan_output(good + tail, "out", {"a", "b"})
    assert resume.keep_bytes in (len(good), len(good) + len(tail))
    if resume.keep_bytes == len(good):
        assert [e.custom_id for e in resume.entries] == ["a"]


def test_a_record_that_only_lost_its_newline_is_kept() -> None:
    line = encode_line(success_line("a", {"k": 1}))
    resume = scan_output(line[:-1], "out", {"a"})
    assert resume.add_newline and resume.keep_bytes == len(line) - 1
    assert [e.custom_id for e in resume.entries] == ["a"]


_CELL = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"))


@given(rows=st.lists(st.tuples(_CELL, _CELL), max_size=8))
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_make_input_id_column_keeps_every_id_or_refuses_the_row(
    rows: list[tuple[str, str]],
) -> None:
    """``id_column``: each prompt's line carries its row's id exactly; a row with an empty or
    repeated id is refused naming that row (the header is row 1) and nothing is written."""
    import csv

    with tempfile.TemporaryDirectory() as folder:
        table = Path(folder) / "t.csv"
        with open(table, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(["id", "prompt"])
            writer.writerows(rows)
        out = Path(folder) / "in.jsonl"
        wanted = [(i.strip(), p) for i, p in rows if p.strip()]
        bad_row = None
        seen: set[str] = set()
        for number, (custom_id, prompt) in enumerate(rows, start=2):
            if not prompt.strip():
                continue
            if not custom_id.strip() or custom_id.strip() in seen:
                bad_row = number
                break
            seen.add(custom_id.strip())
        try:
            count = make_input(str(table), str(out), id_column="id")
        except BatchFileError as exc:
            assert bad_row is not None or not wanted, exc.message
            if bad_row is not None:
                assert exc.details["row"] == bad_row
            assert not out.exists()
            return
        assert bad_row is None and count == len(wanted)
        lines = [json.loads(x) for x in out.read_bytes().splitlines()]  # b"\n" only
        got = [(x["custom_id"], x["body"]["messages"][-1]["content"]) for x in lines]
        assert got == wanted
