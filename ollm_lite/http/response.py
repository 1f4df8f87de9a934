"""An open HTTP answer read as it arrives, and the bounded ``Content-Encoding`` inflater.

:class:`StreamResponse` knows its request only through its
:class:`~ollm_lite.http.failures.Failures` (server, scope, cancel, deadline, for messages and
errors) and a ``release`` callback that stops the watching: the transport builds it, it never
names the transport.
"""

from __future__ import annotations

import contextlib
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Protocol, TypeVar

import requests
import urllib3

from ..errors import BadResponse, OllmError, RequestTimeout
from .cancel import Scope
from .failures import Failures, is_reset
from .policy import DRAIN_MAX, DRAIN_WAIT_S, MAX_BODY
from .urllib3_hooks import body_chunks, response_socket

__all__ = ["Decoder", "StreamResponse"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: Most bytes one step of decompression may produce: a small compressed chunk can inflate to
#: hundreds of MB (a "zip bomb"), so the body is inflated piece by piece, each piece going
#: to the line decoder (and its line limit) before the next is made.
_INFLATE_STEP = 64 * 1024


class Decoder(Protocol[T_co]):
    """A sans-IO stream decoder (:mod:`ollm_lite.streams`): byte chunks in, items out."""

    def feed(self, chunk: bytes) -> Sequence[T_co]:
        """The items ``chunk`` completed."""
        ...

    def flush(self) -> Sequence[T_co]:
        """The items left at the end of the body."""
        ...


class StreamResponse:
    """An open HTTP response being streamed. Use as a context manager; it owns the connection.

    Iterate with :meth:`iter_chunks` (raw byte chunks) or :meth:`iter_decoded` (events from a
    sans-IO decoder, with the idle-content limit applied).
    """

    def __init__(
        self,
        response: requests.Response,
        failures: Failures,
        release: Callable[[Scope], None],
    ) -> None:
        self._response = response
        self._failures = failures
        self._origin = failures.origin
        self._scope = failures.scope
        self._release = release
        self._cancel = failures.cancel
        self._timeouts = failures.timeouts
        self._model = failures.model
        self._closed = False
        # urllib3's chunk reader, kept here so a caller leaving iter_chunks() early does not
        # close it: close() may still finish the body and keep the connection.
        self._source: Iterator[bytes] | None = None
        self.status = response.status_code
        self.headers: Mapping[str, str] = response.headers

    def __enter__(self) -> StreamResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the connection: back to the pool when fully read, closed otherwise."""
        if self._closed:
            return
        self._closed = True
        if self._source is not None and self._scope.reason is None and not self._cancelled():
            self._finish_body(self._source)
        self._source = None
        # Finished before the connection goes back to the pool: a cancel arriving now must
        # not shut down a socket that the next request may already be using.
        self._scope.finish()
        self._release(self._scope)
        with contextlib.suppress(Exception):  # closing must never raise
            self._response.close()

    def _finish_body(self, source: Iterator[bytes]) -> None:
        """Read what is left of a chunked body if it is already here, to reuse the connection.

        Providers stop reading at their terminal event (``[DONE]``, ``done: true``); usually
        only the chunked terminator is left. Waiting at most ``DRAIN_WAIT_S`` for at most
        ``DRAIN_MAX`` bytes lets the connection go back to the pool; a server still sending
        (the caller left mid-answer) gets its connection closed as before.
        """
        sock = response_socket(self._response.raw)
        if sock is None:
            return
        try:
            previous = sock.gettimeout()
            sock.settimeout(DRAIN_WAIT_S)
        except OSError:
            return
        read = 0
        deadline = time.monotonic() + DRAIN_WAIT_S
        try:
            for chunk in source:
                read += len(chunk)
                # A server still trickling the answer is not waited for, byte by byte.
                if read > DRAIN_MAX or time.monotonic() > deadline:
                    return
        except Exception:  # a timeout or reset: the connection is closed, as before
            return
        finally:
            with contextlib.suppress(OSError):
                sock.settimeout(previous)

    def _cancelled(self) -> bool:
        return self._failures.cancelled()

    def _read_error(self, exc: BaseException) -> OllmError:
        """Translate a failure while reading the body."""
        return self._failures.on_read(exc)

    def iter_chunks(self) -> Iterator[bytes]:
        """Raw body chunks as they arrive (one HTTP chunk each for chunked bodies).

        A clean end of the connection, even one that breaks chunked framing, just ends the
        iteration: the provider decides whether the stream was complete.

        Raises:
            Cancelled: ``CANCELLED`` when the cancel event was set.
            RequestTimeout: ``LLM_TIMEOUT`` on the idle limit or the total deadline.
            ConnectionFailed: ``CONNECTION_FAILED`` when the connection was reset.
        """
        cancel = self._cancel
        try:
            # Not ``yield from``: leaving early must not close urllib3's chunk reader, which
            # close() may still drain to keep the connection.
            for chunk in self._body():
                if chunk:
                    if cancel is not None and cancel.is_set():
                        raise self._read_error(EOFError())
                    yield chunk
        except OllmError:
            raise
        except (urllib3.exceptions.DecodeError, zlib.error) as exc:
            if self._scope.reason is not None or self._cancelled():
                raise self._read_error(exc) from exc
            raise self._coding_error("that could not be decoded") from exc
        except (
            requests.RequestException,
            urllib3.exceptions.HTTPError,
            OSError,
            ValueError,
            AttributeError,
        ) as exc:
            if self._scope.reason is None and not self._cancelled() and not is_reset(exc):
                self._response._content_consumed = True  # type: ignore[attr-defined]
                return  # clean close that broke the framing: the caller sees a short stream
            raise self._read_error(exc) from exc
        if self._scope.reason is not None or self._cancelled():
            raise self._read_error(EOFError())
        self._response._content_consumed = True  # type: ignore[attr-defined]

    def _body(self) -> Iterator[bytes]:
        """The body as it arrives, its ``Content-Encoding`` undone in bounded pieces."""
        source, keep = body_chunks(self._response.raw)
        if keep:
            self._source = source
        coding = self.headers.get("content-encoding", "").strip().lower()
        if coding in ("", "identity"):
            return source
        if coding not in ("gzip", "x-gzip", "deflate"):
            raise self._coding_error("in a coding that was not asked for", coding)
        return _inflated(source, Inflater("deflate" if coding == "deflate" else "gzip"))

    def _coding_error(self, what: str, coding: str | None = None) -> BadResponse:
        """``LLM_BAD_RESPONSE`` for a body ``what`` (its coding named)."""
        if coding is None:
            coding = self.headers.get("content-encoding", "")
        return BadResponse(
            f"{self._origin.where} sent a body {what} (Content-Encoding: {coding or 'none'})",
            provider=self._origin.provider,
            model=self._model,
            details={"content_encoding": coding},
        )

    def iter_batches(self, decoder: Decoder[T]) -> Iterator[Sequence[T]]:
        """What a sans-IO ``decoder`` (``feed``/``flush``) makes of the body: the non-empty
        list ``feed`` returns for each chunk, as it arrives, then ``flush``'s, if not empty.

        A list per chunk rather than item by item: a reader that loops over each list itself
        saves a generator step per item (one item per chunk is the usual stream). The idle
        limit counts *content*: chunks that produce no item (keep-alive comments, pings, half
        lines) do not reset it.

        Raises:
            RequestTimeout: ``LLM_TIMEOUT`` when no item arrived for ``Timeouts.idle`` seconds.
            BadResponse: ``LLM_BAD_RESPONSE`` from the decoder (over-long line).
            Cancelled, ConnectionFailed: as :meth:`iter_chunks`.
        """
        idle = self._timeouts.idle
        monotonic = time.monotonic
        feed = decoder.feed
        last = monotonic()
        for chunk in self.iter_chunks():
            items = feed(chunk)
            now = monotonic()
            if items:
                last = now
                yield items
            elif now - last > idle:
                raise RequestTimeout(
                    f"{self._origin.provider} sent no content for {idle:g} s",
                    provider=self._origin.provider,
                    model=self._model,
                    details={"idle_timeout": idle},
                )
        items = decoder.flush()
        if items:
            yield items

    def iter_decoded(self, decoder: Decoder[T]) -> Iterator[T]:
        """The items of :meth:`iter_batches`, one by one (same limits and errors)."""
        for items in self.iter_batches(decoder):
            yield from items

    def read_body(self, limit: int = MAX_BODY) -> bytes:
        """The whole remaining body (bounded by ``limit``)."""
        parts: list[bytes] = []
        size = 0
        for chunk in self.iter_chunks():
            size += len(chunk)
            if size > limit:
                raise BadResponse(
                    f"{self._origin.provider} answered more than {limit} bytes",
                    provider=self._origin.provider,
                )
            parts.append(chunk)
        return b"".join(parts)

    def read_limited(self, limit: int) -> bytes:
        """At most ``limit`` bytes of the body (an error answer's, for its message)."""
        parts: list[bytes] = []
        size = 0
        for chunk in self.iter_chunks():
            parts.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
        return b"".join(parts)[:limit]


def _inflated(source: Iterator[bytes], inflater: Inflater) -> Iterator[bytes]:
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
