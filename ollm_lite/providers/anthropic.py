"""Anthropic's Messages API (``POST /v1/messages``): ``AnthropicProvider``.

Claude's own API, and the same API as llama.cpp's ``llama-server``, vLLM, Ollama and LM Studio
serve it. Requests are built by :mod:`~ollm_lite.providers._anthropic_wire`, answers read by
:mod:`~ollm_lite.providers._anthropic_answers`; the HTTP layer (retries, deadlines, cancel,
redaction) and the event skeleton are :class:`~ollm_lite.providers._http.HTTPProvider`'s.

Headers (https://platform.claude.com/docs/en/api/overview): ``x-api-key`` when a key is set
(never in a URL, a log or an error) and ``anthropic-version: 2023-06-01``.

Invariants:

* ``chat_stream`` ends with exactly one ``FinishEvent`` or ``ErrorEvent``; text already
  yielded stays valid when an ``error`` event ends the stream; a set ``cancel`` ends it with
  ``FinishEvent("cancelled")``.
* ``429``, ``529`` (``overloaded_error``) and the other retryable statuses are tried again
  before any content reached the caller, honouring ``retry-after``; so is an ``error`` event
  of either type that ends a stream before any content.
* A turn's ``thinking`` and ``redacted_thinking`` blocks come back on its ``FinishEvent`` and
  from there on its assistant ``Message``, and are sent again unchanged with that turn.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, ClassVar, Literal

from .._cancel_link import deadline_for
from ..config import env_default
from ..errors import (
    BadResponse,
    HTTPStatusError,
    ModelNotFound,
    RateLimited,
    UnsupportedOperation,
)
from ..http.policy import Timeouts
from ..http.response import StreamResponse
from ..http.urls import normalize_base_url
from ..types import (
    ChatResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
)
from ._anthropic_answers import (
    ChatStreamState,
    MessagesDecoder,
    error_info,
    model_info_from_entry,
    refine_not_found,
)
from ._anthropic_wire import answer_schema, count_body, request_body
from ._http import HTTPProvider, time_limits

__all__ = ["ANTHROPIC_VERSION", "DEFAULT_BASE_URL", "AnthropicProvider"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header every request carries."""
_MESSAGES = "/v1/messages"
_MODELS = "/v1/models"
_OVERLOADED = 529
_MAX_PAGES = 100  # a server repeating its last_id must not loop forever


