"""The line buffer the stream decoders of :mod:`ollm_lite.streams` share.

It holds the unterminated tail of a body and cuts complete LF-terminated lines out of the next
chunk. Memory is bounded: a line longer than ``max_line`` bytes (complete or still pending)
records a :class:`~ollm_lite.errors.BadResponse` (``LLM_BAD_RESPONSE``), which the decoder
raises on its next ``feed`` or ``flush``, after returning what came before it. A long line
arriving in many chunks is kept as a list of pieces, joined once, so no byte is scanned twice.
"""

from __future__ import annotations

from ..errors import BadResponse

__all__ = ["DEFAULT_MAX_LINE", "LineBuffer"]

DEFAULT_MAX_LINE = 16 * 1024 * 1024
"""Longest line (and longest SSE event data) accepted, in bytes."""


class LineBuffer:
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

    def _join_pending(self, chunk: bytes) -> bytes:
        """``chunk`` with the pending partial line in front of it (joined once)."""
        pieces = self._pieces
        if not pieces:
            return chunk
        pieces.append(chunk)
        chunk = b"".join(pieces)
        pieces.clear()
        self._plen = 0
        return chunk

    def _fail_line(self) -> None:
        self._fail(
            f"a stream line is longer than {self._max} bytes (no line break): the server is "
            "not sending SSE/NDJSON, or raise max_line"
        )

    def _fail(self, message: str) -> None:
        self._error = BadResponse(message, details={"max_line": self._max})
        self._pieces.clear()
        self._plen = 0
