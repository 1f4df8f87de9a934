"""The provider protocol and the pieces every adapter shares.

:class:`ProviderAdapter` is what the chat runtime and the registry program against. Built-in
adapters derive from :class:`BaseProvider`, which answers every optional operation with
:class:`~ollm_lite.errors.UnsupportedOperation` (never ``AttributeError``) and derives the
non-streaming :meth:`chat` from :meth:`chat_stream`. Third-party adapters may do the same or
implement the protocol from scratch.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

from ..errors import BadResponse, Cancelled, ConfigError, UnsupportedOperation, error_from_code
from ..streams import DEFAULT_MAX_LINE
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
    PullProgress,
    Usage,
)
from ..types._event_fold import EventFold
from ..types._finish_reasons import ending_of, result_reason
from ._accepts_keyword import accepts_keyword

__all__ = [
    "merge_body",
    "BaseProvider",
    "ProviderAdapter",
    "approx_token_count",
    "call_with_cancel",
    "collect_result",
    "request_chars",
]


@runtime_checkable
class ProviderAdapter(Protocol):
    """What every provider offers. Optional operations raise ``UnsupportedOperation``.

    The built-in providers also take an optional keyword ``cancel`` (a ``threading.Event``)
    on every method that does I/O; an adapter may too, and the chat runtime passes its cancel
    event only where the method accepts it (:func:`call_with_cancel`).
    """

    # Read-only properties so class-level constants and instance attributes both satisfy it.
    @property
    def name(self) -> str:
        """The canonical provider name (``"local"``, ``"vllm"`` …)."""
        ...

    @property
    def streaming_format(self) -> str:
        """``"ndjson"``, ``"sse"`` or ``"memory"``."""
        ...

    @property
    def capabilities(self) -> ProviderCapabilities:
        """What the provider can do."""
        ...

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one model response; ends with exactly one FinishEvent or ErrorEvent."""
        ...

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One model response, whole. Raises the error a stream would report."""
        ...

    def count_tokens(self, request: ProviderRequest) -> int: ...

    def context_length(self, model: str) -> int | None: ...

    def list_models(self) -> list[ModelInfo]: ...

    def show_model(self, name: str) -> ModelInfo: ...

    def pull_model(
        self,
        name: str,
        on_progress: Callable[[PullProgress], None] | None = None,
        cancel: Any = None,
    ) -> None: ...

    def delete_model(self, name: str) -> None: ...

    def embed(self, texts: list[str], model: str | None = None) -> EmbeddingResult: ...

    def health(self) -> HealthStatus: ...

    def model_capabilities(self, model: str) -> ProviderCapabilities: ...


#: (adapter class, method name) → whether that method takes ``cancel=``.
_TAKES_CANCEL: dict[tuple[type, str], bool] = {}


def call_with_cancel(
    adapter: Any, method_name: str, *args: Any, cancel: threading.Event | None
) -> Any:
    """``adapter.<method_name>(*args, cancel=cancel)`` where that method takes ``cancel``, else
    without it (adapters written before ``cancel=`` existed keep working).

    The signature is read once per adapter class and method (per call for a method set on
    the instance). ``cancel=None`` is never passed: the call is then exactly the plain one.
    """
    method = getattr(adapter, method_name)
    if cancel is None:
        return method(*args)
    cls = type(adapter)
    on_class = any(method_name in vars(base) for base in cls.__mro__)
    if not on_class or method_name in getattr(adapter, "__dict__", ()):
        takes = accepts_keyword(method, "cancel")
    else:
        key = (cls, method_name)
        known = _TAKES_CANCEL.get(key)
        if known is None:
            known = _TAKES_CANCEL[key] = accepts_keyword(method, "cancel")
        takes = known
    return method(*args, cancel=cancel) if takes else method(*args)


def request_chars(request: ProviderRequest) -> int:
    """Characters the model will read: system prompt, message text, tool calls and schemas."""
    total = len(request.system_prompt or "")
    for message in request.messages:
        total += len(message.text)
        for call in message.tool_calls:
            total += len(call.name) + len(call.arguments or json.dumps(call.args))
    for schema in request.tools or ():
        total += len(schema.name) + len(schema.description or "")
        if schema.parameters:
            total += len(json.dumps(schema.parameters, separators=(",", ":")))
    return total


def approx_token_count(request: ProviderRequest) -> int:
    """The fallback estimate used where no tokenizer exists: ceil(characters / 4)."""
    return math.ceil(request_chars(request) / 4)


def collect_result(events: Iterable[ProviderEvent]) -> ChatResult:
    """Fold a provider stream into a :class:`ChatResult` (the same fold as the chat's).

    Raises:
        OllmError: the error an ``ErrorEvent`` carried (same class and code).
        Cancelled: ``CANCELLED`` when the stream finished with reason ``cancelled``.
    """
    fold = EventFold()
    for event in events:
        fold.add(event)
        if isinstance(event, ErrorEvent | FinishEvent):
            break
    folded = fold.result()
    if folded.error is not None:
        raise error_from_code(folded.error)
    if folded.finish is None:
        raise error_from_code(ErrorInfo("the stream ended without a finish", "LLM_BAD_RESPONSE"))
    ending = ending_of(folded.finish)
    if ending == "cancelled":
        raise Cancelled("the request was cancelled")
    calls = folded.tool_calls
    return ChatResult(
        content=folded.text if folded.text or not calls else None,
        finish_reason=result_reason(ending, has_calls=bool(calls)),
        tool_calls=calls,
        usage=folded.usage,
        thinking=folded.thinking or None,
    )


class BaseProvider:
    """Defaults shared by the built-in adapters.

    Subclasses set ``name``, ``streaming_format`` and ``capabilities`` and implement
    :meth:`chat_stream`; everything optional raises ``UnsupportedOperation`` until overridden.
    """

    name: ClassVar[str] = "base"
    streaming_format: ClassVar[str] = "sse"
    capabilities: ProviderCapabilities = ProviderCapabilities()
    #: Texts per embedding request.
    embed_batch_size: int = 64

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        """Stream one model response."""
        raise NotImplementedError

    def chat(self, request: ProviderRequest) -> ChatResult:
        """One model response, whole (built from :meth:`chat_stream`).

        Raises:
            OllmError: with the code the stream's ``ErrorEvent`` carried.
            Cancelled: ``CANCELLED`` when ``request.cancel`` was set.
        """
        stream = self.chat_stream(request)
        try:
            return collect_result(stream)
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()

    def close(self) -> None:
        """Release pooled connections; the provider stays usable (nothing to do here)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unsupported(self, what: str) -> UnsupportedOperation:
        return UnsupportedOperation(
            f"the {self.name} provider does not support {what}", provider=self.name
        )

    def count_tokens(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> int:
        """Tokens the request would use (``UNSUPPORTED_OPERATION`` where no way exists)."""
        raise self._unsupported("token counting")

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        """The model's context window in tokens, or ``None`` when the server does not say."""
        return None

    def list_models(self, *, cancel: threading.Event | None = None) -> list[ModelInfo]:
        """Models the server offers."""
        raise self._unsupported("listing models")

    def show_model(self, name: str, *, cancel: threading.Event | None = None) -> ModelInfo:
        """Details of one model."""
        raise self._unsupported("showing models")

    def pull_model(
        self,
        name: str,
        on_progress: Callable[[PullProgress], None] | None = None,
        cancel: Any = None,
    ) -> None:
        """Download a model."""
        raise self._unsupported("pulling models")

    def delete_model(self, name: str, *, cancel: threading.Event | None = None) -> None:
        """Delete a model."""
        raise self._unsupported("deleting models")

    def embed(
        self,
        texts: list[str],
        model: str | None = None,
        *,
        cancel: threading.Event | None = None,
    ) -> EmbeddingResult:
        """Embedding vectors for ``texts`` in input order, ``embed_batch_size`` per request.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when no model is given (and the provider has no
                default) or a text is not a string.
            ModelNotFound: ``MODEL_NOT_FOUND``.
            BadResponse: ``LLM_BAD_RESPONSE`` for a wrong vector count or mixed dimensions.
            ConnectionFailed: ``CONNECTION_FAILED``.
        """
        name = self._embedding_model(model)
        given: Any = texts  # callers without type checking pass a bare string
        if isinstance(given, str) or not all(isinstance(t, str) for t in given):
            raise ConfigError("embed() takes a list of strings")
        vectors: list[list[float]] = []
        size = self.embed_batch_size
        for start in range(0, len(texts), size):
            vectors += self._embed_batch(texts[start : start + size], name, cancel)
        dims = {len(v) for v in vectors}
        if len(dims) > 1:
            raise BadResponse(
                f"{self.name}: model {name!r} returned vectors of different sizes {sorted(dims)}",
                provider=self.name,
                model=name,
            )
        return EmbeddingResult(vectors=vectors, model=name, dimensions=dims.pop() if dims else 0)

    def _embedding_model(self, model: str | None) -> str:
        """The model to embed with (a provider without embeddings says so here).

        Raises:
            UnsupportedOperation: ``UNSUPPORTED_OPERATION`` unless a subclass embeds.
        """
        raise self._unsupported("embeddings")

    def _embed_batch(
        self, batch: list[str], model: str, cancel: threading.Event | None
    ) -> list[list[float]]:
        """One vector per text of ``batch``."""
        raise self._unsupported("embeddings")

    def health(self, *, cancel: threading.Event | None = None) -> HealthStatus:
        """Whether the server answers; never raises."""
        return HealthStatus(
            ok=True,
            provider=self.name,
            base_url="",
            checked_at=datetime.now(UTC),
            latency_ms=0.0,
        )

    def model_capabilities(
        self, model: str, *, cancel: threading.Event | None = None
    ) -> ProviderCapabilities:
        """What ``model`` can do; the provider's capabilities where the backend does not say."""
        return self.capabilities

    def parallel_slots(self, *, cancel: threading.Event | None = None) -> int | None:
        """Requests the server runs at once, where it says (``None``: it does not).

        A fleet uses it as the endpoint's default limit.
        """
        return None


def usage_from(
    prompt: Any, completion: Any, total: Any = None, extra: Mapping[str, Any] | None = None
) -> Usage:
    """A :class:`Usage` from loosely typed wire numbers (absent or non-int become ``None``).

    ``extra`` is a mapping, not keyword arguments: vendors add usage keys of any name.
    """

    def num(v: Any) -> int | None:
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    p, c, t = num(prompt), num(completion), num(total)
    if t is None and p is not None and c is not None:
        t = p + c
    return Usage(p, c, t, {k: v for k, v in (extra or {}).items() if v is not None})


#: Most tool calls one answer may carry, on every wire (a server can send calls forever).
MAX_TOOL_CALLS = 1024
#: Longest tool-call ``arguments`` text, on every wire: the line limit of the stream decoders
#: (one NDJSON line or SSE event carries a whole Ollama or Gemini call).
MAX_TOOL_ARGUMENTS = DEFAULT_MAX_LINE


def system_first(
    system_prompt: str | None, messages: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """A wire's ``messages`` list: ``system_prompt`` (when given) as the first message."""
    out = [{"role": "system", "content": system_prompt}] if system_prompt else []
    out.extend(messages)
    return out


def merge_body(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    """``extra`` merged over ``base``: nested objects merge key by key, anything else replaces.

    How every provider applies ``GenerationOptions.extra_body`` to its request body.
    """
    out = dict(base)
    for key, value in extra.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            out[key] = merge_body(old, value)
        else:
            out[key] = value
    return out
