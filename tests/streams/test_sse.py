"""SSEDecoder / iter_sse: WHATWG event-stream rules, chunk boundaries anywhere, bounded memory."""

from __future__ import annotations

import itertools
import json

import pytest
from hypothesis import given, settings, strategies as st

from ollm_lite.errors import BadResponse, OllmError
from ollm_lite.streams import SSEDataDecoder, SSEDecoder, SSEEvent, iter_sse


def parse(body: bytes, cuts: list[int] | None = None, **kw: int) -> list[SSEEvent]:
    """Events of ``body`` fed in pieces cut at ``cuts`` (sorted offsets)."""
    return list(iter_sse(split_at(body, cuts or []), **kw))


def split_at(body: bytes, cuts: list[int]) -> list[bytes]:
    edges = [0, *sorted({c for c in cuts if 0 < c < len(body)}), len(body)]
    return [body[a:b] for a, b in itertools.pairwise(edges)]


def every_split(body: bytes) -> list[list[bytes]]:
    """The body cut into one chunk, into single bytes, and at every single position."""
    splits = [[body], [body[i : i + 1] for i in range(len(body))]]
    splits += [[body[:i], body[i:]] for i in range(1, len(body))]
    return splits


def reference(body: bytes) -> list[tuple[str, str, str | None, int | None]]:
    """A slow, literal reading of the WHATWG algorithm, for comparison."""
    text = body.decode("utf-8", "replace")
    text = text.removeprefix("\ufeff")
    lines: list[str] = []
    cur = ""
    i = 0
    complete_last = False
    while i < len(text):
        ch = text[i]
        if ch == "\r":
            lines.append(cur)
            cur = ""
            if i + 1 < len(text) and text[i + 1] == "\n":
                i += 1
            complete_last = True
        elif ch == "\n":
            lines.append(cur)
            cur = ""
            complete_last = True
        else:
            cur += ch
            complete_last = False
        i += 1
    del complete_last  # an unterminated last line is never processed
    events: list[tuple[str, str, str | None, int | None]] = []
    data: list[str] = []
    event_type = ""
    last_id: str | None = None
    retry: int | None = None
    for line in lines:
        if line == "":
            if data:
                events.append((event_type or "message", "\n".join(data), last_id, retry))
            data, event_type, retry = [], "", None
            continue
        if line.startswith(":"):
            continue
        name, colon, value = line.partition(":")
        if colon and value.startswith(" "):
            value = value[1:]
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id":
            if "\0" not in value:
                last_id = value
        elif name == "retry" and value.isascii() and value.isdigit():
            retry = int(value)
    return events


def as_tuples(events: list[SSEEvent]) -> list[tuple[str, str, str | None, int | None]]:
    return [(e.event, e.data, e.id, e.retry) for e in events]


# --------------------------------------------------------------------------- examples


def test_openai_shaped_stream() -> None:
    body = b'data: {"a": 1}\n\ndata: {"a": 2}\n\ndata: [DONE]\n\n'
    assert [e.data for e in parse(body)] == ['{"a": 1}', '{"a": 2}', "[DONE]"]
    assert all(e.event == "message" and e.id is None and e.retry is None for e in parse(body))


@pytest.mark.parametrize("end", [b"\n", b"\r\n", b"\r"])
def test_every_line_ending(end: bytes) -> None:
    body = b"event: delta" + end + b"data: x" + end + b"data: y" + end + end
    assert as_tuples(parse(body)) == [("delta", "x\ny", None, None)]


def test_crlf_split_across_chunks_is_one_line_end() -> None:
    body = b"data: a\r\n\r\ndata: b\r\n\r\n"
    for chunks in every_split(body):
        assert [e.data for e in iter_sse(chunks)] == ["a", "b"], chunks


def test_lone_cr_then_lf_in_next_chunk_after_data_is_not_a_blank_line() -> None:
    # "data: a\r" + "\n" is one line end; "\n" alone after that would be a blank line.
    assert [e.data for e in iter_sse([b"data: a\r", b"\ndata: b\r", b"\n\r\n"])] == ["a\nb"]


def test_utf8_character_split_across_chunks() -> None:
    body = 'data: {"t": "héllo → 世界 🎉"}\n\n'.encode()
    for chunks in every_split(body):
        [event] = list(iter_sse(chunks))
        assert json.loads(event.data) == {"t": "héllo → 世界 🎉"}


