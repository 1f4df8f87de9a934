"""``Content-Encoding`` undone in bounded pieces: gzip (several members too) and deflate,
zlib-wrapped as RFC 9110 section 8.4.1.2 says or raw as old servers send it."""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from typing import Any

__all__ = ["Inflater", "inflated"]

#: Most bytes one step of decompression may produce: a small compressed chunk can inflate to
#: hundreds of MB (a "zip bomb"), so the body is inflated piece by piece, each piece going
#: to the line decoder (and its line limit) before the next is made.
_INFLATE_STEP = 64 * 1024


def inflated(source: Iterator[bytes], inflater: Inflater) -> Iterator[bytes]:
    """The body from ``source`` with its coding undone by ``inflater``, in bounded pieces."""
    for chunk in source:
        yield from inflater.feed(chunk)
    yield inflater.flush()


class Inflater:
    """Decodes one ``Content-Encoding`` incrementally, at most ``_INFLATE_STEP`` bytes a piece.

    urllib3 inflates a whole received chunk at once; reading the raw body and inflating it
    here with a bounded ``max_length`` keeps memory bounded by the consumer's own limits.
    """

    __slots__ = ("_coding", "_members", "_obj", "_started")

    def __init__(self, coding: str) -> None:
        self._coding = coding
        self._started = False
        self._members = 0
        self._obj = self._new()

    def _new(self) -> Any:
        if self._coding == "deflate":  # zlib-wrapped per RFC 9110; raw deflate is tried too
            return zlib.decompressobj()
        return zlib.decompressobj(16 + zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        """The decoded pieces of ``data``.

        Raises:
            zlib.error: the body is not in the announced coding.
        """
        while data:
            try:
                out = self._obj.decompress(data, _INFLATE_STEP)
            except zlib.error:
                if self._members:  # garbage after a whole gzip member is ignored, as urllib3 does
                    return
                if self._coding != "deflate" or self._started:
                    raise
                self._obj = zlib.decompressobj(-zlib.MAX_WBITS)  # raw deflate (old servers)
                out = self._obj.decompress(data, _INFLATE_STEP)
            self._started = True
            if out:
                yield out
            data = self._obj.unconsumed_tail
            if not data and self._obj.eof and self._obj.unused_data:
                data = self._obj.unused_data  # the next gzip member
                self._members += 1
                self._obj = self._new()

    def flush(self) -> bytes:
        """What the decompressor still holds."""
        return bytes(self._obj.flush())
