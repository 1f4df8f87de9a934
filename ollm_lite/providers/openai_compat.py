"""Servers that speak OpenAI's Chat Completions API: ``OpenAICompatibleProvider``.

One provider for LM Studio, LocalAI, KoboldCpp, llama.cpp's ``llama-server``,
llama-cpp-python's server and any other ``/v1/chat/completions`` server, chosen with
``backend=``. Everything that differs between them (auth headers, default port, token counting,
where the context length and per-model capabilities come from) is the backend's business
(:mod:`~ollm_lite.providers.backends`): this provider asks it and never tests its name. The pure
wire mapping lives in :mod:`~ollm_lite.providers._openai_wire`, the stream skeleton in
:class:`~ollm_lite.providers._http.HTTPProvider`.
:class:`~ollm_lite.providers.vllm.VllmProvider` is a thin configuration of this class.

Invariants:

* ``chat_stream`` ends with exactly one ``FinishEvent`` or ``ErrorEvent``; text already yielded
  stays valid when an error ends it; a set ``cancel`` ends it with ``FinishEvent("cancelled")``.
* ``base_url`` works with or without a trailing ``/v1``.
* The API key is sent only in the backend's auth headers and appears in no repr, log line or
  error message.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

from ..config import env_default, env_names
from ..errors import BadResponse, HTTPStatusError, ModelNotFound, OllmError, check_positive_int
from ..http.policy import Timeouts
from ..http.urls import normalize_base_url
from ..streams import SSEDataDecoder
from ..types import (
    ChatResult,
    ErrorInfo,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
)
from ._backend_base import Question, is_no_route, request_text
from ._http import HTTPProvider, time_limits, version_of
from ._openai_wire import (
    ChatStreamState,
    chat_body,
    embeddings_from,
    model_info_from_openai,
    result_from_answer,
)
from .backends import OPENAI_COMPATIBLE_BACKENDS, Backend, backend_named

__all__ = ["OpenAICompatibleProvider", "request_text"]

logger = logging.getLogger(__name__)

_CHAT_PATH = "/v1/chat/completions"


class OpenAICompatibleProvider(HTTPProvider):
    """Any OpenAI-compatible chat server, with per-backend presets.

    Args:
        base_url: Server root, with or without ``/v1``. Default: ``$OPENAI_COMPATIBLE_HOST``,
            else the backend's usual address (``http://localhost:1234`` for ``generic`` and
            ``lmstudio``, ``:8080`` for ``llamacpp`` and ``localai``, ``:5001`` for ``kobold``).
        api_key: Key sent in the backend's auth headers (``Authorization: Bearer``; LM Studio
            also gets ``X-API-Key``). Default: ``$OPENAI_COMPATIBLE_API_KEY``, else none.
        backend: One of ``lmstudio``, ``localai``, ``kobold``, ``llamacpp``, ``generic``.
        idle_timeout: Longest wait in seconds for the server's next bytes: for an answer to
            begin and, while it streams, between pieces of content (default 120; connecting
            waits at most 5 s, or this if less). Not a deadline for a whole answer: a call's
            ``timeout=`` is that.
        timeout: The older name of ``idle_timeout`` (the same number), or a
            :class:`~ollm_lite.http.policy.Timeouts` (connect, idle and total limits). Given
            with an ``idle_timeout`` that differs: ``CONFIG_INVALID``.
        retries: Retries of failures before the first byte (default 2).
        embed_batch_size: Texts per ``/v1/embeddings`` request (default 64).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unknown backend (the message names the valid
            ones), a bad URL, ``retries`` or ``embed_batch_size``.
    """

    name: ClassVar[str] = "openai-compatible"
    streaming_format: ClassVar[str] = "sse"
    _backends: ClassVar[tuple[str, ...]] = OPENAI_COMPATIBLE_BACKENDS

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        backend: str = "generic",
        idle_timeout: float | None = None,
        timeout: float | Timeouts | None = None,
        retries: int | None = None,
        embed_batch_size: int = 64,
    ) -> None:
        self._configure(
            backend_named(backend, allowed=self._backends),
            base_url=base_url,
            api_key=api_key,
            timeout=time_limits(timeout, idle_timeout),
            retries=retries,
            embed_batch_size=embed_batch_size,
        )

    def _configure(
        self,
        backend: Backend,
        *,
        base_url: str | None,
        api_key: str | None,
        timeout: float | Timeouts | None,
        retries: int | None,
        embed_batch_size: int,
    ) -> None:
        check_positive_int("embed_batch_size", embed_batch_size)
        raw_url = base_url or env_default(self.name, "base_url") or backend.default_base_url
        (host_var,) = env_names(f"providers.{self.name}.base_url")
        key = api_key if api_key is not None else env_default(self.name, "api_key")
        self.backend: Backend = backend
        self.embed_batch_size = embed_batch_size
        self.capabilities = ProviderCapabilities(
            streaming=True,
            tool_calling=backend.tool_calling,
            model_management=False,
            embeddings=backend.embeddings,
            token_counting=backend.token_counting,
            guided_decoding=backend.guided_decoding,
            vision=None,
            thinking=backend.thinking,
        )
        self._connect(
            normalize_base_url(raw_url, strip_suffix="/v1"),
            headers=backend.auth(key),
            secret=key,
            timeout=timeout,
            retries=retries,
            start_hint=(
                f"Make sure the {backend.title.removesuffix(' server')} server is running and "
                f"reachable at this address (or set base_url / ${host_var})."
            ),
            model_hint="Check the model name against `ollm-lite models list`.",
        )
        self._context_cache: dict[str, int | None] = {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, backend={self.backend.name!r}, "
            f"base_url={self.base_url!r})"
        )

    # ------------------------------------------------------------------ chat

    def _chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        """The request body; subclasses add their backend's extras here."""
        return chat_body(request, self.backend, stream=stream)

    def _state(self, request: ProviderRequest) -> ChatStreamState:
        return ChatStreamState(
            provider=self.name,
            model=request.model,
            url=self.base_url,
            redact=self._redact_for(request),
        )

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one answer from ``POST /v1/chat/completions``.

        Yields ``TextEvent`` / ``ThinkingEvent`` as they arrive, complete ``ToolCallEvent``
        values just before the end, then exactly one ``FinishEvent`` (``stop``, ``length``,
        ``tool``, ``content_filter``, ``cancelled``; usage where the server sent it, llama.cpp's
        ``timings`` in ``usage.extra``) or ``ErrorEvent``: ``MODEL_NOT_FOUND``,
        ``CONNECTION_FAILED``, ``LLM_AUTH_FAILED``, ``LLM_TIMEOUT``, ``LLM_HTTP_ERROR``,
        ``LLM_BAD_RESPONSE`` (an error object mid-stream, a truncated stream),
        ``CONFIG_INVALID`` (a forced tool that is not offered). Closing the generator early
        releases the connection.
        """
        return self._stream(request, _CHAT_PATH, SSEDataDecoder(), self._state(request))

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole answer from ``POST /v1/chat/completions`` with ``stream: false``.

        A server that streams anyway is folded the same way as :meth:`chat_stream`.

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND``.
            ConnectionFailed: ``CONNECTION_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE`` for an error object or an answer without a message.
            Cancelled: ``CANCELLED`` when ``request.cancel`` was set.
            ConfigError: ``CONFIG_INVALID`` for a forced tool that is not offered.
            OllmError: any other transport failure (``LLM_TIMEOUT``, ``LLM_HTTP_ERROR`` …).
        """
        raw = self._post_whole(request, _CHAT_PATH, self._chat_body(request, stream=False))
        if raw.lstrip().startswith(b"data:"):  # streamed although stream=false was asked
            decoder = SSEDataDecoder()
            return self._fold(self._state(request), [*decoder.feed(raw), *decoder.flush()])
        try:
            answer = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise self._bad_response(
                "sent a chat answer that is not JSON", model=request.model
            ) from exc
        try:
            return result_from_answer(answer, redact=self._redact_for(request))
        except BadResponse as exc:
            redact = self._redact_for(request)
            raise BadResponse(
                redact(f"{self.name} at {self.base_url}: {exc.message}"),
                details=redact.obj(exc.details),
                provider=self.name,
                model=request.model,
            ) from exc

    # ------------------------------------------------------------------ what the backend says

    def count_tokens(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> int:
        """Tokens ``request`` uses, through the backend's tokenizer endpoint where it has one.

        llama.cpp's native server counts the whole templated prompt
        (``/v1/chat/completions/input_tokens``, else ``/tokenize`` over the text);
        llama-cpp-python uses ``/extras/tokenize/count``; KoboldCpp ``/api/extra/tokencount``;
        vLLM ``/tokenize``. Backends without a tokenizer (``capabilities.token_counting`` is
        false) get the estimate ceil(characters / 4).

        Args:
            request: What to count.
            cancel: Setting it interrupts the call (default: ``request.cancel``).

        Raises:
            UnsupportedOperation: ``UNSUPPORTED_OPERATION`` when the ``llamacpp`` preset found
                no tokenizer on the server (callers such as ``TokenCounter`` then estimate).
            ConnectionFailed, HTTPStatusError, BadResponse: when the tokenizer call fails.
        """
        return self.backend.count_tokens(Question(self, cancel or request.cancel), request)

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        """The context window the server runs ``model`` with, or ``None`` when it does not say.

        vLLM: ``max_model_len`` from ``/v1/models``. llama.cpp native: ``/props``
        ``default_generation_settings.n_ctx`` (the ``-c`` it runs with, not the trained
        maximum); llama-cpp-python: ``/v1/models`` ``meta.n_ctx`` where present. LM Studio: the
        loaded instance's window. KoboldCpp: ``/api/extra/true_max_context_length``. Others:
        ``None``. Answers are cached per instance; failures are not (``None`` this time).
        """
        if model in self._context_cache:
            return self._context_cache[model]

        def asked() -> int | None:
            value = self.backend.context_length(Question(self, cancel), model)
            with self._lock:
                self._context_cache[model] = value
            return value

        return self._quietly("context length", model, asked, None)

    def model_capabilities(
        self, model: str, *, cancel: threading.Event | None = None
    ) -> ProviderCapabilities:
        """What ``model`` can do where the server says (else the provider's capabilities).

        llama.cpp native: the chat template's tool support and the vision modality from
        ``/props``; LM Studio 0.4+: ``capabilities`` of ``/api/v1/models``. Never raises.
        """
        ask = Question(self, cancel)
        return self._quietly(
            "capabilities",
            model,
            lambda: self.backend.model_capabilities(ask, model),
            self.capabilities,
        )

    # ------------------------------------------------------------------ models

    def list_models(self, *, cancel: threading.Event | None = None) -> list[ModelInfo]:
        """Models the server offers (``GET /v1/models``).

        A server without that route gives an empty list (the reason is logged at INFO).
        For the native llama.cpp server, ``context_length`` is the running window.

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED``.
            AuthenticationError: ``LLM_AUTH_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE`` for an answer without a model list.
        """
        try:
            answer = self._json("GET", "/v1/models", cancel=cancel)
        except OllmError as exc:
            if is_no_route(exc) or isinstance(exc, BadResponse):
                logger.info(
                    "%s at %s cannot list models (%s: %s); returning an empty list",
                    self.name,
                    self.base_url,
                    exc.code,
                    exc.message,
                )
                return []
            raise
        data = answer.get("data") if isinstance(answer, dict) else answer
        if not isinstance(data, list):
            raise self._bad_response("/v1/models answer has no 'data' list")
        models = [model_info_from_openai(entry) for entry in data]
        self.backend.annotate_models(Question(self, cancel), models)
        return models

    def show_model(self, name: str, *, cancel: threading.Event | None = None) -> ModelInfo:
        """One model from ``GET /v1/models`` (``context_length`` from :meth:`context_length`).

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` when the server does not list it.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        for info in self.list_models(cancel=cancel):
            if info.name == name:
                if info.context_length is None:
                    info.context_length = self.context_length(name, cancel=cancel)
                return info
        raise ModelNotFound(
            f"model {name!r} is not listed by {self.name} at {self.base_url}",
            provider=self.name,
            model=name,
        )

    def parallel_slots(self, *, cancel: threading.Event | None = None) -> int | None:
        """Requests the server runs at once: llama.cpp's ``GET /props`` ``total_slots``
        (its ``-np``) on the native ``llama-server``; else ``None``.

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED`` when the server cannot be reached.
        """
        return self.backend.parallel_slots(Question(self, cancel))

    # ------------------------------------------------------------------ embeddings

    def _embed_batch(
        self, batch: list[str], model: str, cancel: threading.Event | None
    ) -> list[list[float]]:
        """``POST /v1/embeddings``."""
        body = {"model": model, "input": batch}
        answer = self._json("POST", "/v1/embeddings", body=body, cancel=cancel, model=model)
        try:
            return embeddings_from(answer, len(batch), model=model)
        except BadResponse as exc:
            raise BadResponse(exc.message, provider=self.name, model=model) from exc

    # ------------------------------------------------------------------ health

    def _probe(self, cancel: threading.Event | None) -> str | None:
        """The backend's health route for :meth:`health` (llama.cpp and vLLM ``/health``,
        KoboldCpp ``/api/extra/version``, else ``/v1/models``), and its version route.

        A llama.cpp server still loading its model (503) is reported as not ok with
        ``details["loading"] = True``, unlike one that is down (``CONNECTION_FAILED``).
        """
        path = self.backend.health_path
        version_path = self.backend.version_path
        try:
            raw = self._get_raw(path, cancel, 256 * 1024)
        except OllmError as exc:
            if not (is_no_route(exc) and path != "/v1/models"):
                raise
            raw = self._get_raw("/v1/models", cancel, 256 * 1024)  # llama-cpp-python: no /health
        if path == version_path:
            return version_of(raw)
        if version_path is None:
            return None
        try:
            return version_of(self._get_raw(version_path, cancel, 256 * 1024))
        except OllmError:
            return None

    def _health_error(self, exc: OllmError) -> ErrorInfo:
        info = exc.to_info()
        if isinstance(exc, HTTPStatusError) and exc.status == 503:
            details = dict(info.details or {})
            details["loading"] = True
            return ErrorInfo(
                f"{self.backend.title} at {self.base_url} is up but not ready (HTTP 503: "
                "loading the model); try again in a moment",
                info.code,
                details,
            )
        return info
