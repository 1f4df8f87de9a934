"""Properties of the MCP JSON-RPC framing (sans-IO): round trips, any chunking, bad input.

MCP specification, Basic > Transports > stdio: one JSON-RPC message per line, no embedded
newline. Whatever bytes arrive, parsing ends in a message or ``BadResponse`` (code
``LLM_BAD_RESPONSE``), and a line over the limit is reported, never cut short.
"""

from __future__ import annotations

import contextlib
import json

from hypothesis import given, strategies as st
from support.strategies import json_values

from ollm_lite.errors import BadResponse
from ollm_lite.mcp.jsonrpc import (
    ErrorResponse,
    LineSplitter,
    Notification,
    Oversized,
    Request,
    Response,
    encode_message,
    parse_message,
)

ids = st.one_of(st.integers(min_value=-(2**53), max_value=2**53), st.text(max_size=20))
methods = st.text(min_size=1, max_size=30)
params = st.none() | st.dictionaries(st.text(max_size=10), json_values, max_size=4)
messages = st.one_of(
    st.builds(Request, ids, methods, params),
    st.builds(Notification, methods, params),
    st.builds(Response, ids, json_values),
    st.builds(
        ErrorResponse,
        ids,
        st.integers(min_value=-32768, max_value=32767),
        st.text(max_size=40),
        st.none() | json_values,
    ),
)


def _cuts(data: bytes, points: list[int]) -> list[bytes]:
    points = sorted({p % (len(data) + 1) for p in points})
    out, start = [], 0
    for p in points:
        out.append(data[start:p])
        start = p
    out.append(data[start:])
    return out


@given(messages)
def test_encode_then_parse_gives_the_message_back(message: object) -> None:
    line = encode_message(message)  # type: ignore[arg-type]
    assert line.endswith(b"\n") and line.count(b"\n") == 1  # no embedded newline, ever
    assert parse_message(line[:-1]) == message


@given(st.lists(messages, max_size=8), st.lists(st.integers(min_value=0), max_size=12))
def test_any_chunking_gives_the_same_lines(batch: list[object], points: list[int]) -> None:
    stream = b"".join(encode_message(m) for m in batch)  # type: ignore[arg-type]
    splitter = LineSplitter()
    lines: list[bytes | Oversized] = []
    for chunk in _cuts(stream, points):
        lines.extend(splitter.feed(chunk))
    lines.extend(splitter.flush())
    assert [parse_message(line) for line in lines if isinstance(line, bytes)] == batch


@given(st.binary(max_size=300))
def test_parse_never_raises_anything_but_bad_response(raw: bytes) -> None:
    try:
        parse_message(raw)
    except BadResponse as exc:
        assert exc.code == "LLM_BAD_RESPONSE"


@given(json_values)
def test_any_json_value_parses_or_is_bad_response(value: object) -> None:
    with contextlib.suppress(BadResponse):
        parse_message(json.dumps(value))


@given(st.integers(min_value=1, max_value=2**31), st.sampled_from(["py", "ts"]))
def test_an_oversized_answer_names_its_request(rid: int, style: str) -> None:
    body = '"' + "x" * 5000 + '"'
    if style == "py":
        line = f'{{"jsonrpc":"2.0","id":{rid},"result":{{"t":{body}}}}}\n'
    else:
        line = f'{{"result":{{"t":{body},"id":999}},"jsonrpc":"2.0","id":{rid}}}\n'
    splitter = LineSplitter(limit=1000)
    out = splitter.feed(line.encode() + b'{"jsonrpc":"2.0","method":"after"}\n')
    assert out[0] == Oversized(len(line) - 1, rid)
    assert out[1] == b'{"jsonrpc":"2.0","method":"after"}'


@given(st.binary(max_size=3000), st.integers(min_value=1, max_value=500))
def test_lines_never_exceed_the_limit(data: bytes, limit: int) -> None:
    splitter = LineSplitter(limit=limit)
    for item in [*splitter.feed(data), *splitter.flush()]:
        if isinstance(item, bytes):
            assert len(item) <= limit and b"\n" not in item
        else:
            assert item.size > limit


def test_crlf_and_blank_lines() -> None:
    splitter = LineSplitter()
    out = splitter.feed(b'{"jsonrpc":"2.0","method":"a"}\r\n\n\r\n{"jsonrpc":"2.0","method":"b"}')
    assert out == [b'{"jsonrpc":"2.0","method":"a"}']
    assert splitter.flush() == [b'{"jsonrpc":"2.0","method":"b"}']


def test_u2028_inside_a_string_is_not_a_line_break() -> None:
    message = Notification("m", {"text": "a\u2028b\u2029c\x85d"})
    splitter = LineSplitter()
    (line,) = splitter.feed(encode_message(message))
    assert isinstance(line, bytes) and parse_message(line) == message


def test_invalid_shapes_are_bad_responses() -> None:
    for raw in (
        b"[]",
        b'[{"jsonrpc":"2.0","method":"m"}]',
        b'{"jsonrpc":"1.0","method":"m"}',
        b'{"jsonrpc":"2.0","method":5}',
        b'{"jsonrpc":"2.0","method":"m","params":[1]}',
        b'{"jsonrpc":"2.0","id":1.5,"result":{}}',
        b'{"jsonrpc":"2.0","id":true,"result":{}}',
        b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}',
        b'{"jsonrpc":"2.0","id":1}',
        b"\xff\xfe",
    ):
        try:
            parse_message(raw)
        except BadResponse:
            continue
        raise AssertionError(f"accepted {raw!r}")
