"""Incremental, sans-IO parsers for the two streaming formats: SSE and NDJSON.

The decoders never touch a socket. The transport feeds them the byte chunks of a response body
exactly as they arrive (``feed(chunk)`` returns whatever that chunk completed) and calls
``flush()`` once at the end of the body. :func:`iter_sse` and :func:`iter_ndjson` wrap the same
decoders around any iterable of chunks.

:class:`SSEDecoder` implements the WHATWG "event stream interpretation" (HTML §9.2.6):

* lines end at CRLF, LF or a lone CR, found in the *bytes* before anything is decoded, so a
  chunk boundary anywhere (inside a CRLF, inside a multi-byte character, inside the BOM) changes
  nothing, and U+2028, U+2029 or NEL inside JSON never end a line;
* one leading BOM is dropped; invalid UTF-8 becomes U+FFFD, never an exception;
* comments (``:``) are ignored; ``data`` lines are joined with LF; one U+0020 after the colon is
  removed; field names are case-sensitive; ``id`` containing NUL is ignored and the last event
  ID is *not* reset on dispatch; ``retry`` counts only when it is ASCII digits;
* a blank line dispatches; a block without data dispatches nothing; an unterminated event at
  the end of the stream is discarded.

:class:`SSEDataDecoder` parses exactly the same way for a reader that wants only the data: an
event of the default type ``message`` comes out as its ``data`` string, any other as an
:class:`SSEEvent` (the wires read ``data``, and ``event`` for ``error`` events; no reconnection
happens, so ``id`` and ``retry`` are not needed).

:class:`NDJSONDecoder` splits on LF (a CR before it is JSON whitespace), parses each line with
:func:`json.loads` and yields the lines that are JSON objects. Blank lines are ignored; any
other line (bad JSON, not an object, nested too deep) is skipped and counted in ``skipped``.
A last line without a newline is parsed by ``flush()``.

Invariants:

* The events depend only on the bytes, never on how they were cut into chunks.
* Memory is bounded: a line longer than ``max_line`` bytes, or an SSE event whose data is
  longer, raises :class:`~ollm_lite.errors.BadResponse` (``LLM_BAD_RESPONSE``) as soon as the
  buffer passes the limit, without waiting for a line end. Nothing else ever escapes.
* When a chunk completes some events and then hits such an error, ``feed`` returns those
  events first and the error is raised by the next ``feed`` or ``flush`` (nothing is lost).

Performance: the common case, one small event per chunk and no partial line pending, takes a
fast path (a few byte tests, no regexes, no per-line calls); only the data value is decoded.
Many ``data:`` blocks in one chunk are decoded to text at once. A long line arriving in many
chunks is kept as a list of pieces, joined once, so no byte is scanned twice.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ._line_buffer import DEFAULT_MAX_LINE, LineBuffer
from ._ndjson import NDJSONDecoder

__all__ = [
    "DEFAULT_MAX_LINE",
    "NDJSONDecoder",
    "SSEDataDecoder",
    "SSEDecoder",
    "SSEEvent",
    "iter_ndjson",
    "iter_sse",
]

_BOM = b"\xef\xbb\xbf"

Item = TypeVar("Item")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched Server-Sent Event."""

    event: str = "message"
    """Event type: the last ``event`` field of the block, or ``"message"``."""
    data: str = ""
    """The ``data`` lines of the block joined with LF (no trailing LF)."""
    id: str | None = None
    """Last event ID so far in the stream (it persists across events); None if never set."""
    retry: int | None = None
    """Reconnection time in ms from a valid ``retry`` field in this block, else None."""


# The slots' own setters: events are made with these (see _SSEParser._dispatch).
_new = object.__new__
_set_event = SSEEvent.__dict__["event"].__set__
_set_data = SSEEvent.__dict__["data"].__set__
_set_id = SSEEvent.__dict__["id"].__set__
_set_retry = SSEEvent.__dict__["retry"].__set__


def _event(event: str, data: str, last_id: str | None, retry: int | None) -> SSEEvent:
    # SSEEvent(...) without its frozen __init__, which costs 3x as much.
    ev: SSEEvent = _new(SSEEvent)
    _set_event(ev, event)
    _set_data(ev, data)
    _set_id(ev, last_id)
    _set_retry(ev, retry)
    return ev