@pytest.mark.parametrize("sep", ["\u2028", "\u2029", "\x85", "\x0b", "\x0c"])
def test_unicode_line_separators_inside_json_do_not_split(sep: str) -> None:
    payload = json.dumps({"t": f"a{sep}b"}, ensure_ascii=False)
    [event] = parse(f"data: {payload}\n\n".encode())
    assert json.loads(event.data)["t"] == f"a{sep}b"


def test_leading_bom_dropped_even_when_split() -> None:
    body = b"\xef\xbb\xbfdata: x\n\n"
    for chunks in every_split(body):
        assert as_tuples(list(iter_sse(chunks))) == [("message", "x", None, None)]


def test_only_the_first_bom_is_dropped() -> None:
    # The second BOM is part of the field name "\ufeffdata": an unknown field, ignored.
    assert parse(b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n") == []
    [event] = parse(b"\xef\xbb\xbfdata: \xef\xbb\xbfx\n\n")
    assert event.data == "\ufeffx"


def test_comments_and_keepalives_ignored() -> None:
    body = b": ping\n\n:\ndata: x\n: inside\ndata: y\n\n: ping\n\n"
    assert [e.data for e in parse(body)] == ["x\ny"]


def test_only_one_leading_space_removed() -> None:
    assert [e.data for e in parse(b"data:  two\n\ndata:none\n\n")] == [" two", "none"]


def test_field_without_colon_and_empty_data() -> None:
    # "data" alone appends an empty line; two of them make "\n".
    assert [e.data for e in parse(b"data\ndata\n\n")] == ["\n"]
    assert [e.data for e in parse(b"data:\n\n")] == [""]


def test_block_without_data_dispatches_nothing() -> None:
    assert parse(b"event: ping\nid: 3\n\nretry: 10\n\n") == []


def test_event_type_resets_after_dispatch() -> None:
    body = b"event: error\ndata: {}\n\ndata: x\n\n"
    assert [e.event for e in parse(body)] == ["error", "message"]


def test_id_persists_and_nul_id_is_ignored() -> None:
    body = b"id: 7\ndata: a\n\ndata: b\n\nid: 8\x009\ndata: c\n\nid\ndata: d\n\n"
    assert [e.id for e in parse(body)] == ["7", "7", "7", ""]


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b"retry: 1500", 1500),
        (b"retry: 15x", None),
        (b"retry: -1", None),
        (b"retry:", None),
        (b"retry: \xd9\xa3", None),
    ],  # ARABIC-INDIC DIGIT THREE is not an ASCII digit
)
def test_retry_ascii_digits_only(line: bytes, expected: int | None) -> None:
    [event] = parse(line + b"\ndata: x\n\n")
    assert event.retry == expected


def test_field_names_are_case_sensitive() -> None:
    assert parse(b"Data: x\n\n") == []


def test_unterminated_event_at_end_is_discarded() -> None:
    assert [e.data for e in parse(b"data: a\n\ndata: b\n")] == ["a"]
    assert [e.data for e in parse(b"data: a\n\ndata: b")] == ["a"]


def test_invalid_utf8_is_replaced_not_raised() -> None:
    [event] = parse(b"data: \xff\xfe ok\n\n")
    assert event.data == "\ufffd\ufffd ok"


def test_over_long_line_raises_bad_response_without_a_newline() -> None:
    decoder = SSEDecoder(max_line=1024)
    decoder.feed(b"data: ")
    with pytest.raises(BadResponse) as info:
        for _ in range(10):
            decoder.feed(b"x" * 200)
    assert info.value.code == "LLM_BAD_RESPONSE"
    assert info.value.details["max_line"] == 1024


def test_over_long_event_data_raises() -> None:
    body = b"".join(b"data: " + b"x" * 100 + b"\n" for _ in range(20)) + b"\n"
    with pytest.raises(BadResponse):
        parse(body, max_line=1024)


def test_events_before_an_over_long_line_are_delivered_first() -> None:
    decoder = SSEDecoder(max_line=64)
    events = decoder.feed(b"data: ok\n\ndata: " + b"y" * 100)
    assert [e.data for e in events] == ["ok"]
    with pytest.raises(BadResponse):
        decoder.feed(b"\n\n")
    with pytest.raises(BadResponse):
        decoder.flush()


