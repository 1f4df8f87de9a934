"""The NDJSON stream decoder (re-exported by :mod:`ollm_lite.streams`, which documents it).

:class:`NDJSONDecoder` splits on LF (a CR before it is JSON whitespace), parses each line as
:func:`json.loads` would and returns the lines that are JSON objects. Blank lines are ignored;
any other line (bad JSON, not an object, nested too deep) is skipped and counted in
``skipped``. A last line without a newline is parsed by ``flush()``.

Performance: the usual line, one UTF-8 object ``{...}``, goes to the JSON scanner directly
(:func:`json.loads` would guess the encoding and run two whitespace regexes around the same
scan); several whole lines in one chunk (a server that outruns the reader) are decoded to text
at once. Anything unusual takes :func:`json.loads` itself, so what is accepted never changes.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

from ._line_buffer import DEFAULT_MAX_LINE, LineBuffer

__all__ = ["NDJSONDecoder"]

# The public module's name: logging set up for ``ollm_lite.streams`` keeps seeing these lines.
logger = logging.getLogger("ollm_lite.streams")

# The scanner json.loads uses, without its wrapping: see NDJSONDecoder._parse. (An attribute
# JSONDecoder.__init__ sets on every instance; typeshed does not list it.)
_scan_once: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_LOGGED_SKIPS = 3  # DEBUG lines for the first few skipped NDJSON lines only
_SCAN_ERRORS = (ValueError, RecursionError, StopIteration)


class NDJSONDecoder(LineBuffer):
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
        if (
            chunk[:1] == b"{"
            and chunk[-1] == 10
            and chunk.find(b"\n") == len(chunk) - 1
            and chunk[1] != 0  # "{" then NUL: json.loads would guess UTF-16
            and not pieces
            and len(chunk) <= self._max
        ):
            # Exactly one object line, as servers send each token: what _parse does for it,
            # without cutting the line out or building lists around it.
            try:
                text = chunk.decode("utf-8", "surrogatepass")
                obj, end = _scan_once(text, 0)
            except _SCAN_ERRORS:
                pass
            else:
                if end == len(text) - 1 or text[end:] == "\r\n":
                    return [obj]
        if len(chunk) + self._plen > self._max or (pieces and 10 not in chunk):
            out = self._parse(self._split(chunk))  # a line that may pass the limit, or goes on
            if self._error is not None and not out:
                raise self._error
            return out
        # Fast path: no line over the limit.
        if pieces:
            chunk = self._join_pending(chunk)
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
        return self._parse([self._join_pending(b"")])

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
                except _SCAN_ERRORS:
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
                except _SCAN_ERRORS:
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
