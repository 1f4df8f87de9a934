"""Ollama over its native API (``/api/chat``, ``/api/tags``, ``/api/embed`` …): ``LocalProvider``.

Streams are NDJSON; every request goes through one :class:`~ollm_lite.http.transport.Transport`
(timeouts, retries before the first byte, cancellation, status → exception). The pure
request/response mapping lives in :mod:`ollm_lite.providers._ollama_wire`;
:func:`message_to_ollama` / :func:`message_from_ollama` are re-exported here to convert
histories between the library's messages and Ollama's.

Invariants:

* ``chat_stream`` ends with exactly one ``FinishEvent`` or ``ErrorEvent``; text already yielded
  stays valid when an error ends it; a set ``cancel`` ends it with ``FinishEvent("cancelled")``.
* Thinking text (``message.thinking``) arrives as ``ThinkingEvent``, never mixed into the text.
* A turn that carried tool calls finishes with reason ``"tool"`` (Ollama itself says ``stop``).
* The API key (ollama.com) is sent as ``Authorization: Bearer`` and appears nowhere else.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any, ClassVar

from ..config import env_default
from ..errors import BadResponse, Cancelled, ConfigError, ModelNotFound, OllmError
from ..http.policy import RetryPolicy, Timeouts
from ..http.transport import Transport
from ..http.urls import normalize_base_url
from ..streams import NDJSONDecoder
from ..types import (
    ChatResult,
    EmbeddingResult,
    ErrorEvent,
    FinishEvent,
    HealthStatus,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    PullProgress,
)
from ._ollama_wire import (
    ChatStreamState,
    capabilities_from_list,
    chat_body,
    embeddings_from,
    message_from_ollama,
    message_to_ollama,
    model_info_from_show,
    model_info_from_tag,
    parse_ollama_host,
    ps_context_length,
    pull_error,
    pull_progress_from,
)
from .base import BaseProvider, approx_token_count, collect_result

__all__ = ["DEFAULT_BASE_URL", "LocalProvider", "message_from_ollama", "message_to_ollama"]

logger = logging.getLogger(__name__)

DEFAULT_BASE_URL = "http://localhost:11434"
_START_HINT = (
    "Make sure Ollama is running (start Ollama with `ollama serve`) or point OLLAMA_HOST / "
    "--host at it."
)
_MODEL_HINT = "Download it with `ollm-lite models pull {model}` (or `ollama pull {model}`)."
#: Pulls go silent while a large layer is verified; allow long gaps there.
_PULL_IDLE_S = 1800.0


class LocalProvider(BaseProvider):
    """Ollama through its native API.

    Args:
        base_url: Server address. Accepts what ``OLLAMA_HOST`` accepts (``host``,
            ``host:port``, ``:port``, ``0.0.0.0``, ``http(s)://host[:port][/path]``); a trailing
            ``/v1`` or ``/api`` is dropped. Default: ``$OLLAMA_HOST``, else
            ``http://localhost:11434``.
        api_key: Key for ollama.com's hosted API, sent as ``Authorization: Bearer``.
            Default: ``$OLLAMA_API_KEY``, else none (a local server needs none).
        timeout: Idle timeout in seconds, or a :class:`~ollm_lite.http.policy.Timeouts`.
        retries: Retries of failures before the first byte (default 2).
        embed_batch_size: Texts per ``/api/embed`` request (default 100).
        num_ctx: Context window to request for every chat (``options.num_ctx``); also what
            :meth:`context_length` then reports. Default: the server's choice.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a bad URL, batch size or ``num_ctx``.
    """

    name: ClassVar[str] = "local"
    streaming_format: ClassVar[str] = "ndjson"
    capabilities: ProviderCapabilities = ProviderCapabilities(
        streaming=True,
        tool_calling=True,
        model_management=True,
        embeddings=True,
        token_counting=False,
        guided_decoding=False,
        vision=True,
        thinking=True,
    )

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float | Timeouts | None = None,
        retries: int | None = None,
        embed_batch_size: int = 100,
        num_ctx: int | None = None,
    ) -> None:
        raw_url = base_url or env_default(self.name, "base_url") or DEFAULT_BASE_URL
        url = normalize_base_url(parse_ollama_host(raw_url), strip_suffix="/v1")
        if url.endswith("/api"):
            url = url[: -len("/api")]
        if not isinstance(embed_batch_size, int) or embed_batch_size < 1:
            raise ConfigError(
                f"embed_batch_size must be a positive integer, got {embed_batch_size!r}"
            )
        if num_ctx is not None and (not isinstance(num_ctx, int) or num_ctx < 1):
            raise ConfigError(f"num_ctx must be a positive integer, got {num_ctx!r}")
        if retries is not None and retries < 0:
            raise ConfigError(f"retries must be >= 0, got {retries!r}")
        key = api_key if api_key is not None else env_default(self.name, "api_key")
        self.embed_batch_size = embed_batch_size
        self.num_ctx = num_ctx
        self._headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._secrets = [key] if key else []
        self._timeouts = Timeouts.of(timeout)
        self._transport = Transport(
            url,
            provider=self.name,
            headers=self._headers,
            secrets=self._secrets,
            timeouts=self._timeouts,
            retry=RetryPolicy() if retries is None else RetryPolicy(retries=retries),
            start_hint=_START_HINT,
            model_hint=_MODEL_HINT,
        )
        self._pull_transport: Transport | None = None
        self._lock = threading.Lock()
        self._context_cache: dict[str, int | None] = {}
        self._caps_cache: dict[str, ProviderCapabilities] = {}

    def __repr__(self) -> str:
        return f"LocalProvider(name={self.name!r}, base_url={self.base_url!r})"

    @property
    def base_url(self) -> str:
        """The server root every request goes to."""
        return self._transport.base_url

    def close(self) -> None:
        """Close pooled connections (the provider stays usable)."""
        self._transport.close()
        if self._pull_transport is not None:
            self._pull_transport.close()

    # ------------------------------------------------------------------ chat

    def _chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        return chat_body(request, stream=stream, num_ctx=self.num_ctx)

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one answer from ``POST /api/chat``.

        Yields ``TextEvent``/``ThinkingEvent``/``ToolCallEvent`` as they arrive, then exactly
        one ``FinishEvent`` (``stop``, ``length``, ``tool``, ``cancelled``) or ``ErrorEvent``:
        ``MODEL_NOT_FOUND`` (with the ``ollm-lite models pull`` hint), ``CONNECTION_FAILED``
        (naming the URL and how to start Ollama), ``LLM_BAD_RESPONSE`` (an error line
        mid-stream, a stream that ended without ``done``, garbage lines), ``LLM_TIMEOUT``,
        ``LLM_HTTP_ERROR``, ``CONFIG_INVALID`` (a forced tool that is not offered).
        Closing the generator early releases the connection.
        """
        try:
            body = self._chat_body(request, stream=True)
        except OllmError as exc:
            yield ErrorEvent(exc.to_info(), exception=exc)
            return
        logger.debug(
            "local chat_stream model=%s messages=%d tools=%d",
            request.model,
            len(body["messages"]),
            len(body.get("tools") or ()),
        )
        state = ChatStreamState(
            provider=self.name,
            model=request.model,
            url=self.base_url,
            redact=self._transport.redact,
        )
        handle = state.handle
        decoder = NDJSONDecoder()  # skips lines that are not JSON objects, counting them
        try:
            with self._transport.open_stream(
                "POST",
                "/api/chat",
                json_body=body,
                cancel=request.cancel,
                timeout=request.timeout,
                headers=request.headers or None,
                model=request.model,
                not_found="model",
            ) as resp:
                for item in resp.iter_decoded(decoder):
                    events = handle(item)
                    if state.terminal is not None:
                        yield from map(self._transport.redact.event, events)
                        break
                    if events:
                        yield from events
        except Cancelled:
            yield FinishEvent("cancelled")
            return
        except OllmError as exc:
            yield ErrorEvent(exc.to_info(), exception=exc)
            return
        yield self._transport.redact.event(state.end(decoder.skipped))

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One whole answer from ``POST /api/chat`` with ``stream: false``.

        Nothing arrives until the whole answer is generated, so the idle timeout bounds the
        generation itself; prefer :meth:`chat_stream` (or a larger ``timeout``) for long
        answers on slow hardware. A server that streams anyway is folded the same way.

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND``.
            ConnectionFailed: ``CONNECTION_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE`` for an error object or an unfinished answer.
            Cancelled: ``CANCELLED`` when ``request.cancel`` was set.
            OllmError: any other transport failure (``LLM_TIMEOUT``, ``LLM_HTTP_ERROR`` …).
        """
        body = self._chat_body(request, stream=False)
        with self._transport.open_stream(
            "POST",
            "/api/chat",
            json_body=body,
            cancel=request.cancel,
            timeout=request.timeout,
            headers=request.headers or None,
            model=request.model,
            not_found="model",
        ) as resp:
            raw = resp.read_body()
        state = ChatStreamState(
            provider=self.name,
            model=request.model,
            url=self.base_url,
            redact=self._transport.redact,
        )
        events: list[ProviderEvent] = []
        for obj in _answer_objects(raw):
            events += state.handle(obj)
            if state.terminal is not None:
                break
        events.append(state.end())
        return collect_result(list(map(self._transport.redact.event, events)))

    def count_tokens(self, request: ProviderRequest) -> int:
        """Estimated tokens: ceil(characters / 4) (Ollama has no tokenizer endpoint)."""
        return approx_token_count(request)

    # ------------------------------------------------------------------ models

    def list_models(self) -> list[ModelInfo]:
        """Installed models (``GET /api/tags``).

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE`` for an answer without a model list.
        """
        answer = self._transport.request_json("GET", "/api/tags")
        models = answer.get("models") if isinstance(answer, dict) else None
        if models is None and isinstance(answer, dict):
            return []
        if not isinstance(models, list):
            raise BadResponse(
                f"local at {self.base_url}: /api/tags answer has no 'models' list",
                provider=self.name,
            )
        return [model_info_from_tag(m) for m in models]

    def show_model(self, name: str) -> ModelInfo:
        """Details of one model (``POST /api/show``, plus ``GET /api/ps`` when loaded).

        ``context_length`` is the window the server will use (see
        :func:`~ollm_lite.providers._ollama_wire.model_info_from_show`); the result also
        refreshes the :meth:`context_length` and :meth:`model_capabilities` caches.

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` (the message says how to pull it).
            ConnectionFailed: ``CONNECTION_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE``.
        """
        show = self._transport.request_json(
            "POST", "/api/show", json_body={"model": name}, model=name, not_found="model"
        )
        loaded = None if self.num_ctx is not None else self._loaded_context(name)
        info = model_info_from_show(name, show, num_ctx=self.num_ctx, loaded_ctx=loaded)
        caps = capabilities_from_list(show.get("capabilities"), self.capabilities)
        with self._lock:
            self._context_cache[name] = info.context_length
            self._caps_cache[name] = caps
        return info

    def _loaded_context(self, name: str) -> int | None:
        try:
            ps = self._transport.request_json("GET", "/api/ps")
        except OllmError as exc:  # old servers have no /api/ps; the trained maximum remains
            logger.debug("local: /api/ps unavailable (%s)", exc.code)
            return None
        return ps_context_length(ps, name)

    def context_length(self, model: str) -> int | None:
        """The context window the server will use for ``model`` (cached per instance).

        ``num_ctx`` when set; else the loaded window from ``/api/ps``; else the trained
        maximum from ``/api/show``. ``None`` when the server does not say or cannot be asked
        (the failure itself surfaces on the next chat request).
        """
        if self.num_ctx is not None:
            return self.num_ctx
        if model in self._context_cache:
            return self._context_cache[model]
        try:
            return self.show_model(model).context_length
        except OllmError as exc:
            logger.debug("local: no context length for %s (%s)", model, exc.code)
            return None

    def model_capabilities(self, model: str) -> ProviderCapabilities:
        """What ``model`` can do, from ``/api/show``'s ``capabilities`` (cached per instance).

        ``tools`` → ``tool_calling``, ``vision`` → ``vision``, ``thinking`` → ``thinking``;
        those three are ``None`` (unknown) when the server has no list or cannot be asked.
        """
        cached = self._caps_cache.get(model)
        if cached is not None:
            return cached
        try:
            self.show_model(model)
        except OllmError as exc:
            logger.debug("local: no capabilities for %s (%s)", model, exc.code)
            return capabilities_from_list(None, self.capabilities)
        return self._caps_cache[model]

    def pull_model(
        self,
        name: str,
        on_progress: Callable[[PullProgress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        """Download ``name`` (``POST /api/pull``), reporting each progress line.

        Args:
            name: Model name, e.g. ``llama3.2`` or ``qwen3:8b``.
            on_progress: Called with every :class:`PullProgress` (the last has status
                ``success``).
            cancel: Setting it stops the download promptly.

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` when the registry has no such model.
            BadResponse: ``LLM_BAD_RESPONSE`` for another error line or a stream that ended
                before ``success``.
            Cancelled: ``CANCELLED``.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        url = self.base_url
        with self._pull_channel().open_stream(
            "POST",
            "/api/pull",
            json_body={"model": name, "stream": True},
            cancel=cancel,
            model=name,
            not_found="model",
        ) as resp:
            for line in resp.iter_decoded(NDJSONDecoder()):  # only JSON objects come out
                err = line.get("error")
                if err is not None:
                    raise pull_error(
                        self._transport.redact(str(err)), model=name, provider=self.name, url=url
                    )
                progress = pull_progress_from(line)
                if on_progress is not None:
                    on_progress(progress)
                if progress.status == "success":
                    with self._lock:
                        self._context_cache.pop(name, None)
                        self._caps_cache.pop(name, None)
                    return
        raise BadResponse(
            f"the pull of {name!r} from local at {url} ended before it reported success",
            provider=self.name,
            model=name,
        )

    def _pull_channel(self) -> Transport:
        if self._pull_transport is None:
            t = self._timeouts
            self._pull_transport = Transport(
                self.base_url,
                provider=self.name,
                headers=self._headers,
                secrets=self._secrets,
                timeouts=Timeouts(t.connect, max(t.idle, _PULL_IDLE_S), None),
                retry=self._transport.retry,
                start_hint=_START_HINT,
                model_hint=_MODEL_HINT,
            )
        return self._pull_transport

    def delete_model(self, name: str) -> None:
        """Delete an installed model (``DELETE /api/delete``).

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` when no such model is installed.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        try:
            self._transport.request_json(
                "DELETE",
                "/api/delete",
                json_body={"model": name},
                model=name,
                not_found="model",
                allow_empty=True,
            )
        except ModelNotFound as exc:
            raise ModelNotFound(
                f"model {name!r} is not installed on local at {self.base_url}, so there is "
                "nothing to delete. `ollm-lite models list` shows the installed models.",
                status=exc.status,
                provider=self.name,
                model=name,
                details=exc.details,
            ) from exc
        with self._lock:
            self._context_cache.pop(name, None)
            self._caps_cache.pop(name, None)

    # ------------------------------------------------------------------ embeddings

    def embed(self, texts: list[str], model: str | None = None) -> EmbeddingResult:
        """Embedding vectors for ``texts`` (``POST /api/embed``), in input order.

        Texts are sent ``embed_batch_size`` at a time.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when no model is given or a text is not a string.
            ModelNotFound: ``MODEL_NOT_FOUND``.
            BadResponse: ``LLM_BAD_RESPONSE`` for a wrong vector count or mixed dimensions.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        if not model:
            raise ConfigError(
                "embed() needs an embedding model for the local provider, e.g. "
                "model='nomic-embed-text' (install it with `ollm-lite models pull "
                "nomic-embed-text`)"
            )
        given: Any = texts  # callers without type checking pass a bare string
        if isinstance(given, str) or not all(isinstance(t, str) for t in given):
            raise ConfigError("embed() takes a list of strings")
        vectors: list[list[float]] = []
        size = self.embed_batch_size
        for start in range(0, len(texts), size):
            batch = texts[start : start + size]
            answer = self._transport.request_json(
                "POST",
                "/api/embed",
                json_body={"model": model, "input": batch},
                model=model,
                not_found="model",
            )
            vectors.extend(embeddings_from(answer, len(batch), model=model, provider=self.name))
        dims = {len(v) for v in vectors}
        if len(dims) > 1:
            raise BadResponse(
                f"local: model {model!r} returned vectors of different sizes {sorted(dims)}",
                provider=self.name,
                model=model,
            )
        return EmbeddingResult(vectors=vectors, model=model, dimensions=dims.pop() if dims else 0)

    # ------------------------------------------------------------------ health

    def health(self) -> HealthStatus:
        """Whether Ollama answers ``GET /api/version``, with its version; never raises."""
        started = time.perf_counter()
        try:
            with self._transport.open_stream("GET", "/api/version", retry=False) as resp:
                raw = resp.read_body(64 * 1024)
            latency = (time.perf_counter() - started) * 1000
        except OllmError as exc:
            return HealthStatus(
                ok=False,
                provider=self.name,
                base_url=self.base_url,
                checked_at=datetime.now(UTC),
                latency_ms=None,
                error=exc.to_info(),
            )
        return HealthStatus(
            ok=True,
            provider=self.name,
            base_url=self.base_url,
            checked_at=datetime.now(UTC),
            latency_ms=latency,
            version=_version_of(raw),
        )


def _answer_objects(raw: bytes) -> list[Any]:
    """The objects of a non-streamed answer: one JSON object, or NDJSON from a server that
    streamed anyway (some proxies ignore ``stream: false``).

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when it is neither.
    """
    try:
        return [json.loads(raw)]
    except (ValueError, RecursionError):
        pass
    decoder = NDJSONDecoder()
    items: list[Any] = list(decoder.feed(raw))
    items.extend(decoder.flush())
    if not items:
        raise BadResponse(
            "Ollama's answer to POST /api/chat is not JSON"
            + (f" ({decoder.skipped} unreadable line(s))" if decoder.skipped else ""),
            provider="local",
        )
    return items


def _version_of(raw: bytes) -> str | None:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    version = obj.get("version") if isinstance(obj, dict) else None
    return version if isinstance(version, str) else None