def test_memory_stays_bounded_while_waiting_for_a_newline() -> None:
    decoder = SSEDecoder(max_line=4096)
    with pytest.raises(BadResponse):
        for _ in range(1000):
            decoder.feed(b"z" * 1024)
    assert sum(len(p) for p in decoder._pieces) == 0


def test_a_line_just_under_the_limit_passes() -> None:
    line = b"data: " + b"x" * 1000
    [event] = parse(line + b"\n\n", [7, 500], max_line=len(line))
    assert len(event.data) == 1000


# --------------------------------------------------------------------------- properties

_FIELD_LINES = st.one_of(
    st.builds(lambda v: b"data:" + v, st.sampled_from([b"", b" ", b" x", b"  y", b'{"a":1}'])),
    st.builds(lambda v: b"data: " + v.encode(), st.text(max_size=12)),
    st.builds(lambda v: b"event: " + v.encode(), st.text(max_size=6)),
    st.builds(lambda v: b"id: " + v, st.sampled_from([b"1", b"abc", b"a\x00b", b""])),
    st.builds(lambda v: b"retry: " + v, st.sampled_from([b"10", b"x", b"", b"007"])),
    st.sampled_from([b": comment", b":", b"data", b"unknown: 1", b"", b"", b""]),
)
_ENDINGS = st.sampled_from([b"\n", b"\r\n", b"\r"])


@st.composite
def sse_bodies(draw: st.DrawFn) -> bytes:
    lines = draw(st.lists(st.tuples(_FIELD_LINES, _ENDINGS), max_size=25))
    body = b"".join(line + end for line, end in lines)
    if draw(st.booleans()):
        body = b"\xef\xbb\xbf" + body
    return body


@given(sse_bodies(), st.lists(st.integers(min_value=1, max_value=400), max_size=12))
@settings(max_examples=400)
def test_property_any_chunking_gives_the_same_events(body: bytes, cuts: list[int]) -> None:
    """The events depend only on the bytes, never on how they were cut into chunks."""
    assert as_tuples(parse(body, cuts)) == as_tuples(parse(body))


@given(sse_bodies(), st.lists(st.integers(min_value=1, max_value=400), max_size=12))
@settings(max_examples=400)
def test_property_matches_the_literal_spec_reading(body: bytes, cuts: list[int]) -> None:
    """The fast decoder agrees with a slow literal reading of the WHATWG algorithm."""
    assert as_tuples(parse(body, cuts)) == reference(body)


_SAFE_TEXT = st.text(
    alphabet=st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=30
)


@given(
    st.lists(
        st.tuples(
            st.text(alphabet="abcdefghijklmnopqrstuvwxyz_", max_size=8),
            st.lists(_SAFE_TEXT, min_size=1, max_size=4),
        ),
        max_size=10,
    ),
    st.lists(st.integers(min_value=1, max_value=2000), max_size=10),
)
def test_property_encode_then_parse_round_trip(
    events: list[tuple[str, list[str]]], cuts: list[int]
) -> None:
    """Events written in SSE come back identical (type, multi-line data), any chunking."""
    body = b""
    for event_type, data_lines in events:
        if event_type:
            body += f"event: {event_type}\n".encode()
        for line in data_lines:
            body += f"data: {line}\n".encode()
        body += b"\n"
    parsed = parse(body, cuts)
    assert [(e.event, e.data) for e in parsed] == [
        (t or "message", "\n".join(lines)) for t, lines in events
    ]


@given(st.binary(max_size=600), st.lists(st.integers(min_value=1, max_value=600), max_size=8))
@settings(max_examples=300)
def test_property_arbitrary_bytes_end_only_in_the_librarys_error(
    body: bytes, cuts: list[int]
) -> None:
    """Garbage never escapes as UnicodeDecodeError/IndexError/...: events, or BadResponse."""
    try:
        events = parse(body, cuts, max_line=64)
    except OllmError as exc:
        assert isinstance(exc, BadResponse)
    else:
        assert all(isinstance(e.data, str) for e in events)


_DATA_BLOCK = st.binary(max_size=16).map(
    lambda v: b"data: " + v.replace(b"\n", b"").replace(b"\r", b"") + b"\n\n"
)
# Many short events packed together (data blocks between other fields), cut in a few places.
_PACKED_BLOCKS = st.lists(
    st.one_of(_DATA_BLOCK, _DATA_BLOCK, _FIELD_LINES.map(lambda v: v + b"\n")), max_size=40
)
_FEW_CUTS = st.lists(st.integers(min_value=1, max_value=4000), max_size=4)


