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
fast path (one ``bytes.split`` and a loop over its lines, no regexes, no per-line calls); only
the data value is decoded. A long line arriving in many chunks is kept as a list of pieces,
joined once, so no byte is scanned twice.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ._values import value
from .errors import BadResponse

__all__ = [
    "DEFAULT_MAX_LINE",
    "NDJSONDecoder",
    "SSEDecoder",
    "SSEEvent",
    "iter_ndjson",
    "iter_sse",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_LINE = 16 * 1024 * 1024
"""Longest line (and longest SSE event data) accepted, in bytes."""

_BOM = b"\xef\xbb\xbf"
# The scanner json.loads uses, without its wrapping: see NDJSONDecoder._parse. (An attribute
# JSONDecoder.__init__ sets on every instance; typeshed does not list it.)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_LOGGED_SKIPS = 3  # DEBUG lines for the first few skipped NDJSON lines only


@value
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


# The slots' own setters: the decoder fills its events through these (see SSEDecoder.feed).
_new = object.__new__
_set_event = SSEEvent.__dict__["event"].__set__
_set_data = SSEEvent.__dict__["data"].__set__
_set_id = SSEEvent.__dict__["id"].__set__
_set_retry = SSEEvent.__dict__["retry"].__set__


class _LineBuffer:
    """Holds the unterminated tail of the stream and cuts complete LF-terminated lines."""

    __slots__ = ("_error", "_max", "_pieces", "_plen")

    def __init__(self, max_line: int) -> None:
        self._max = max_line
        self._pieces: list[bytes] = []  # the partial last line, as received
        self._plen = 0  # total length of _pieces
        self._error: BadResponse | None = None  # raised by the next feed/flush

    def _split(self, chunk: bytes) -> list[bytes]:
        """The complete lines that ``chunk`` ends, the pending tail joined to the first.

        A line over the limit (complete or still pending) records the error, drops everything
        from that line on, and returns only the lines before it.
        """
        lines = chunk.split(b"\n")
        tail = lines.pop()
        pieces = self._pieces
        limit = self._max
        if pieces:
            if not lines:
                pieces.append(tail)
                self._plen += len(tail)
                if self._plen > limit:
                    self._fail_line()
                return lines
            pieces.append(lines[0])
            lines[0] = b"".join(pieces)
            pieces.clear()
        if len(chunk) > limit or (lines and len(lines[0]) > limit):
            for i, line in enumerate(lines):
                if len(line) > limit:
                    del lines[i:]
                    self._fail_line()
                    return lines
        self._plen = len(tail)
        if tail:
            pieces.append(tail)
            if self._plen > limit:
                self._fail_line()
        return lines

    def _fail_line(self) -> None:
        self._fail(
            f"a stream line is longer than {self._max} bytes (no line break): the server is "
            "not sending SSE/NDJSON, or raise max_line"
        )

    def _fail(self, message: str) -> None:
        self._error = BadResponse(message, details={"max_line": self._max})
        self._pieces.clear()
        self._plen = 0


class SSEDecoder(_LineBuffer):
    """Incremental WHATWG Server-Sent Events parser over byte chunks.

    Args:
        max_line: Longest line, and longest event data, accepted (bytes).

    Attributes:
        skipped: Always 0 (SSE data is not parsed here); present for symmetry.
    """

    __slots__ = ("_cr", "_data", "_dlen", "_event", "_head", "_id", "_retry", "skipped")

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

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Parse the next chunk of the body.

        Args:
            chunk: Bytes as received; boundaries may fall anywhere.

        Returns:
            The events completed by this chunk, in order (often empty).

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` when a line or an event's data passes
                ``max_line`` bytes.
        """
        error = self._error  # a local: the checks below must see the attribute change
        if error is not None:
            raise error
        pieces = self._pieces
        if (
            chunk[:6] == b"data: "
            and chunk.find(b"\n") == len(chunk) - 2
            and chunk[-1] == 10
            and not pieces
            and not self._data
            and self._head is None
            and not self._cr
            and 13 not in chunk  # 13: CR
            and len(chunk) <= self._max
        ):
            # Exactly one "data: ...\n\n" event, as servers send each token: the loop below
            # would dispatch the same event, at about twice the cost.
            ev = _new(SSEEvent)
            _set_event(ev, self._event or "message")
            _set_data(ev, chunk[6:-2].decode("utf-8", "replace"))
            _set_id(ev, self._id)
            _set_retry(ev, self._retry)
            self._event = ""
            self._retry = None
            return [ev]
        events: list[SSEEvent] = []
        if self._head is not None or self._cr or 13 in chunk:  # 13: CR
            lines = self._slow_lines(chunk)
        elif len(chunk) + self._plen > self._max or (pieces and 10 not in chunk):
            lines = self._split(chunk)  # a line that may pass the limit, or goes on
        else:  # fast path: LF line ends only, no line over the limit
            if pieces:  # this chunk ends the pending line: join it once
                pieces.append(chunk)
                chunk = b"".join(pieces)
                pieces.clear()
                self._plen = 0
            if (
                chunk[:6] == b"data: "
                and not self._data
                and not self._event
                and self._retry is None
            ):
                # Many events in one chunk (a server that outruns the reader): cut whole
                # "data: ...\n\n" blocks at once; what does not fit goes through the loop.
                chunk = self._blocks(chunk, events)
            lines = chunk.split(b"\n")
            tail = lines.pop()
            if tail:
                pieces.append(tail)
                self._plen = len(tail)
            if not lines:
                return events
        data = self._data
        for line in lines:
            if not line:  # blank line: dispatch
                if data:
                    # SSEEvent(...) without its frozen __init__, which costs 3x as much.
                    ev = _new(SSEEvent)
                    _set_event(ev, self._event or "message")
                    _set_data(ev, b"\n".join(data).decode("utf-8", "replace"))
                    _set_id(ev, self._id)
                    _set_retry(ev, self._retry)
                    events.append(ev)
                    data.clear()
                    self._dlen = 0
                self._event = ""
                self._retry = None
                continue
            if line[:6] == b"data: ":  # the usual form, quickest to test
                value = line[6:]
            elif line[0] == 58:  # ":" comment, e.g. a keep-alive
                continue
            else:
                colon = line.find(b":")
                if colon < 0:
                    name, value = line, b""
                else:
                    name = line[:colon]
                    value = (
                        line[colon + 2 :]
                        if line[colon + 1 : colon + 2] == b" "
                        else line[colon + 1 :]
                    )
                if name == b"event":
                    self._event = value.decode("utf-8", "replace")
                    continue
                if name == b"id":
                    # "If the field value does not contain U+0000 NULL, then set the last event
                    # ID buffer to the field value. Otherwise, ignore the field."
                    if b"\0" not in value:
                        self._id = value.decode("utf-8", "replace")
                    continue
                if name == b"retry":
                    if value.isdigit():  # bytes.isdigit is ASCII-only, and False when empty
                        self._retry = _to_int(value, self._retry)
                    continue
                if name != b"data":
                    continue  # unknown field
            data.append(value)
            self._dlen += len(value) + 1
            if self._dlen > self._max + 1:
                self._fail(f"an SSE event carries more than {self._max} bytes of data")
                break
        if self._error is not None:
            self._reset_event()
            if not events:
                raise self._error
        return events

    def _blocks(self, chunk: bytes, events: list[SSEEvent]) -> bytes:
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
        event = "message"
        last_id = self._id
        append = events.append
        for i, block in enumerate(blocks):
            if block[:6] != "data: " or "\n" in block:  # not one data line: the loop's work
                # The rest, exactly as received (strict UTF-8 round-trips), then the tail.
                return "\n\n".join(blocks[i:]).encode() + chunk[end:]
            ev = _new(SSEEvent)
            _set_event(ev, event)
            _set_data(ev, block[6:])
            _set_id(ev, last_id)
            _set_retry(ev, None)
            append(ev)
        return chunk[end + 2 :]

    def flush(self) -> list[SSEEvent]:
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


def _to_int(digits: bytes, default: int | None) -> int | None:
    try:
        return int(digits)
    except ValueError:  # more digits than int() accepts: not a usable delay anyway
        return default


class NDJSONDecoder(_LineBuffer):
    """Incremental newline-delimited JSON parser over byte chunks.

    Args:
        max_line: Longest line accepted (bytes).

    Attributes:
        skipped: Number of non-blank lines that were not a JSON object (skipped; the first few
            are logged at DEBUG, by length only).
    """

    __slots__ = ("skipped",)

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        super().__init__(max_line)
        self.skipped = 0

    @property
    def pending(self) -> bool:
        """True if a partial, non-blank line is buffered (the body ended mid-line so far)."""
        return any(piece.strip() for piece in self._pieces)

    def feed(self, chunk: bytes) -> list[dict[str, Any]]:
        """Parse the next chunk of the body.

        Args:
            chunk: Bytes as received; boundaries may fall anywhere.

        Returns:
            The JSON objects of the lines this chunk completed, in order (often empty).

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` when a line passes ``max_line`` bytes.
        """
        error = self._error  # a local: the check below must see the attribute change
        if error is not None:
            raise error
        pieces = self._pieces
        if len(chunk) + self._plen > self._max or (pieces and 10 not in chunk):
            out = self._parse(self._split(chunk))  # a line that may pass the limit, or goes on
            if self._error is not None and not out:
                raise self._error
            return out
        # Fast path: no line over the limit.
        if pieces:  # this chunk ends the pending line: join it once
            pieces.append(chunk)
            chunk = b"".join(pieces)
            pieces.clear()
            self._plen = 0
        end = chunk.rfind(b"\n")
        if end < 0:
            if chunk:
                pieces.append(chunk)
                self._plen = len(chunk)
            return []
        if end + 1 < len(chunk):
            pieces.append(chunk[end + 1 :])
            self._plen = len(chunk) - end - 1
        if chunk.find(b"\n") == end:  # one line (one object per chunk, as servers send)
            return self._parse([chunk[:end]])
        return self._parse_many(chunk[:end])

    def flush(self) -> list[dict[str, Any]]:
        """End of the body: parse a last line that had no newline.

        Returns:
            The object on that line, if it is one.

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` left over from the last :meth:`feed`.
        """
        if self._error is not None:
            raise self._error
        if not self._pieces:
            return []
        line = b"".join(self._pieces)
        self._pieces.clear()
        self._plen = 0
        return self._parse([line])

    def _parse_many(self, region: bytes) -> list[dict[str, Any]]:
        """The objects of several whole lines, decoded to text at once (a server that outruns
        the reader): an LF is never part of a multi-byte character, so each line is what
        decoding it alone gives. Invalid UTF-8 leaves the work to :meth:`_parse`."""
        try:
            text = region.decode("utf-8")
        except UnicodeDecodeError:
            return self._parse(region.split(b"\n"))
        out: list[dict[str, Any]] = []
        scan = _scan_once
        for line in text.split("\n"):
            # As in _parse: "{" then not NUL is what json.loads would read as UTF-8.
            if line[:1] == "{" and line[1:2] != "\0":
                try:
                    obj, end = scan(line, 0)
                except (ValueError, RecursionError, StopIteration):
                    pass
                else:
                    if end == len(line) or line[end:] == "\r":
                        out.append(obj)
                        continue
            elif not line:
                continue
            out.extend(self._parse([line.encode()]))  # strict UTF-8: the same bytes
        return out

    def _parse(self, lines: list[bytes]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        loads = json.loads
        scan = _scan_once
        for line in lines:
            # The usual line, one UTF-8 object "{...}" (then CR at most): json.loads(bytes)
            # would guess the encoding and run two whitespace regexes around the same scan
            # (about 40 % of the per-line cost). Its guess is UTF-8 for a line starting with
            # "{" and a non-NUL byte; anything else falls through to json.loads, unchanged.
            if line[:1] == b"{" and line[1:2] != b"\0":
                try:
                    text = line.decode("utf-8", "surrogatepass")  # as json.loads decodes
                    obj, end = scan(text, 0)
                except (ValueError, RecursionError, StopIteration):
                    pass
                else:
                    if end == len(text) or text[end:] == "\r":  # "{" always scans to a dict
                        out.append(obj)
                        continue
            try:
                obj = loads(line)  # bytes: CR and other JSON whitespace around it are fine
            except (ValueError, RecursionError):
                obj = self._recover(line)
                if obj is None:
                    continue
            if type(obj) is dict:
                out.append(obj)
            else:
                self._skip(line, "not a JSON object")
        return out

    def _recover(self, line: bytes) -> Any:
        """The value of a line json.loads refused: None for a blank or skipped line."""
        if not line.strip():
            return None
        try:
            # Invalid UTF-8 is replaced, not fatal; a BOM may start the first line.
            return json.loads(line.decode("utf-8", "replace").removeprefix("\ufeff"))
        except (ValueError, RecursionError):
            self._skip(line, "not valid JSON")
            return None

    def _skip(self, line: bytes, why: str) -> None:
        self.skipped += 1
        if self.skipped <= _LOGGED_SKIPS:
            logger.debug("NDJSON: skipped a %d-byte line: %s", len(line), why)


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
    decoder = SSEDecoder(max_line=max_line)
    feed = decoder.feed
    for chunk in chunks:
        events = feed(chunk)
        if events:
            yield from events
    yield from decoder.flush()


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
    decoder = NDJSONDecoder(max_line=max_line)
    feed = decoder.feed
    for chunk in chunks:
        objs = feed(chunk)
        if objs:
            yield from objs
    yield from decoder.flush()
