"""Servers that speak OpenAI's Chat Completions API: ``OpenAICompatibleProvider``.

One provider for LM Studio, LocalAI, KoboldCpp, llama.cpp's ``llama-server``,
llama-cpp-python's server and any other ``/v1/chat/completions`` server, chosen with
``backend=``. Everything that differs between them (auth headers, default port, tokenizer
endpoint, where the context length comes from, stream quirks) is read from the one table in
:mod:`~ollm_lite.providers.backends`; the pure wire mapping lives in
:mod:`~ollm_lite.providers._openai_wire`. :class:`~ollm_lite.providers.vllm.VllmProvider` is a
thin configuration of this class.

The ``llamacpp`` preset works against both llama.cpp servers and finds out which one it talks
to once per provider instance (thread safe, never configured by hand): ``GET /props`` answers on
the native ``llama-server`` (exact prompt counts through ``/v1/chat/completions/input_tokens``
or ``/tokenize``, the running window from ``/props``), ``POST /extras/tokenize/count`` on
llama-cpp-python's server (its count; the window only where ``/v1/models`` reports it).

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
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, ClassVar, Literal

from ..errors import (
    BadResponse,
    Cancelled,
    ConfigError,
    HTTPStatusError,
    ModelNotFound,
    OllmError,
)
from ..streams import SSEDecoder
from ..transport import RetryPolicy, Timeouts, Transport, normalize_base_url
from ..types import (
    ChatResult,
    EmbeddingResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    HealthStatus,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
)
from ._openai_wire import (
    ChatStreamState,
    chat_body,
    embeddings_from,
    messages_to_openai,
    model_info_from_openai,
    result_from_answer,
    tools_to_openai,
)
from .backends import OPENAI_COMPATIBLE_BACKENDS, Backend, backend_named
from .base import BaseProvider, approx_token_count, collect_result, env_api_key

__all__ = ["OpenAICompatibleProvider", "request_text"]

logger = logging.getLogger(__name__)

_CHAT_PATH = "/v1/chat/completions"
#: Statuses meaning "this server has no such route" (as opposed to "it failed").
_NO_ROUTE = frozenset({404, 405, 501})


def request_text(request: ProviderRequest) -> str:
    """The text a tokenizer endpoint should count for ``request``.

    The system prompt, every message's text, tool calls (name and arguments) and tool schemas,
    one per line: the same material :func:`~ollm_lite.providers.base.approx_token_count`
    measures.
    """
    pieces: list[str] = [request.system_prompt] if request.system_prompt else []
    for message in request.messages:
        if message.text:
            pieces.append(message.text)
        for call in message.tool_calls:
            pieces.append(call.name)
            pieces.append(call.arguments or json.dumps(call.args))
    for schema in request.tools or ():
        pieces.append(schema.name)
        if schema.description:
            pieces.append(schema.description)
        if schema.parameters:
            pieces.append(json.dumps(schema.parameters, separators=(",", ":")))
    return "\n".join(pieces)


@dataclass(slots=True)
class _LlamaCpp:
    """What a llama.cpp-family server turned out to be (discovered once per instance)."""

    flavour: Literal["native", "python", "other"]
    """``native`` llama-server, llama-cpp-python's ``python`` server, or ``other``."""
    props: dict[str, Any] | None = None
    """The native server's ``GET /props`` answer."""
    input_tokens: bool | None = None
    """Whether ``/v1/chat/completions/input_tokens`` exists (native; ``None``: not tried)."""


def _is_no_route(exc: OllmError) -> bool:
    return isinstance(exc, HTTPStatusError) and exc.status in _NO_ROUTE


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


