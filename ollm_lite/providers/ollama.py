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
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from ..config import env_default
from ..errors import BadResponse, ConfigError, ModelNotFound, OllmError, check_positive_int
from ..http.policy import Timeouts
from ..http.transport import Transport
from ..http.urls import normalize_base_url
from ..streams import NDJSONDecoder
from ..types import (
    ChatResult,
    ModelInfo,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    PullProgress,
)
from ._http import HTTPProvider, time_limits, version_of
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
from .base import approx_token_count

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


class LocalProvider(HTTPProvider):
    """Ollama through its native API.

    Args:
        base_url: Server address. Accepts what ``OLLAMA_HOST`` accepts (``host``,
            ``host:port``, ``:port``, ``0.0.0.0``, ``http(s)://host[:port][/path]``); a trailing
            ``/v1`` or ``/api`` is dropped. Default: ``$OLLAMA_HOST``, else
            ``http://localhost:11434``.
        api_key: Key for ollama.com's hosted API, sent as ``Authorization: Bearer``.
            Default: ``$OLLAMA_API_KEY``, else none (a local server needs none).
        idle_timeout: Longest wait in seconds for the server's next bytes: for an answer to
            begin and, while it streams, between pieces of content (default 120; connecting
            waits at most 5 s, or this if less). Not a deadline for a whole answer: a call's
            ``timeout=`` is that.
        timeout: The older name of ``idle_timeout`` (the same number), or a
            :class:`~ollm_lite.http.policy.Timeouts` (connect, idle and total limits). Given
            with an ``idle_timeout`` that differs: ``CONFIG_INVALID``.
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
        idle_timeout: float | None = None,
        timeout: float | Timeouts | None = None,
        retries: int | None = None,
        embed_batch_size: int = 100,
        num_ctx: int | None = None,
    ) -> None:
        raw_url = base_url or env_default(self.name, "base_url") or DEFAULT_BASE_URL
        url = normalize_base_url(parse_ollama_host(raw_url), strip_suffix="/v1")
        if url.endswith("/api"):
            url = url[: -len("/api")]
        check_positive_int("embed_batch_size", embed_batch_size)
        check_positive_int("num_ctx", num_ctx, optional=True)
        key = api_key if api_key is not None else env_default(self.name, "api_key")
        self.embed_batch_size = embed_batch_size
        self.num_ctx = num_ctx
        self._connect(
            url,
            headers={"Authorization": f"Bearer {key}"} if key else {},
            secret=key,
            timeout=time_limits(timeout, idle_timeout),
            retries=retries,
            start_hint=_START_HINT,
            model_hint=_MODEL_HINT,
        )
        self._pull_transport: Transport | None = None
        self._context_cache: dict[str, int | None] = {}
        self._caps_cache: dict[str, ProviderCapabilities] = {}

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
        decoder = NDJSONDecoder()  # skips lines that are not JSON objects, counting them
        state = self._state(request, lambda: decoder.skipped)
        return self._stream(request, "/api/chat", decoder, state)

    def _state(
        self, request: ProviderRequest, skipped: Callable[[], int] | None = None
    ) -> ChatStreamState:
        return ChatStreamState(
            provider=self.name,
            model=request.model,
            url=self.base_url,
            redact=self._redact_for(request),
            skipped=skipped,
        )

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
        raw = self._post_whole(request, "/api/chat", self._chat_body(request, stream=False))
        return self._fold(self._state(request), _answer_objects(raw))

    def count_tokens(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> int:
        """Estimated tokens: ceil(characters / 4) (Ollama has no tokenizer endpoint)."""
        return approx_token_count(request)

    # ------------------------------------------------------------------ models

    def list_models(self, *, cancel: threading.Event | None = None) -> list[ModelInfo]:
        """Installed models (``GET /api/tags``).

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE`` for an answer without a model list.
        """
        answer = self._json("GET", "/api/tags", cancel=cancel)
        models = answer.get("models") if isinstance(answer, dict) else None
        if models is None and isinstance(answer, dict):
            return []
        if not isinstance(models, list):
            raise self._bad_response("/api/tags answer has no 'models' list")
        return [model_info_from_tag(m) for m in models]

    def show_model(self, name: str, *, cancel: threading.Event | None = None) -> ModelInfo:
        """Details of one model (``POST /api/show``, plus ``GET /api/ps`` when loaded).

        ``context_length`` is the window the server will really use: the provider's ``num_ctx``
        when set, else the loaded model's window from ``/api/ps``, else the trained maximum;
        ``details["context_length_source"]`` says which (``"num_ctx"``, ``"loaded"``,
        ``"trained"``) and ``details["trained_context_length"]`` keeps the maximum. The result also
        refreshes the :meth:`context_length` and :meth:`model_capabilities` caches.

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` (the message says how to pull it).
            ConnectionFailed: ``CONNECTION_FAILED``.
            BadResponse: ``LLM_BAD_RESPONSE``.
        """
        show = self._json("POST", "/api/show", body={"model": name}, cancel=cancel, model=name)
        loaded = None if self.num_ctx is not None else self._loaded_context(name, cancel)
        info = model_info_from_show(name, show, num_ctx=self.num_ctx, loaded_ctx=loaded)
        caps = capabilities_from_list(show.get("capabilities"), self.capabilities)
        with self._lock:
            self._context_cache[name] = info.context_length
            self._caps_cache[name] = caps
        return info

    def _loaded_context(self, name: str, cancel: threading.Event | None) -> int | None:
        try:
            ps = self._json("GET", "/api/ps", cancel=cancel)
        except OllmError as exc:  # old servers have no /api/ps; the trained maximum remains
            logger.debug("local: /api/ps unavailable (%s)", exc.code)
            return None
        return ps_context_length(ps, name)

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        """The context window the server will use for ``model`` (cached per instance).

        ``num_ctx`` when set; else the loaded window from ``/api/ps``; else the trained
        maximum from ``/api/show``. ``None`` when the server does not say or cannot be asked
        (the failure itself surfaces on the next chat request).
        """
        if self.num_ctx is not None:
            return self.num_ctx
        if model in self._context_cache:
            return self._context_cache[model]
        return self._shown_context(model, cancel)

    def model_capabilities(
        self, model: str, *, cancel: threading.Event | None = None
    ) -> ProviderCapabilities:
        """What ``model`` can do, from ``/api/show``'s ``capabilities`` (cached per instance).

        ``tools`` → ``tool_calling``, ``vision`` → ``vision``, ``thinking`` → ``thinking``;
        those three are ``None`` (unknown) when the server has no list or cannot be asked.
        """
        cached = self._caps_cache.get(model)
        if cached is not None:
            return cached

        def shown() -> ProviderCapabilities:
            self.show_model(model, cancel=cancel)  # fills the cache
            return self._caps_cache[model]

        unknown = capabilities_from_list(None, self.capabilities)
        return self._quietly("capabilities", model, shown, unknown)

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
            t = self._transport.timeouts
            self._pull_transport = self._open_transport(
                Timeouts(t.connect, max(t.idle, _PULL_IDLE_S), None)
            )
        return self._pull_transport

    def delete_model(self, name: str, *, cancel: threading.Event | None = None) -> None:
        """Delete an installed model (``DELETE /api/delete``).

        Raises:
            ModelNotFound: ``MODEL_NOT_FOUND`` when no such model is installed.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        try:
            body = {"model": name}
            self._json(
                "DELETE", "/api/delete", body=body, cancel=cancel, model=name, allow_empty=True
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

    def _embedding_model(self, model: str | None) -> str:
        if not model:
            raise ConfigError(
                "embed() needs an embedding model for the local provider, e.g. "
                "model='nomic-embed-text' (install it with `ollm-lite models pull "
                "nomic-embed-text`)"
            )
        return model

    def _embed_batch(
        self, batch: list[str], model: str, cancel: threading.Event | None
    ) -> list[list[float]]:
        """``POST /api/embed``."""
        body = {"model": model, "input": batch}
        answer = self._json("POST", "/api/embed", body=body, cancel=cancel, model=model)
        return embeddings_from(answer, len(batch), model=model, provider=self.name)

    # ------------------------------------------------------------------ health

    def _probe(self, cancel: threading.Event | None) -> str | None:
        """``GET /api/version`` (:meth:`health`)."""
        return version_of(self._get_raw("/api/version", cancel, 64 * 1024))


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