class AnthropicProvider(HTTPProvider):
    """Anthropic's Messages API, or any server that speaks it.

    Args:
        api_key: Sent as ``x-api-key``. Default: ``$ANTHROPIC_API_KEY``. Local servers
            usually need none; Anthropic's API answers ``LLM_AUTH_FAILED`` without one.
        base_url: Default: ``$ANTHROPIC_BASE_URL``, else ``https://api.anthropic.com``; with
            or without a trailing ``/v1``.
        idle_timeout: Longest wait in seconds for the server's next bytes (default 120;
            connecting waits at most 5 s, or this if less). A call's ``timeout=`` is the
            deadline of a whole answer.
        timeout: The older name of ``idle_timeout``, or a
            :class:`~ollm_lite.http.policy.Timeouts`.
        retries: Retries of failures before the first content (default 2).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a bad URL or ``retries``.
    """

    name: ClassVar[str] = "anthropic"
    streaming_format: ClassVar[str] = "sse"
    chat_not_found: ClassVar[Literal["model", "route"]] = "route"  # told apart by _not_found
    capabilities: ProviderCapabilities = ProviderCapabilities(
        streaming=True,
        tool_calling=True,
        model_management=False,
        embeddings=False,
        token_counting=True,
        guided_decoding=True,
        vision=True,
        thinking=True,
    )

    def __init__(
        self,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        idle_timeout: float | None = None,
        timeout: float | Timeouts | None = None,
        retries: int | None = None,
    ) -> None:
        key = api_key or env_default(self.name, "api_key")
        given = base_url or env_default(self.name, "base_url") or DEFAULT_BASE_URL
        url = normalize_base_url(given, strip_suffix=("/v1",))
        headers = {"anthropic-version": ANTHROPIC_VERSION}
        if key:
            headers["x-api-key"] = key
        self._connect(
            url,
            headers=headers,
            secret=key,
            timeout=time_limits(timeout, idle_timeout),
            retries=retries,
            start_hint="Start a server that speaks the Messages API (llama.cpp's llama-server, "
            "vLLM, Ollama, LM Studio) or check ANTHROPIC_BASE_URL.",
            model_hint="List the available models with `ollm-lite --provider anthropic models "
            "list`.",
        )
        # Anthropic answers 529 when it is overloaded: as worth another try as a 503.
        self._retry = replace(self._retry, statuses=self._retry.statuses | {_OVERLOADED})
        self._transport.retry = self._retry
        self._context: dict[str, int | None] = {}
        # Set once the server answered count_tokens with a 404 not about the model (Ollama,
        # say, serves /v1/messages without it): not asked again before every turn.
        self._uncounted = False

    # ------------------------------------------------------------------ chat

    def _chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        return request_body(request, stream=stream)

    def _state(self, request: ProviderRequest) -> ChatStreamState:
        """Per-answer state whose in-stream errors map like HTTP error answers."""
        redact = self._redact_for(request)
        transport = self._transport
        url = redact(transport.url(_MESSAGES))

        def map_error(error: Any) -> ErrorInfo:
            return error_info(
                error,
                provider=self.name,
                url=url,
                model=request.model,
                redact=redact,
                model_hint=transport.model_hint,
            )

        wrapped = None
        if request.response_format is not None:
            wrapped = answer_schema(request.response_format)[1]
        return ChatStreamState(map_error, answer_wrapped=wrapped, redact=redact)

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one answer from ``POST /v1/messages``.

        Yields ``TextEvent``/``ThinkingEvent``/``ToolCallEvent`` as they arrive, then exactly
        one ``FinishEvent`` (``stop``, ``length``, ``tool``, ``refusal``, ``cancelled``) or
        ``ErrorEvent`` (``LLM_AUTH_FAILED``, ``LLM_RATE_LIMITED``, ``MODEL_NOT_FOUND``,
        ``LLM_HTTP_ERROR`` with the server's message, ``LLM_BAD_RESPONSE`` for a stream cut
        before its ``stop_reason`` …).
        """
        # the one absolute deadline: the request's own seconds, or the call's on its cancel event
        deadline = deadline_for(request.timeout, request.cancel)
        attempt = 0
        while True:
            state = self._state(request)
            delay: float | None = None
            events = self._stream(request, _MESSAGES, MessagesDecoder(), state)
            try:
                for event in events:
                    if (
                        isinstance(event, ErrorEvent)
                        and state.stream_error
                        and not state.content
                        and event.error.code == RateLimited.code
                    ):
                        delay = self._pause(attempt, deadline)
                        if delay is not None:
                            break
                    yield event
            finally:
                close = getattr(events, "close", None)
                if close is not None:
                    close()
            if delay is None:
                return
            if request.cancel is not None:
                if request.cancel.wait(delay):
                    yield FinishEvent("cancelled")
                    return
            else:
                time.sleep(delay)
            attempt += 1

    def _pause(self, attempt: int, deadline: float | None) -> float | None:
        """Seconds to wait before asking again after an overloaded or rate-limit ``error``
        event that ended a stream before any content; ``None``: no try left (or none that
        would end before the monotonic ``deadline``)."""
        delay = self._retry.next_delay(None, attempt, deadline)
        if delay is not None:
            logger.debug("%s: overloaded mid-stream, trying again in %.2f s", self.name, delay)
        return delay

    def _open_chat(
        self,
        request: ProviderRequest,
        path: str,
        body: dict[str, Any],
        params: dict[str, str] | None = None,
    ) -> StreamResponse:
        """``POST path`` for ``request``, a 404 read by :meth:`_not_found`."""
        with self._not_found(path):
            return super()._open_chat(request, path, body, params)

    @contextmanager
    def _not_found(self, path: str) -> Iterator[None]:
        """A 404 to ``path`` is ``MODEL_NOT_FOUND`` only when the server's message is about
        the model; otherwise the server does not serve the Messages API there (the transport
        maps every 404 as a missing route: llama-cpp-python's server answers so)."""
        try:
            yield
        except HTTPStatusError as exc:
            refined = refine_not_found(exc, model_hint=self._transport.model_hint, path=path)
            if refined is exc:
                raise
            raise refined from exc

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole answer from ``POST /v1/messages`` (not streamed).

        Raises:
            OllmError: what the stream would have reported (``LLM_AUTH_FAILED``,
                ``LLM_RATE_LIMITED``, ``MODEL_NOT_FOUND``, ``LLM_HTTP_ERROR``,
                ``LLM_BAD_RESPONSE`` …).
        """
        body = self._chat_body(request, stream=False)
        with self._not_found(_MESSAGES):
            answer = self._transport.request_json(
                "POST",
                _MESSAGES,
                json_body=body,
                cancel=request.cancel,
                timeout=request.timeout,
                headers=request.headers or None,
                model=request.model,
            )
        state = self._state(request)
        return self._fold(state, [answer], state.handle_message)

    # ------------------------------------------------------------------ tokens, models

    def count_tokens(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> int:
        """Tokens of the whole request by the server's tokenizer
        (``POST /v1/messages/count_tokens``, its ``input_tokens``).

        Raises:
            OllmError: ``LLM_AUTH_FAILED``, ``MODEL_NOT_FOUND`` …; ``LLM_BAD_RESPONSE`` for an
                answer without ``input_tokens``; ``LLM_HTTP_ERROR`` (404) when the server does
                not serve the route, then ``UNSUPPORTED_OPERATION`` without asking again.
        """
        path = f"{_MESSAGES}/count_tokens"
        if self._uncounted:
            raise UnsupportedOperation(
                f"{self.name} at {self.base_url} does not serve {path}: no token count from "
                "the server",
                provider=self.name,
                model=request.model,
            )
        try:
            with self._not_found(path):
                answer = self._transport.request_json(
                    "POST",
                    path,
                    json_body=count_body(request),
                    cancel=cancel or request.cancel,
                    model=request.model,
                )
        except HTTPStatusError as exc:
            if type(exc) is HTTPStatusError and exc.status == 404:
                self._uncounted = True
            raise
        total = answer.get("input_tokens") if isinstance(answer, dict) else None
        if not isinstance(total, int) or isinstance(total, bool):
            raise self._bad_response("count_tokens answered without input_tokens")
        return total

    def list_models(self, *, cancel: threading.Event | None = None) -> list[ModelInfo]:
        """Every model of ``GET /v1/models``: Anthropic's pages (``has_more``, ``last_id``,
        asked for with ``after_id``), or the OpenAI list local servers answer.

        Raises:
            OllmError: ``LLM_AUTH_FAILED`` …; ``LLM_BAD_RESPONSE`` for a malformed page.
        """
        models: list[ModelInfo] = []
        after: str | None = None
        for _ in range(_MAX_PAGES):
            params = {"limit": "1000"}
            if after:
                params["after_id"] = after
            page = self._json("GET", _MODELS, params=params, cancel=cancel)
            entries = page.get("data") if isinstance(page, dict) else None
            if not isinstance(entries, list):
                raise self._bad_response("the models page has no list of models")
            models += [model_info_from_entry(e) for e in entries if isinstance(e, dict)]
            last = page.get("last_id")
            if page.get("has_more") is not True or not isinstance(last, str) or last == after:
                break
            after = last
        with self._lock:
            for info in models:
                self._context[info.name] = info.context_length
        return models

    def show_model(self, name: str, *, cancel: threading.Event | None = None) -> ModelInfo:
        """One model of the listing (``GET /v1/models``).

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` when the listing does not have it.
        """
        for info in self.list_models(cancel=cancel):
            if info.name == name:
                return info
        raise ModelNotFound(
            f"model {name!r} not found on {self.name} at {self.base_url}. "
            f"{self._transport.model_hint}",
            provider=self.name,
            model=name,
        )

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        """What the model listing says of ``model``'s window (cached); ``None`` when it
        says nothing or cannot be read."""
        with self._lock:
            if model in self._context:
                return self._context[model]
        return self._shown_context(model, cancel)

    def _probe(self, cancel: threading.Event | None) -> str | None:
        """``GET /v1/models?limit=1`` with this key (:meth:`health`)."""
        page = self._json("GET", _MODELS, params={"limit": "1"}, cancel=cancel)
        if not isinstance(page, dict):
            raise BadResponse(
                f"{self.name} at {self.base_url}: /v1/models answered something that is not "
                "an object",
                provider=self.name,
            )
        return None
