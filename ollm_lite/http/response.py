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
from typing import Protocol, TypeVar

import requests
import urllib3

from ..errors import BadResponse, OllmError, RequestTimeout
from .cancel import Scope
from .failures import Failures, is_reset
from .inflate import Inflater, inflated
from .policy import DRAIN_MAX, DRAIN_WAIT_S, MAX_BODY
from .urllib3_hooks import body_chunks, response_socket

__all__ = ["Decoder", "StreamResponse"]

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

#: What reading the body may raise below this library: urllib3's decoding errors, and the
#: transport's own (a reset, a clean close that broke the framing, a socket urllib3 dropped).
_READ_FAILURES = (
    urllib3.exceptions.DecodeError,
    zlib.error,
    requests.RequestException,
    urllib3.exceptions.HTTPError,
    OSError,
    ValueError,
    AttributeError,
)


class _Raw:
    """The decoder that decodes nothing: each non-empty chunk is its own item."""

    @staticmethod
    def feed(chunk: bytes) -> Sequence[bytes]:
        return (chunk,)

    @staticmethod
    def flush() -> Sequence[bytes]:
        return ()


_RAW = _Raw()


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
        if self._source is not None and not self._failures.interrupted():
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

    def iter_chunks(self) -> Iterator[bytes]:
        """Raw body chunks as they arrive (one HTTP chunk each for chunked bodies).

        A clean end of the connection, even one that breaks chunked framing, just ends the
        iteration: the provider decides whether the stream was complete.

        Raises:
            Cancelled: ``CANCELLED`` when the cancel event was set.
            RequestTimeout: ``LLM_TIMEOUT`` on the idle limit or the total deadline.
            ConnectionFailed: ``CONNECTION_FAILED`` when the connection was reset.
        """
        for chunks in self.iter_batches(_RAW):
            yield from chunks

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
        return inflated(source, Inflater("deflate" if coding == "deflate" else "gzip"))

    def _coding_error(self, what: str, coding: str | None = None) -> BadResponse:
        """``LLM_BAD_RESPONSE`` for a body ``what`` (its coding named)."""
        if coding is None:
            coding = self.headers.get("content-encoding", "")
        return BadResponse(
            f"{self._origin.where} sent a body {what} (Content-Encoding: {coding or 'none'})",
            provider=self._origin.provider,
            model=self._failures.model,
            details={"content_encoding": coding},
        )

    def iter_batches(self, decoder: Decoder[T]) -> Iterator[Sequence[T]]:
        """What a sans-IO ``decoder`` (``feed``/``flush``) makes of the body: the non-empty
        list ``feed`` returns for each chunk, as it arrives, then ``flush``'s, if not empty.

        A list per chunk rather than item by item: a reader that loops over each list itself
        saves a generator step per item (one item per chunk is the usual stream). The idle
        limit counts *content*: chunks that produce no item (keep-alive comments, pings, half
        lines) do not reset it. A clean end of the connection, even one that breaks chunked
        framing, ends the body as :meth:`iter_chunks` says.

        Raises:
            RequestTimeout: ``LLM_TIMEOUT`` when no item arrived for ``Timeouts.idle`` seconds.
            BadResponse: ``LLM_BAD_RESPONSE`` from the decoder (over-long line).
            Cancelled, ConnectionFailed: as :meth:`iter_chunks`.
        """
        idle = self._failures.timeouts.idle
        monotonic = time.monotonic
        feed = decoder.feed
        cancel = self._failures.cancel
        last = monotonic()
        # One loop for reading and decoding (the per-token hot path: no generator between
        # them); ``decoding`` keeps a decoder's own failure from being read as a broken body.
        decoding = False
        try:
            # Not ``yield from``: leaving early must not close urllib3's chunk reader, which
            # close() may still drain to keep the connection.
            for chunk in self._body():
                if not chunk:
                    continue
                if cancel is not None and cancel.is_set():
                    raise self._failures.on_read(EOFError())
                decoding = True
                items = feed(chunk)
                decoding = False
                now = monotonic()
                if items:
                    last = now
                    yield items
                elif now - last > idle:
                    raise self._idle_error(idle)
        except OllmError:
            raise
        except _READ_FAILURES as exc:
            if decoding:
                raise
            self._end_broken(exc)
        else:
            self._end_clean()
        items = decoder.flush()
        if items:
            yield items

    def _idle_error(self, idle: float) -> RequestTimeout:
        return RequestTimeout(
            f"{self._origin.provider} sent no content for {idle:g} s",
            provider=self._origin.provider,
            model=self._failures.model,
            details={"idle_timeout": idle},
        )

    def _end_broken(self, exc: Exception) -> None:
        """A read failed: a clean close that broke the framing ends the body quietly (the
        caller sees a short stream); anything else is raised as the read error it is."""
        if isinstance(exc, (urllib3.exceptions.DecodeError, zlib.error)):
            if self._failures.interrupted():
                raise self._failures.on_read(exc) from exc
            raise self._coding_error("that could not be decoded") from exc
        if not self._failures.interrupted() and not is_reset(exc):
            self._response._content_consumed = True  # type: ignore[attr-defined]
            return
        raise self._failures.on_read(exc) from exc

    def _end_clean(self) -> None:
        """The body ended: a cancel or a deadline that cut it short is still an error."""
        if self._failures.interrupted():
            raise self._failures.on_read(EOFError())
        self._response._content_consumed = True  # type: ignore[attr-defined]

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
