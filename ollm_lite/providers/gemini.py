"""Google Gemini through its REST API (``v1beta``): ``GeminiProvider``.

Streams ``models/{model}:streamGenerateContent?alt=sse``; the key goes in the
``x-goog-api-key`` header only (never the URL, so it cannot reach a log or an error). Function
calls become the common :class:`~ollm_lite.types.ToolCall`; their ``thoughtSignature`` comes
back on the ``FinishEvent`` (``provider_blocks``), rides on the turn's assistant ``Message`` and
is sent back with the call in the next request, as Gemini 3 requires: it survives a saved
session and a new client. The provider also remembers the signatures of the calls it returned,
for histories built by hand from a ``ChatResult`` (which has no room for them).
A call without an ``id`` gets ``call_<n>`` from one counter per provider instance, so ids (and
the signatures keyed by them) never collide across turns, even with chats sharing a provider.

Invariants:

* ``chat_stream`` ends with exactly one ``FinishEvent`` or ``ErrorEvent``; text already
  yielded stays valid; a set ``cancel`` ends it with ``FinishEvent("cancelled")``.
* A turn with function calls finishes with reason ``tool`` (Gemini says ``STOP``).
* An error Google reports inside a 200 stream (as an SSE event or as bare JSON lines) maps
  exactly as the same body answered before the stream would (:func:`error_for_status`).
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
from collections.abc import Iterator
from typing import Any, ClassVar
from urllib.parse import quote

from ..config import env_default
from ..errors import AuthenticationError, BadResponse, HTTPStatusError
from ..http.errors import error_for_status
from ..http.policy import Timeouts
from ..http.secrets import Redactor
from ..http.urls import normalize_base_url
from ..types import (
    ChatResult,
    ErrorInfo,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
)
from ._gemini_wire import (
    GENERATED_ID_PREFIX,
    ChatStreamState,
    StreamDecoder,
    mid_stream_error,
    model_info_from_gemini,
    request_body,
)
from ._http import HTTPProvider, time_limits

__all__ = ["DEFAULT_BASE_URL", "GeminiProvider"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
_API = "/v1beta"
_MAX_SIGNATURES = 1024


def _model_name(model: str) -> str:
    """``models/<name>`` (a name given with its prefix is kept)."""
    return model if model.startswith(("models/", "tunedModels/")) else f"models/{model}"


def _model_path(model: str) -> str:
    return f"{_API}/{quote(_model_name(model), safe='/')}"


class GeminiProvider(HTTPProvider):
    """Google Gemini (Generative Language API).

    Args:
        api_key: Default: ``$GEMINI_API_KEY``, else ``$GOOGLE_API_KEY``. Without one, calls
            fail with ``LLM_AUTH_FAILED`` (``health()`` says so, never raises).
        base_url: Default: Google's endpoint (a loopback URL for tests and proxies).
        idle_timeout: Longest wait in seconds for the server's next bytes: for an answer to
            begin and, while it streams, between pieces of content (default 120; connecting
            waits at most 5 s, or this if less). Not a deadline for a whole answer: a call's
            ``timeout=`` is that.
        timeout: The older name of ``idle_timeout`` (the same number), or a
            :class:`~ollm_lite.http.policy.Timeouts` (connect, idle and total limits). Given
            with an ``idle_timeout`` that differs: ``CONFIG_INVALID``.
        retries: Retries of failures before the first byte (default 2; 429 honours the
            server's ``retryDelay`` up to 60 s).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a bad URL or ``retries``.
    """

    name: ClassVar[str] = "gemini"
    streaming_format: ClassVar[str] = "sse"
    embed_batch_size = 100  # batchEmbedContents refuses more than 100 requests per call
    capabilities: ProviderCapabilities = ProviderCapabilities(
        streaming=True,
        tool_calling=True,
        model_management=False,
        embeddings=True,
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
        url = normalize_base_url(base_url or DEFAULT_BASE_URL, strip_suffix=(_API, "/v1"))
        self._has_key = bool(key)
        self._connect(
            url,
            headers={"x-goog-api-key": key} if key else {},
            secret=key,
            timeout=time_limits(timeout, idle_timeout),
            retries=retries,
            start_hint="Check the network path to Google's API (or your base_url).",
            model_hint="List the available models with `ollm-lite --provider gemini models list`.",
        )
        self._signatures: dict[str, str] = {}
        self._context: dict[str, int | None] = {}
        self._call_ids = itertools.count()  # shared by every stream: ids unique per provider

    def _require_key(self) -> None:
        if not self._has_key:
            raise AuthenticationError(
                "no Gemini API key: pass api_key= or set GEMINI_API_KEY", provider=self.name
            )

    # ------------------------------------------------------------------ chat

    def _body(self, request: ProviderRequest) -> dict[str, Any]:
        with self._lock:
            signatures = dict(self._signatures)
        return request_body(request, signatures)

    def _chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        self._require_key()
        return self._body(request)

    def _new_call_id(self) -> str:
        """The next ``call_<n>`` of this provider (thread-safe)."""
        with self._lock:
            n = next(self._call_ids)
        return f"{GENERATED_ID_PREFIX}{n}"

    def _state(self, path: str, request: ProviderRequest) -> ChatStreamState:
        """Per-answer state whose in-stream errors map like HTTP error answers to ``path``."""
        redact = self._redact_for(request)

        def map_error(error: Any) -> ErrorInfo:
            return self._stream_error(error, path, request.model, redact)

        return ChatStreamState(self._new_call_id, map_error, redact)

    def _stream_error(self, error: Any, path: str, model: str, redact: Redactor) -> ErrorInfo:
        """Google's ``error`` object sent inside a 200 answer, mapped as if it had come as
        the HTTP error answer ``error.code`` (the one mapping, :func:`error_for_status`).

        Without a usable ``code``, the Google status names still decide (``RESOURCE_EXHAUSTED``
        …); anything else is ``LLM_BAD_RESPONSE`` with Google's message.
        """
        if not isinstance(error, dict | str):
            return mid_stream_error(error)
        code = error.get("code") if isinstance(error, dict) else None
        status = code if isinstance(code, int) and 400 <= code <= 599 else None
        transport = self._transport
        exc = error_for_status(
            status or 200,
            json.dumps({"error": error}).encode(),
            {"content-type": "application/json"},
            provider=self.name,
            url=redact(transport.url(path)),
            model=model,
            not_found="model",
            redact=redact,
            model_hint=transport.model_hint,
        )
        if status is None and type(exc) is HTTPStatusError:
            return mid_stream_error(error)
        return exc.to_info()

    def _stream_ended(self, state: ChatStreamState) -> None:
        """Keep the ``thoughtSignature`` values the answer carried, for the next request."""
        if not state.signatures:
            return
        with self._lock:
            self._signatures.update(state.signatures)
            while len(self._signatures) > _MAX_SIGNATURES:  # oldest first
                self._signatures.pop(next(iter(self._signatures)))

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one answer from ``:streamGenerateContent?alt=sse``.

        Yields ``TextEvent``/``ThinkingEvent``/``ToolCallEvent`` as they arrive, then exactly
        one ``FinishEvent`` (``stop``, ``length``, ``tool``, ``content_filter``,
        ``cancelled``) or ``ErrorEvent`` (``LLM_AUTH_FAILED``, ``LLM_RATE_LIMITED``,
        ``MODEL_NOT_FOUND``, ``LLM_BAD_RESPONSE`` for a blocked prompt or a stream cut
        before its ``finishReason`` …). Google's error object inside the stream (a ``data:``
        event or bare JSON lines) gets the code it would have had as the HTTP answer.
        """
        path = f"{_model_path(request.model)}:streamGenerateContent"
        state = self._state(path, request)
        yield from self._stream(request, path, StreamDecoder(), state, params={"alt": "sse"})

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole answer from ``:generateContent``.

        Raises:
            AuthenticationError: ``LLM_AUTH_FAILED`` without a key or with a bad one.
            BadResponse: ``LLM_BAD_RESPONSE`` for a blocked prompt or a malformed answer.
            OllmError: the transport's other errors.
        """
        self._require_key()
        path = f"{_model_path(request.model)}:generateContent"
        answer = self._transport.request_json(
            "POST",
            path,
            json_body=self._body(request),
            cancel=request.cancel,
            timeout=request.timeout,
            headers=request.headers or None,
            model=request.model,
            not_found="model",
        )
        if not isinstance(answer, dict):
            raise BadResponse("Gemini answered something that is not an object", provider=self.name)
        state = self._state(path, request)
        return self._fold(state, [answer], state.handle_object)

    # ------------------------------------------------------------------ tokens, models

    def count_tokens(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> int:
        """Tokens of the whole request by Gemini's tokenizer (``:countTokens``).

        Raises:
            OllmError: ``LLM_AUTH_FAILED``, ``MODEL_NOT_FOUND`` …; ``LLM_BAD_RESPONSE`` for an
                answer without ``totalTokens``.
        """
        self._require_key()
        body = self._body(request)
        answer = self._json(
            "POST",
            f"{_model_path(request.model)}:countTokens",
            body={"generateContentRequest": {"model": _model_name(request.model), **body}},
            cancel=cancel or request.cancel,
            model=request.model,
        )
        total = answer.get("totalTokens") if isinstance(answer, dict) else None
        if not isinstance(total, int):
            raise BadResponse("countTokens answered without totalTokens", provider=self.name)
        return total

    def list_models(self, *, cancel: threading.Event | None = None) -> list[ModelInfo]:
        """Every model (all pages of ``GET /v1beta/models``).

        Raises:
            OllmError: ``LLM_AUTH_FAILED`` …; ``LLM_BAD_RESPONSE`` for a malformed page.
        """
        self._require_key()
        models: list[ModelInfo] = []
        token: str | None = None
        for _ in range(100):  # a server repeating its page token must not loop forever
            params = {"pageSize": "1000"}
            if token:
                params["pageToken"] = token
            page = self._json("GET", f"{_API}/models", params=params, cancel=cancel)
            if not isinstance(page, dict):
                raise BadResponse("the models page is not an object", provider=self.name)
            entries = page.get("models")
            if not isinstance(entries, list | None):
                raise BadResponse("the models page has no list of models", provider=self.name)
            models += [model_info_from_gemini(m) for m in entries or () if isinstance(m, dict)]
            next_token = page.get("nextPageToken")
            token = next_token if isinstance(next_token, str) and next_token else None
            if not token:
                break
        with self._lock:
            for info in models:
                self._context[info.name] = info.context_length
        return models

    def show_model(self, name: str, *, cancel: threading.Event | None = None) -> ModelInfo:
        """One model (``GET /v1beta/models/{name}``).

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND``.
        """
        self._require_key()
        entry = self._json("GET", _model_path(name), cancel=cancel, model=name)
        if not isinstance(entry, dict):
            raise BadResponse("the model answer is not an object", provider=self.name)
        info = model_info_from_gemini(entry)
        with self._lock:
            self._context[name.removeprefix("models/")] = info.context_length
        return info

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        """``inputTokenLimit`` of the model (cached); ``None`` when it cannot be read."""
        key = model.removeprefix("models/")
        with self._lock:
            if key in self._context:
                return self._context[key]
        return self._shown_context(model, cancel)

    def _embedding_model(self, model: str | None) -> str:
        self._require_key()
        return model or "gemini-embedding-001"

    def _embed_batch(
        self, batch: list[str], model: str, cancel: threading.Event | None
    ) -> list[list[float]]:
        """``:batchEmbedContents`` (one vector per text, order kept)."""
        name = _model_name(model)
        parts = [{"model": name, "content": {"parts": [{"text": t}]}} for t in batch]
        path = f"{_model_path(model)}:batchEmbedContents"
        answer = self._json("POST", path, body={"requests": parts}, cancel=cancel, model=model)
        embeddings = answer.get("embeddings") if isinstance(answer, dict) else None
        if not isinstance(embeddings, list) or len(embeddings) != len(batch):
            raise BadResponse(
                f"batchEmbedContents returned {len(embeddings or [])} vectors for "
                f"{len(batch)} texts",
                provider=self.name,
                model=model,
            )
        return [[float(v) for v in e.get("values", [])] for e in embeddings]

    def _probe(self, cancel: threading.Event | None) -> str | None:
        """``GET /v1beta/models?pageSize=1`` with this key (:meth:`health`)."""
        self._require_key()
        self._json("GET", f"{_API}/models", params={"pageSize": "1"}, cancel=cancel)
        return None