class _SSEParser(LineBuffer, Generic[Item]):
    """The WHATWG parser; subclasses say what a dispatched event becomes (:meth:`_dispatch`
    for one event, :meth:`_messages` for a run of plain ``message`` events)."""

    __slots__ = (
        "_cr",
        "_data",
        "_dlen",
        "_event",
        "_head",
        "_id",
        "_retry",
        "reconnection_ms",
        "skipped",
    )

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        super().__init__(max_line)
        self.skipped = 0
        self._head: bytes | None = b""  # stream start held until the BOM question is settled
        self._cr = False  # the last chunk ended in CR: an LF starting the next one is dropped
        self._data: list[bytes] = []  # data buffer, one item per data line
        self._dlen = 0  # length of the data buffer with an LF after each line
        self._event = ""  # event type buffer
        self._id: str | None = None  # last event ID buffer (None until an id field is seen)
        self._retry: int | None = None
        #: The reconnection time (ms) the stream set last, ``None`` until it sets one. WHATWG
        #: sets it as the ``retry`` field is read, so a block of only ``retry`` counts too,
        #: though it dispatches no event (``SSEEvent.retry`` is only the event's own block).
        self.reconnection_ms: int | None = None

    @property
    def last_event_id(self) -> str | None:
        """The last event ID the stream set (``None`` until an ``id`` field), also by a block
        that dispatched nothing: what a client resumes from with ``Last-Event-ID``."""
        return self._id

    def _dispatch(self, data: str) -> Item:
        """The item for an event with ``data`` and the buffers; resets the event buffers."""
        raise NotImplementedError

    def _messages(self, datas: list[str]) -> list[Item]:
        """The items for events of type ``message`` without ``retry``, one per data value."""
        raise NotImplementedError

    def feed(self, chunk: bytes) -> list[Item]:
        """Parse the next chunk of the body.

        Args:
            chunk: Bytes as received; boundaries may fall anywhere.

        Returns:
            The events completed by this chunk, in order (often empty).

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` when a line or an event's data passes
                ``max_line`` bytes.
        """
        error = self._error
        if error is not None:
            raise error
        if (
            chunk[:6] == b"data: "
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1] == 10
            and not self._pieces
            and not self._data
            and self._head is None
            and not self._cr
            and 13 not in chunk  # 13: CR
            and len(chunk) <= self._max
        ):
            # Exactly one "data: ...\n\n" event, as servers send each token: the line loop
            # would dispatch the same event, at about twice the cost.
            return [self._dispatch(chunk[6:-2].decode("utf-8", "replace"))]
        events: list[Item] = []
        lines = self._cut(chunk, events)
        if lines:
            self._lines(lines, events)
        if self._error is not None:
            self._reset_event()
            if not events:
                raise self._error
        return events

    def _cut(self, chunk: bytes, events: list[Item]) -> list[bytes]:
        """The complete lines of ``chunk`` (pending bytes first); leading one-line ``data:``
        blocks of a chunk that packs many events are dispatched into ``events`` at once."""
        if self._head is not None or self._cr or 13 in chunk:  # 13: CR
            return self._slow_lines(chunk)
        if len(chunk) + self._plen > self._max or (self._pieces and 10 not in chunk):
            return self._split(chunk)  # a line that may pass the limit, or goes on
        # LF line ends only, no line over the limit.
        chunk = self._join_pending(chunk)
        if chunk[:6] == b"data: " and not self._data and not self._event and self._retry is None:
            chunk = self._blocks(chunk, events)
        lines = chunk.split(b"\n")
        tail = lines.pop()
        if tail:
            self._pieces.append(tail)
            self._plen = len(tail)
        return lines

    def _lines(self, lines: list[bytes], events: list[Item]) -> None:
        """Process complete lines: fill the buffers, dispatch on blank lines."""
        data = self._data
        for line in lines:
            if not line:  # blank line: dispatch
                if data:
                    events.append(self._dispatch(b"\n".join(data).decode("utf-8", "replace")))
                    data.clear()
                    self._dlen = 0
                else:
                    self._event = ""
                    self._retry = None
                continue
            if line[:6] == b"data: ":  # the usual form, quickest to test
                value = line[6:]
            elif line[0] == 58:  # ":" comment, e.g. a keep-alive
                continue
            else:
                field = self._field(line)
                if field is None:
                    continue
                value = field
            data.append(value)
            self._dlen += len(value) + 1
            if self._dlen > self._max + 1:
                self._fail(f"an SSE event carries more than {self._max} bytes of data")
                return

    def _field(self, line: bytes) -> bytes | None:
        """Apply a field line other than ``data: ...``; the value if it is a ``data`` line."""
        colon = line.find(b":")
        if colon < 0:
            name, value = line, b""
        else:
            name = line[:colon]
            value = line[colon + 2 :] if line[colon + 1 : colon + 2] == b" " else line[colon + 1 :]
        if name == b"data":
            return value
        if name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id":
            # "If the field value does not contain U+0000 NULL, then set the last event ID
            # buffer to the field value. Otherwise, ignore the field."
            if b"\0" not in value:
                self._id = value.decode("utf-8", "replace")
        elif name == b"retry" and value.isdigit():  # bytes.isdigit: ASCII only, False if empty
            self._retry = _to_int(value, self._retry)
            if self._retry is not None:
                self.reconnection_ms = self._retry
        return None  # an unknown field is ignored

    def _blocks(self, chunk: bytes, events: list[Item]) -> bytes:
        """Dispatch the leading one-line ``data: ...`` blocks of ``chunk``; return the rest.

        A block is the text between two blank-line ends (LF LF). It is dispatched here when it
        is one ``data:`` line and nothing else, exactly what the line loop would make of it.
        The blocks are decoded at once (an LF is never part of a multi-byte character, so this
        is what decoding each value gives); invalid UTF-8 leaves the work to the line loop.
        """
        end = chunk.rfind(b"\n\n")
        if end < 0:
            return chunk
        try:
            blocks = chunk[:end].decode("utf-8").split("\n\n")
        except UnicodeDecodeError:
            return chunk
        plain = 0
        for block in blocks:
            if block[:6] != "data: " or "\n" in block:  # not one data line: the loop's work
                break
            plain += 1
        events += self._messages([block[6:] for block in blocks[:plain]])
        if plain < len(blocks):
            # The rest, exactly as received (strict UTF-8 round-trips), then the tail.
            return "\n\n".join(blocks[plain:]).encode() + chunk[end:]
        return chunk[end + 2 :]

    def flush(self) -> list[Item]:
        """End of the body: an unterminated line or undispatched event is discarded (WHATWG).

        Returns:
            Always an empty list (kept for symmetry with :meth:`NDJSONDecoder.flush`).

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` left over from the last :meth:`feed`.
        """
        if self._error is not None:
            raise self._error
        self._pieces.clear()
        self._plen = 0
        self._head = None
        self._cr = False
        self._reset_event()
        return []

    def _reset_event(self) -> None:
        self._data.clear()
        self._dlen = 0
        self._event = ""
        self._retry = None

    def _slow_lines(self, chunk: bytes) -> list[bytes]:
        """Lines of ``chunk`` when a BOM, a CR or a partial line needs care."""
        if self._head is not None:
            chunk = self._head + chunk
            if len(chunk) < 3 and _BOM.startswith(chunk):
                self._head = chunk  # may still become a BOM
                return []
            self._head = None
            if chunk.startswith(_BOM):
                chunk = chunk[3:]
        if self._cr and chunk:
            self._cr = False
            if chunk[0] == 10:  # the LF of a CRLF split across chunks
                chunk = chunk[1:]
        if b"\r" in chunk:
            self._cr = chunk[-1] == 13
            # CRLF -> LF, then lone CR -> LF; LF CR stays two line ends.
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        return self._split(chunk)