class OpenAICompatibleProvider(BaseProvider):
    """Any OpenAI-compatible chat server, with per-backend presets.

    Args:
        base_url: Server root, with or without ``/v1``. Default: ``$OPENAI_COMPATIBLE_HOST``,
            else the backend's usual address (``http://localhost:1234`` for ``generic`` and
            ``lmstudio``, ``:8080`` for ``llamacpp`` and ``localai``, ``:5001`` for ``kobold``).
        api_key: Key sent in the backend's auth headers (``Authorization: Bearer``; LM Studio
            also gets ``X-API-Key``). Default: ``$OPENAI_COMPATIBLE_API_KEY``, else none.
        backend: One of ``lmstudio``, ``localai``, ``kobold``, ``llamacpp``, ``generic``.
        timeout: Idle timeout in seconds, or a :class:`~ollm_lite.transport.Timeouts`.
        retries: Retries of failures before the first byte (default 2).
        embed_batch_size: Texts per ``/v1/embeddings`` request (default 64).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unknown backend (the message names the valid
            ones), a bad URL, ``retries`` or ``embed_batch_size``.
    """

    name: ClassVar[str] = "openai-compatible"
    streaming_format: ClassVar[str] = "sse"
    _host_env: ClassVar[str] = "OPENAI_COMPATIBLE_HOST"
    _key_env: ClassVar[str] = "OPENAI_COMPATIBLE_API_KEY"
    _backends: ClassVar[tuple[str, ...]] = OPENAI_COMPATIBLE_BACKENDS

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        backend: str = "generic",
        timeout: float | Timeouts | None = None,
        retries: int | None = None,
        embed_batch_size: int = 64,
    ) -> None:
        self._configure(
            backend_named(backend, allowed=self._backends),
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
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
        if not isinstance(embed_batch_size, int) or embed_batch_size < 1:
            raise ConfigError(
                f"embed_batch_size must be a positive integer, got {embed_batch_size!r}"
            )
        if retries is not None and (not isinstance(retries, int) or retries < 0):
            raise ConfigError(f"retries must be an integer >= 0, got {retries!r}")
        raw_url = base_url or os.environ.get(self._host_env) or backend.default_base_url
        url = normalize_base_url(raw_url, strip_suffix="/v1")
        key = api_key if api_key is not None else env_api_key(self._key_env)
        self.backend: Backend = backend
        self.embed_batch_size = embed_batch_size
        self.capabilities = ProviderCapabilities(
            streaming=True,
            tool_calling=backend.tool_calling,
            model_management=False,
            embeddings=backend.embeddings,
            token_counting=backend.tokenizer is not None,
            guided_decoding=backend.guided_decoding,
            vision=None,
            thinking=backend.thinking,
        )
        self._transport = Transport(
            url,
            provider=self.name,
            headers=backend.auth(key),
            secrets=[key] if key else [],
            timeouts=Timeouts.of(timeout),
            retry=RetryPolicy() if retries is None else RetryPolicy(retries=retries),
            start_hint=(
                f"Make sure the {backend.title.removesuffix(' server')} server is running and "
                f"reachable at this address (or set base_url / ${self._host_env})."
            ),
            model_hint="Check the model name against `ollm-lite models list`.",
        )
        self._lock = threading.Lock()
        self._llamacpp: _LlamaCpp | None = None
        self._context_cache: dict[str, int | None] = {}

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(name={self.name!r}, backend={self.backend.name!r}, "
            f"base_url={self.base_url!r})"
        )

    @property
    def base_url(self) -> str:
        """The server root every request goes to (without ``/v1``)."""
        return self._transport.base_url

    def close(self) -> None:
        """Close pooled connections (the provider stays usable)."""
        self._transport.close()

    # ------------------------------------------------------------------ chat

    def _chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        """The request body; subclasses add their backend's extras here."""
        return chat_body(request, self.backend, stream=stream)

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
        try:
            body = self._chat_body(request, stream=True)
        except OllmError as exc:
            yield ErrorEvent(exc.to_info(), exception=exc)
            return
        logger.debug(
            "%s chat_stream backend=%s model=%s messages=%d tools=%d",
            self.name,
            self.backend.name,
            request.model,
            len(body.get("messages") or ()),
            len(body.get("tools") or ()),
        )
        state = ChatStreamState(
            provider=self.name,
            model=request.model,
            url=self.base_url,
            redact=self._transport.redact,
        )
        handle = state.handle
        try:
            with self._transport.open_stream(
                "POST",
                _CHAT_PATH,
                json_body=body,
                cancel=request.cancel,
                timeout=request.timeout,
                headers=request.headers or None,
                model=request.model,
                not_found="model",
            ) as resp:
                for event in resp.iter_decoded(SSEDecoder()):
                    data = event.data
                    if event.event == "error":  # some servers name the event, not the object
                        data = _error_payload(data)
                    out = handle(data)
                    if state.terminal is not None:
                        yield from map(self._transport.redact.event, out)
                        break
                    if out:
                        yield from out
        except Cancelled:
            if state.terminal is None:
                yield FinishEvent("cancelled")
            return
        except OllmError as exc:
            if state.terminal is None:
                yield ErrorEvent(exc.to_info(), exception=exc)
            return
        events, terminal = state.end()
        yield from events
        yield self._transport.redact.event(terminal)

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
        body = self._chat_body(request, stream=False)
        with self._transport.open_stream(
            "POST",
            _CHAT_PATH,
            json_body=body,
            cancel=request.cancel,
            timeout=request.timeout,
            headers=request.headers or None,
            model=request.model,
            not_found="model",
        ) as resp:
            raw = resp.read_body()
        info: dict[str, Any] = {"provider": self.name, "model": request.model}
        if raw.lstrip().startswith(b"data:"):  # streamed although stream=false was asked
            state = ChatStreamState(
                provider=self.name,
                model=request.model,
                url=self.base_url,
                redact=self._transport.redact,
            )
            events: list[ProviderEvent] = []
            decoder = SSEDecoder()
            for event in [*decoder.feed(raw), *decoder.flush()]:
                data = _error_payload(event.data) if event.event == "error" else event.data
                events.extend(state.handle(data))
                if state.terminal is not None:
                    break
            tail, terminal = state.end()
            redact_event = self._transport.redact.event
            return collect_result([redact_event(e) for e in (*events, *tail, terminal)])
        try:
            answer = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise BadResponse(
                f"{self.name} at {self.base_url} sent a chat answer that is not JSON", **info
            ) from exc
        try:
            return result_from_answer(answer, redact=self._transport.redact)
        except BadResponse as exc:
            redact = self._transport.redact
            raise BadResponse(
                redact(f"{self.name} at {self.base_url}: {exc.message}"),
                details=redact.obj(exc.details),
                **info,
            ) from exc

    # ------------------------------------------------------------------ tokens

    def count_tokens(self, request: ProviderRequest) -> int:
        """Tokens ``request`` uses, through the backend's tokenizer endpoint where it has one.

        llama.cpp's native server counts the whole templated prompt
        (``/v1/chat/completions/input_tokens``, else ``/tokenize`` over the text);
        llama-cpp-python uses ``/extras/tokenize/count``; KoboldCpp ``/api/extra/tokencount``;
        vLLM ``/tokenize``. Backends without a tokenizer (``capabilities.token_counting`` is
        false) get the estimate ceil(characters / 4).

        Raises:
            UnsupportedOperation: ``UNSUPPORTED_OPERATION`` when the ``llamacpp`` preset found
                no tokenizer on the server (callers such as ``TokenCounter`` then estimate).
            ConnectionFailed, HTTPStatusError, BadResponse: when the tokenizer call fails.
        """
        kind = self.backend.tokenizer
        if kind is None:
            return approx_token_count(request)
        if kind == "llamacpp":
            return self._llamacpp_count(request)
        if kind == "kobold":
            answer = self._transport.request_json(
                "POST", "/api/extra/tokencount", json_body={"prompt": request_text(request)}
            )
            return self._count_from(answer, "value", "/api/extra/tokencount")
        return self._vllm_count(request)

    def _count_from(self, answer: Any, key: str, path: str) -> int:
        value = answer.get(key) if isinstance(answer, dict) else None
        if key == "tokens" and isinstance(value, list):
            return len(value)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise BadResponse(
            f"{self.name} at {self.base_url}: {path} answered without a token count",
            provider=self.name,
        )

    def _vllm_count(self, request: ProviderRequest) -> int:
        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages_to_openai(request.messages, request.system_prompt),
        }
        if request.tools:
            body["tools"] = tools_to_openai(request.tools)
        answer = self._transport.request_json(
            "POST", "/tokenize", json_body=body, model=request.model, not_found="model"
        )
        return self._count_from(answer, "count", "/tokenize")

    def _llamacpp_count(self, request: ProviderRequest) -> int:
        found = self._discover()
        if found.flavour == "python":
            answer = self._transport.request_json(
                "POST", "/extras/tokenize/count", json_body={"input": request_text(request)}
            )
            return self._count_from(answer, "count", "/extras/tokenize/count")
        if found.flavour == "native":
            if found.input_tokens is not False:
                try:
                    body = chat_body(request, self.backend, stream=False, extend_extra=False)
                    answer = self._transport.request_json(
                        "POST", _CHAT_PATH + "/input_tokens", json_body=body
                    )
                except OllmError as exc:
                    if not _is_no_route(exc):
                        raise
                    found.input_tokens = False  # an older build: count the text instead
                else:
                    found.input_tokens = True
                    return self._count_from(answer, "input_tokens", "input_tokens")
            answer = self._transport.request_json(
                "POST",
                "/tokenize",
                json_body={"content": request_text(request), "add_special": True},
            )
            return self._count_from(answer, "tokens", "/tokenize")
        raise self._unsupported(
            f"token counting at {self.base_url} (no /props, /tokenize or /extras/tokenize)"
        )

    def _discover(self) -> _LlamaCpp:
        """Which llama.cpp server answers, found once per instance (thread safe).

        A server that is still loading (503) or unreachable is not remembered: the error
        propagates and the next call asks again.
        """
        found = self._llamacpp
        if found is not None:
            return found
        with self._lock:
            if self._llamacpp is not None:
                return self._llamacpp
            try:
                props = self._transport.request_json("GET", "/props")
            except OllmError as exc:
                if not _is_no_route(exc):
                    raise
                props = None
            if isinstance(props, dict):
                found = _LlamaCpp("native", props)
            else:
                try:
                    self._transport.request_json(
                        "POST", "/extras/tokenize/count", json_body={"input": ""}
                    )
                except OllmError as exc:
                    if not _is_no_route(exc):
                        raise
                    found = _LlamaCpp("other")
                else:
                    found = _LlamaCpp("python")
            logger.debug("%s at %s: llama.cpp flavour %s", self.name, self.base_url, found.flavour)
            if found.flavour == "other":
                self.capabilities = _with(self.capabilities, token_counting=False)
            self._llamacpp = found
            return found

    # ------------------------------------------------------------------ models

    def list_models(self) -> list[ModelInfo]:
        """Models the server offers (``GET /v1/models``).

        A server without that route gives an empty list (the reason is logged at INFO).
        For the native llama.cpp server, ``context_length`` is the running window.

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED``.
            AuthenticationError: ``LLM_AUTH_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE`` for an answer without a model list.
        """
        try:
            answer = self._transport.request_json("GET", "/v1/models")
        except OllmError as exc:
            if _is_no_route(exc) or isinstance(exc, BadResponse):
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
            raise BadResponse(
                f"{self.name} at {self.base_url}: /v1/models answer has no 'data' list",
                provider=self.name,
            )
        models = [model_info_from_openai(entry) for entry in data]
        if self.backend.context_source == "llamacpp":
            window = self._props_window()
            for info in models:
                if window is not None:
                    info.context_length = window
                    info.details["context_length_source"] = "props.n_ctx"
        return models

    def show_model(self, name: str) -> ModelInfo:
        """One model from ``GET /v1/models`` (``context_length`` from :meth:`context_length`).

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` when the server does not list it.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        for info in self.list_models():
            if info.name == name:
                if info.context_length is None:
                    info.context_length = self.context_length(name)
                return info
        raise ModelNotFound(
            f"model {name!r} is not listed by {self.name} at {self.base_url}",
            provider=self.name,
            model=name,
        )

    def parallel_slots(self) -> int | None:
        """Requests the server runs at once: llama.cpp's ``GET /props`` ``total_slots``
        (its ``-np``), for the backends whose context comes from ``/props``; else ``None``.

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED`` when the server cannot be reached.
        """
        if self.backend.context_source != "llamacpp":
            return None
        return _int((self._discover().props or {}).get("total_slots"))

    def _props_window(self) -> int | None:
        try:
            found = self._discover()
        except OllmError as exc:
            logger.debug("%s: llama.cpp discovery failed (%s)", self.name, exc.code)
            return None
        settings = (found.props or {}).get("default_generation_settings")
        return _int(settings.get("n_ctx")) if isinstance(settings, dict) else None

    def context_length(self, model: str) -> int | None:
        """The context window the server runs ``model`` with, or ``None`` when it does not say.

        vLLM: ``max_model_len`` from ``/v1/models``. llama.cpp native: ``/props``
        ``default_generation_settings.n_ctx`` (the ``-c`` it runs with, not the trained
        maximum); llama-cpp-python: ``/v1/models`` ``meta.n_ctx`` where present. LM Studio: the
        loaded instance's window. KoboldCpp: ``/api/extra/true_max_context_length``. Others:
        ``None``. Answers are cached per instance; failures are not (``None`` this time).
        """
        source = self.backend.context_source
        if source is None:
            return None
        if model in self._context_cache:
            return self._context_cache[model]
        try:
            value = self._ask_context(source, model)
        except OllmError as exc:
            logger.debug("%s: no context length for %s (%s)", self.name, model, exc.code)
            return None
        with self._lock:
            self._context_cache[model] = value
        return value

    def _ask_context(self, source: str, model: str) -> int | None:
        if source == "llamacpp":
            window = self._props_window()
            if window is not None:
                return window
            if self._llamacpp is None:  # discovery failed: do not remember a guess
                raise BadResponse("llama.cpp discovery failed")
            return self._listed_context(model)
        if source == "vllm":
            return self._listed_context(model)
        if source == "kobold":
            answer = self._transport.request_json("GET", "/api/extra/true_max_context_length")
            return _int(answer.get("value")) if isinstance(answer, dict) else None
        return self._lmstudio_context(model)

    def _listed_context(self, model: str) -> int | None:
        """``/v1/models``' window for ``model`` (a LoRA adapter inherits its parent's)."""
        models = {m.name: m for m in self.list_models()}
        info = models.get(model)
        if info is None and len(models) == 1:
            info = next(iter(models.values()))  # single-model servers answer any name
        if info is None:
            return None
        if info.context_length is None and isinstance(info.details.get("parent"), str):
            parent = models.get(info.details["parent"])
            return parent.context_length if parent is not None else None
        return info.context_length

    def _lmstudio_entry(self, model: str) -> dict[str, Any] | None:
        answer = self._transport.request_json("GET", "/api/v1/models")
        entries = answer.get("models") if isinstance(answer, dict) else None
        for entry in entries or ():
            if isinstance(entry, dict) and model in (entry.get("key"), entry.get("id")):
                return entry
        return None

    def _lmstudio_context(self, model: str) -> int | None:
        """The loaded window (LM Studio 0.4+ ``/api/v1/models``, else ``/api/v0/models``)."""
        try:
            entry = self._lmstudio_entry(model)
        except OllmError as exc:
            if not _is_no_route(exc):
                raise
            answer = self._transport.request_json("GET", f"/api/v0/models/{model}")
            return _int(answer.get("loaded_context_length")) if isinstance(answer, dict) else None
        for instance in (entry or {}).get("loaded_instances") or ():
            config = instance.get("config") if isinstance(instance, dict) else None
            if isinstance(config, dict) and _int(config.get("context_length")):
                return int(config["context_length"])
        return None

    def model_capabilities(self, model: str) -> ProviderCapabilities:
        """What ``model`` can do where the server says (else the provider's capabilities).

        llama.cpp native: the chat template's tool support and the vision modality from
        ``/props``; LM Studio 0.4+: ``capabilities`` of ``/api/v1/models``. Never raises.
        """
        base = self.capabilities
        try:
            if self.backend.context_source == "llamacpp":
                found = self._discover()
                base = self.capabilities
                props = found.props or {}
                caps = props.get("chat_template_caps")
                modalities = props.get("modalities")
                tools = caps.get("supports_tool_calls") if isinstance(caps, dict) else None
                vision = modalities.get("vision") if isinstance(modalities, dict) else None
                return _with(
                    base,
                    tool_calling=tools if isinstance(tools, bool) else base.tool_calling,
                    vision=vision if isinstance(vision, bool) else base.vision,
                )
            if self.backend.context_source == "lmstudio":
                entry = self._lmstudio_entry(model)
                caps = (entry or {}).get("capabilities")
                if isinstance(caps, dict):
                    return _with(
                        base,
                        tool_calling=_bool_or(caps.get("trained_for_tool_use"), base.tool_calling),
                        vision=_bool_or(caps.get("vision"), base.vision),
                        thinking=_bool_or(caps.get("reasoning"), base.thinking),
                    )
        except OllmError as exc:
            logger.debug("%s: no capabilities for %s (%s)", self.name, model, exc.code)
        return base

    # ------------------------------------------------------------------ embeddings

    def embed(self, texts: list[str], model: str | None = None) -> EmbeddingResult:
        """Embedding vectors for ``texts`` (``POST /v1/embeddings``), in input order.

        Texts are sent ``embed_batch_size`` at a time.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when no model is given or a text is not a string.
            ModelNotFound: ``MODEL_NOT_FOUND``.
            BadResponse: ``LLM_BAD_RESPONSE`` for a wrong vector count or mixed dimensions.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        if not model:
            raise ConfigError(f"embed() needs an embedding model name for {self.name}")
        given: Any = texts
        if isinstance(given, str) or not all(isinstance(t, str) for t in given):
            raise ConfigError("embed() takes a list of strings")
        vectors: list[list[float]] = []
        size = self.embed_batch_size
        for start in range(0, len(texts), size):
            batch = texts[start : start + size]
            answer = self._transport.request_json(
                "POST",
                "/v1/embeddings",
                json_body={"model": model, "input": batch},
                model=model,
                not_found="model",
            )
            try:
                vectors.extend(embeddings_from(answer, len(batch), model=model))
            except BadResponse as exc:
                raise BadResponse(exc.message, provider=self.name, model=model) from exc
        dims = {len(v) for v in vectors}
        if len(dims) > 1:
            raise BadResponse(
                f"{self.name}: model {model!r} returned vectors of different sizes {sorted(dims)}",
                provider=self.name,
                model=model,
            )
        return EmbeddingResult(vectors=vectors, model=model, dimensions=dims.pop() if dims else 0)

    # ------------------------------------------------------------------ health

    def health(self) -> HealthStatus:
        """Whether the server answers, and its version where it says; never raises.

        Asks the backend's health route (llama.cpp and vLLM ``/health``, KoboldCpp
        ``/api/extra/version``, else ``/v1/models``). A llama.cpp server still loading its model
        (503) is reported as not ok with ``details["loading"] = True``, unlike one that is down
        (``CONNECTION_FAILED``).
        """
        started = time.perf_counter()
        path = self.backend.health_path
        try:
            try:
                raw = self._get_raw(path)
            except OllmError as exc:
                if not (_is_no_route(exc) and path != "/v1/models"):
                    raise
                raw = self._get_raw("/v1/models")  # llama-cpp-python has no /health
            latency = (time.perf_counter() - started) * 1000
        except OllmError as exc:
            return self._health(False, None, error=self._health_error(exc))
        version = _version_of(raw) if path == self.backend.version_path else None
        if version is None and self.backend.version_path and path != self.backend.version_path:
            try:
                version = _version_of(self._get_raw(self.backend.version_path))
            except OllmError:
                version = None
        return self._health(True, latency, version=version)

    def _get_raw(self, path: str) -> bytes:
        with self._transport.open_stream("GET", path, retry=False) as resp:
            return resp.read_body(256 * 1024)

    def _health(
        self,
        ok: bool,
        latency: float | None,
        *,
        version: str | None = None,
        error: ErrorInfo | None = None,
    ) -> HealthStatus:
        return HealthStatus(
            ok=ok,
            provider=self.name,
            base_url=self.base_url,
            checked_at=datetime.now(UTC),
            latency_ms=latency,
            version=version,
            error=error,
        )

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


def _version_of(raw: bytes) -> str | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    version = obj.get("version") if isinstance(obj, dict) else None
    return version if isinstance(version, str) else None


def _bool_or(value: Any, default: bool | None) -> bool | None:
    return value if isinstance(value, bool) else default


def _with(caps: ProviderCapabilities, **changes: Any) -> ProviderCapabilities:
    return replace(caps, **changes)


def _error_payload(data: str) -> str:
    """An ``event: error`` payload as ``{"error": ...}`` JSON, whatever the server sent."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        value = data
    if isinstance(value, dict) and "error" in value:
        return data
    return json.dumps({"error": value})
