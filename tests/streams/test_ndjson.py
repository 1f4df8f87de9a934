"""NDJSONDecoder / iter_ndjson: line ends, blank and garbage lines, a last line without newline."""

from __future__ import annotations

import itertools
import json
import logging
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from support.strategies import json_of

from ollm_lite.errors import BadResponse, OllmError
from ollm_lite.streams import NDJSONDecoder, iter_ndjson


def pieces(body: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted({c for c in cuts if 0 < c < len(body)}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def test_ollama_shaped_stream() -> None:
    body = (
        b'{"message":{"role":"assistant","content":"Hi"},"done":false}\n'
        b'{"message":{"role":"assistant","content":"!"},"done":false}\n'
        b'{"done":true,"done_reason":"stop","eval_count":2}\n'
    )
    objs = list(iter_ndjson([body]))
    assert [o.get("message", {}).get("content") for o in objs] == ["Hi", "!", None]
    assert objs[-1]["done_reason"] == "stop"


def test_crlf_and_blank_lines() -> None:
    body = b'{"a":1}\r\n\r\n\n  \n{"a":2}\r\n'
    assert list(iter_ndjson([body])) == [{"a": 1}, {"a": 2}]


def test_last_line_without_newline_is_parsed() -> None:
    assert list(iter_ndjson([b'{"a":1}\n{"a"', b":2}"])) == [{"a": 1}, {"a": 2}]


def test_half_line_at_eof_is_skipped_and_counted() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b'{"a":1}\n{"a":') == [{"a": 1}]
    assert decoder.pending
    assert decoder.flush() == []
    assert decoder.skipped == 1
    assert not decoder.pending


def test_garbage_and_non_objects_are_skipped_counted_and_logged_briefly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="ollm_lite.streams")
    decoder = NDJSONDecoder()
    body = b'not json\n[1,2]\n"str"\n{"ok":true}\n' + b"{bad\n" * 10
    assert decoder.feed(body) == [{"ok": True}]
    assert decoder.skipped == 13
    logged = [r for r in caplog.records if r.name == "ollm_lite.streams"]
    assert 0 < len(logged) <= 3  # not one record per bad line
    assert all("bad" not in r.getMessage() for r in logged)  # lengths, not content


def test_deeply_nested_line_is_skipped_not_a_recursion_error() -> None:
    decoder = NDJSONDecoder()
    assert decoder.feed(b"[" * 100_000 + b"\n" + b'{"a":1}\n') == [{"a": 1}]
    assert decoder.skipped == 1


def test_invalid_utf8_inside_a_string_is_replaced() -> None:
    [obj] = list(iter_ndjson([b'{"t":"a\xffb"}\n']))
    assert obj == {"t": "a\ufffdb"}


def test_utf8_split_and_line_separators() -> None:
    line = json.dumps({"t": "é\u2028世🎉"}, ensure_ascii=False).encode() + b"\n"
    for i in range(1, len(line)):
        assert list(iter_ndjson([line[:i], line[i:]])) == [{"t": "é\u2028世🎉"}]


def test_over_long_line_raises_bounded() -> None:
    decoder = NDJSONDecoder(max_line=1000)
    with pytest.raises(BadResponse) as info:
        for _ in range(100):
            decoder.feed(b"x" * 100)
    assert info.value.code == "LLM_BAD_RESPONSE"
    assert sum(len(p) for p in decoder._pieces) == 0


def test_over_long_line_in_one_big_chunk_after_good_lines() -> None:
    decoder = NDJSONDecoder(max_line=100)
    assert decoder.feed(b'{"a":1}\n' + b"y" * 500 + b"\n") == [{"a": 1}]
    with pytest.raises(BadResponse):
        decoder.flush()


# --------------------------------------------------------------------------- properties

_JSON_SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.text(max_size=20)
)
_OBJECTS = st.dictionaries(
    st.text(max_size=8),
    json_of(_JSON_SCALARS, keys=st.text(max_size=4), max_leaves=6, dict_size=None),
    max_size=5,
)