@given(_PACKED_BLOCKS, _FEW_CUTS)
@settings(max_examples=300)
def test_property_many_events_in_one_chunk_match_the_spec_reading(
    parts: list[bytes], cuts: list[int]
) -> None:
    """A server that outruns the reader packs many events into one chunk (any bytes, invalid
    UTF-8 included, between the blocks other fields): the same events as the literal reading."""
    body = b"".join(parts)
    assert as_tuples(parse(body, cuts)) == reference(body)


# --------------------------------------------------------------------------- SSEDataDecoder


def data_items(body: bytes, cuts: list[int]) -> list[str | SSEEvent]:
    """What SSEDataDecoder makes of ``body`` fed in pieces cut at ``cuts``."""
    decoder = SSEDataDecoder()
    items = [item for piece in split_at(body, cuts) for item in decoder.feed(piece)]
    return items + decoder.flush()


def as_events(items: list[str | SSEEvent]) -> list[tuple[str, str]]:
    return [("message", i) if isinstance(i, str) else (i.event, i.data) for i in items]


@given(sse_bodies(), st.lists(st.integers(min_value=1, max_value=400), max_size=12))
@settings(max_examples=400)
def test_property_data_decoder_gives_the_events_data_any_chunking(
    body: bytes, cuts: list[int]
) -> None:
    """SSEDataDecoder dispatches exactly the events SSEDecoder does, on any input cut
    anywhere: a ``message`` event as its data string, any other as the same SSEEvent."""
    events = parse(body)
    items = data_items(body, cuts)
    assert as_events(items) == [(e.event, e.data) for e in events]
    for item, event in zip(items, events, strict=True):
        assert isinstance(item, str) == (event.event == "message")
        if not isinstance(item, str):
            assert item == event  # id and retry too


@given(_PACKED_BLOCKS, _FEW_CUTS)
@settings(max_examples=300)
def test_property_data_decoder_packed_chunks_match_the_spec_reading(
    parts: list[bytes], cuts: list[int]
) -> None:
    """Many events packed in one chunk (the bulk path) give the literal reading's data."""
    body = b"".join(parts)
    assert as_events(data_items(body, cuts)) == [(t, d) for t, d, _, _ in reference(body)]


def test_data_decoder_named_and_explicit_message_events() -> None:
    """``event: message`` is the default type (a string); another type stays an SSEEvent."""
    body = b"event: message\ndata: a\n\nevent: error\nid: 3\ndata: b\n\ndata: c\n\n"
    assert data_items(body, []) == ["a", SSEEvent("error", "b", "3"), "c"]


def test_data_decoder_keeps_the_line_limit() -> None:
    """The data-only decoder enforces the same limit with the same error."""
    decoder = SSEDataDecoder(max_line=16)
    with pytest.raises(BadResponse) as info:
        decoder.feed(b"data: " + b"x" * 40)
    assert info.value.code == "LLM_BAD_RESPONSE"


@settings(max_examples=200)
@given(
    retries=st.lists(st.integers(min_value=0, max_value=10**9), max_size=4),
    with_data=st.lists(st.booleans(), min_size=4, max_size=4),
    cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=40),
)
def test_the_reconnection_time_is_the_last_retry_sent_dispatched_or_not(
    retries: list[int], with_data: list[bool], cuts: list[int]
) -> None:
    """WHATWG sets the reconnection time as the ``retry`` field is read: a block of only
    ``retry`` (no event dispatched) counts as much as one with data, and ``last_event_id``
    keeps an ``id`` alone in its block; cut anywhere, the decoder ends the same."""
    blocks = []
    for n, retry in enumerate(retries):
        data = "data: x\n" if with_data[n] else ""
        blocks.append(f"id: e{n}\nretry: {retry}\n{data}\n")
    body = ("".join(blocks) + "retry: x1\n\n").encode()  # not digits: ignored
    decoder = SSEDecoder()
    pieces = itertools.cycle(cuts)
    start = 0
    while start < len(body):
        end = start + next(pieces)
        decoder.feed(body[start:end])
        start = end
    decoder.flush()
    assert decoder.reconnection_ms == (retries[-1] if retries else None)
    assert decoder.last_event_id == (f"e{len(retries) - 1}" if retries else None)