class SSEDecoder(_SSEParser[SSEEvent]):
    """Incremental WHATWG Server-Sent Events parser over byte chunks: :class:`SSEEvent` out.

    Args:
        max_line: Longest line, and longest event data, accepted (bytes).

    Attributes:
        skipped: Always 0 (SSE data is not parsed here); present for symmetry.
    """

    __slots__ = ()

    def _dispatch(self, data: str) -> SSEEvent:
        ev = _event(self._event or "message", data, self._id, self._retry)
        self._event = ""
        self._retry = None
        return ev

    def _messages(self, datas: list[str]) -> list[SSEEvent]:
        last_id = self._id
        return [_event("message", data, last_id, None) for data in datas]


class SSEDataDecoder(_SSEParser[str | SSEEvent]):
    """:class:`SSEDecoder` for readers of the data only: an event of type ``message`` comes
    out as its ``data`` string (no :class:`SSEEvent` is made), any other as an
    :class:`SSEEvent`. Same arguments, rules and errors as :class:`SSEDecoder`."""

    __slots__ = ()

    def _dispatch(self, data: str) -> str | SSEEvent:
        event = self._event
        retry = self._retry
        self._event = ""
        self._retry = None
        if event and event != "message":
            return _event(event, data, self._id, retry)
        return data

    def _messages(self, datas: list[str]) -> list[str | SSEEvent]:
        return datas  # type: ignore[return-value]  # list is invariant; the items are str


def _to_int(digits: bytes, default: int | None) -> int | None:
    try:
        return int(digits)
    except ValueError:  # more digits than int() accepts: not a usable delay anyway
        return default


def _decoded(decoder: Any, chunks: Iterable[bytes]) -> Iterator[Any]:
    """Everything ``decoder`` makes of ``chunks``, then of the end of the body."""
    feed = decoder.feed
    for chunk in chunks:
        items = feed(chunk)
        if items:
            yield from items
    yield from decoder.flush()


def iter_sse(chunks: Iterable[bytes], *, max_line: int = DEFAULT_MAX_LINE) -> Iterator[SSEEvent]:
    """Server-Sent Events from an iterable of body chunks (WHATWG rules, see the module doc).

    Args:
        chunks: The body as byte chunks, cut anywhere.
        max_line: Longest line, and longest event data, accepted (bytes).

    Returns:
        An iterator of :class:`SSEEvent`; an unterminated last event is discarded.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when a line or an event passes ``max_line`` bytes.
    """
    return _decoded(SSEDecoder(max_line=max_line), chunks)


def iter_ndjson(
    chunks: Iterable[bytes], *, max_line: int = DEFAULT_MAX_LINE
) -> Iterator[dict[str, Any]]:
    """JSON objects from an iterable of NDJSON body chunks.

    Blank lines are ignored; lines that are not JSON objects are skipped. A last line without a
    newline is still parsed.

    Args:
        chunks: The body as byte chunks, cut anywhere.
        max_line: Longest line accepted (bytes).

    Returns:
        An iterator of the objects, in order.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when a line passes ``max_line`` bytes.
    """
    return _decoded(NDJSONDecoder(max_line=max_line), chunks)