@given(
    st.lists(_OBJECTS, max_size=15),
    st.lists(st.sampled_from([b"\n", b"\r\n"]), min_size=15, max_size=15),
    st.lists(st.integers(min_value=1, max_value=3000), max_size=12),
    st.booleans(),
    st.booleans(),
)
@settings(max_examples=300)
def test_property_round_trip_any_chunking(
    objs: list[dict[str, Any]],
    endings: list[bytes],
    cuts: list[int],
    ascii_only: bool,
    final_newline: bool,
) -> None:
    """Objects written as NDJSON come back equal however the bytes are cut."""
    lines = [json.dumps(o, ensure_ascii=ascii_only).encode() for o in objs]
    body = b"".join(line + end for line, end in zip(lines, endings, strict=False))
    if not final_newline and body:
        body = body.rstrip(b"\r\n")
    assert list(iter_ndjson(pieces(body, cuts))) == objs


@given(st.binary(max_size=500), st.lists(st.integers(min_value=1, max_value=500), max_size=8))
@settings(max_examples=300)
def test_property_arbitrary_bytes_end_only_in_the_librarys_error(
    body: bytes, cuts: list[int]
) -> None:
    """Any bytes give dicts, or BadResponse; the same ones for any chunking."""
    try:
        whole = list(iter_ndjson([body], max_line=64))
    except OllmError as exc:
        assert isinstance(exc, BadResponse)
        return
    assert all(type(o) is dict for o in whole)
    assert list(iter_ndjson(pieces(body, cuts), max_line=64)) == whole


_LINES = st.one_of(
    _OBJECTS.map(lambda o: json.dumps(o, ensure_ascii=False).encode()),
    _OBJECTS.map(lambda o: json.dumps(o).encode() + b"\r"),
    _OBJECTS.map(lambda o: json.dumps(o).encode() + b" x"),
    st.binary(max_size=12).map(lambda b: b"{" + b),
    st.binary(max_size=12),
    st.sampled_from([b"", b" ", b"\r", b"[1]", b"{\x00}", b'"\xef\xbb\xbf{}"']),
)


@given(st.lists(_LINES, max_size=30), st.lists(st.integers(1, 3000), max_size=3))
@settings(max_examples=300)
def test_property_many_lines_in_one_chunk_match_one_line_per_chunk(
    lines: list[bytes], cuts: list[int]
) -> None:
    """A server that outruns the reader packs many lines into one chunk (invalid UTF-8, NUL,
    CR, non-objects among them): the same objects, the same skip count, as line by line."""
    lines = [line.replace(b"\n", b"") for line in lines]
    one_by_one = NDJSONDecoder()
    expected = [obj for line in lines for obj in one_by_one.feed(line + b"\n")]
    packed = NDJSONDecoder()
    body = b"".join(line + b"\n" for line in lines)
    got = [obj for chunk in pieces(body, cuts) for obj in packed.feed(chunk)]
    assert got == expected
    assert packed.skipped == one_by_one.skipped


@given(st.lists(_LINES, max_size=30))
@settings(max_examples=300)
def test_property_one_line_per_chunk_matches_the_general_path(lines: list[bytes]) -> None:
    """A chunk that is one whole line (the usual stream, a shortcut to the JSON scanner) gives
    what the same line gives when it arrives in two chunks (the general path): same objects,
    same skip count."""
    lines = [line.replace(b"\n", b"") for line in lines]
    whole = NDJSONDecoder()
    expected = [obj for line in lines for obj in whole.feed(line + b"\n")]
    split = NDJSONDecoder()
    got: list[dict[str, Any]] = []
    for line in lines:
        got += split.feed(line[:1])
        got += split.feed(line[1:] + b"\n")
    assert got == expected
    assert split.skipped == whole.skipped
