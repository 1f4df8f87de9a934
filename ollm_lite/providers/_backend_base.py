"""The base of the backend strategies: :class:`Backend`, and what a backend may ask of its
provider (:class:`BackendHost`). The table of backends is :mod:`~ollm_lite.providers.backends`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from ..errors import BadResponse, HTTPStatusError, OllmError

if TYPE_CHECKING:
    from ..types import ModelInfo, ProviderCapabilities, ProviderRequest
    from ._http import HTTPProvider

__all__ = [
    "Backend",
    "Question",
    "is_no_route",
    "listed_context",
    "positive_int",
    "request_text",
    "token_count",
]

#: How the key is sent: a header name, and whether its value gets the ``Bearer `` prefix.
AuthHeader = tuple[str, bool]

_BEARER: AuthHeader = ("Authorization", True)
#: Statuses meaning "this server has no such route" (as opposed to "it failed").
_NO_ROUTE = frozenset({404, 405, 501})

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Question:
    """One question of a provider to its backend: the provider, and the caller's cancel event
    (every request made for the answer obeys it)."""

    host: HTTPProvider
    cancel: threading.Event | None = None

    @property
    def where(self) -> str:
        """``<provider> at <base_url>``, for messages."""
        return f"{self.host.name} at {self.host.base_url}"

    def json(self, method: str, path: str, *, body: Any = None, model: str | None = None) -> Any:
        """The decoded JSON answer of one request (with ``model``, a 404 means that model)."""
        return self.host._json(method, path, body=body, cancel=self.cancel, model=model)

    def list_models(self) -> list[ModelInfo]:
        """The provider's ``list_models``."""
        return self.host.list_models(cancel=self.cancel)

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """``compute()`` once per provider (thread safe); a raised error is not remembered."""
        return self.host._once(key, compute)


def is_no_route(exc: OllmError) -> bool:
    """Whether ``exc`` says the server has no such route (404, 405, 501)."""
    return isinstance(exc, HTTPStatusError) and exc.status in _NO_ROUTE


def positive_int(value: Any) -> int | None:
    """``value`` when it is an integer above zero, else ``None``."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


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


def token_count(ask: Question, answer: Any, key: str, path: str) -> int:
    """The count under ``key`` of a tokenizer's answer (a list of tokens counts its length).

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` for an answer without a count.
    """
    value = answer.get(key) if isinstance(answer, dict) else None
    if key == "tokens" and isinstance(value, list):
        return len(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise BadResponse(f"{ask.where}: {path} answered without a token count", provider=ask.host.name)


def listed_context(ask: Question, model: str) -> int | None:
    """``/v1/models``' window for ``model`` (a LoRA adapter inherits its parent's)."""
    models = {m.name: m for m in ask.list_models()}
    info = models.get(model)
    if info is None and len(models) == 1:
        info = next(iter(models.values()))  # single-model servers answer any name
    if info is None:
        return None
    if info.context_length is None and isinstance(info.details.get("parent"), str):
        parent = models.get(info.details["parent"])
        return parent.context_length if parent is not None else None
    return info.context_length


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """What one OpenAI-compatible server needs from a client: its facts and its strategies.

    The defaults are those of a plain OpenAI-compatible server: no tokenizer (the estimate
    ceil(characters / 4)), no context length, the provider's own capabilities.

    Attributes:
        name: The preset's name (``backend=`` of the provider).
        title: Human name for messages.
        default_base_url: Where the server listens out of the box.
        aliases: Other names the configuration accepts for this preset.
        auth_headers: Headers that carry the API key (all are sent).
        include_usage: Whether ``stream_options: {"include_usage": true}`` is sent.
        health_path: What ``health()`` asks (a backend-specific route, else ``/v1/models``).
        version_path: Where the server's version is read, or ``None``.
        repeat_penalty_key: Body key for ``GenerationOptions.repeat_penalty``.
        tool_calling: Whether tool calling is known to work (``None``: depends on the model).
        thinking: Whether reasoning deltas can arrive (``None``: unknown).
        embeddings: Whether ``/v1/embeddings`` exists.
        guided_decoding: Whether vLLM-style guided decoding is available.
        thinking_switch: How ``think=True/False`` is sent: ``"chat_template_kwargs"``
            (``{"enable_thinking": …}``, read by the chat templates of reasoning models on vLLM
            and llama.cpp) or ``"reasoning_effort"`` (OpenAI's field: ``False`` is
            ``"none"``, ``True`` leaves the server's default). An effort level such as
            ``"high"`` is always ``reasoning_effort``.
        keep_alive_key: Body key for how long the server keeps the model loaded (LM Studio's
            ``ttl`` in seconds), or ``None`` when the server never unloads models.
        schema_format: How a JSON Schema answer format is sent: OpenAI's ``"json_schema"``
            (``{"type": "json_schema", "json_schema": {"name", "schema"}}``) or
            ``"json_object"`` (``{"type": "json_object", "schema": ...}``, the form both
            llama.cpp servers turn into a grammar; llama-cpp-python rejects the other).
        quirks: Known stream quirks, for the reader (the parser tolerates all of them anyway).
        source: Where the facts of this row come from.
    """

    name: str
    title: str
    default_base_url: str
    aliases: tuple[str, ...] = ()
    auth_headers: tuple[AuthHeader, ...] = (_BEARER,)
    include_usage: bool = True
    health_path: str = "/v1/models"
    version_path: str | None = None
    repeat_penalty_key: str = "repeat_penalty"
    tool_calling: bool | None = None
    thinking: bool | None = None
    embeddings: bool = True
    guided_decoding: bool = False
    thinking_switch: Literal["chat_template_kwargs", "reasoning_effort"] = "reasoning_effort"
    keep_alive_key: str | None = None
    schema_format: Literal["json_schema", "json_object"] = "json_schema"
    quirks: str = ""
    source: str = ""

    #: Whether the server has a tokenizer endpoint (``capabilities.token_counting``).
    token_counting = False
    #: Whether a provider class of its own serves this backend (then it is no ``backend=``
    #: choice of ``OpenAICompatibleProvider``).
    own_provider = False

    def auth(self, api_key: str | None) -> dict[str, str]:
        """The headers that carry ``api_key`` (none without a key)."""
        if not api_key:
            return {}
        return {
            name: f"Bearer {api_key}" if bearer else api_key for name, bearer in self.auth_headers
        }

    def count_tokens(self, ask: Question, request: ProviderRequest) -> int:
        """Tokens ``request`` uses (the default: ceil(characters / 4))."""
        from .base import approx_token_count

        return approx_token_count(request)

    def context_length(self, ask: Question, model: str) -> int | None:
        """The window the server runs ``model`` with (the default: the server does not say).

        Raises:
            OllmError: when asking failed (the provider does not remember a failure).
        """
        return None

    def model_capabilities(self, ask: Question, model: str) -> ProviderCapabilities:
        """What ``model`` can do where the server says (the default: the provider's).

        Raises:
            OllmError: when asking failed (the provider then answers its own).
        """
        return ask.host.capabilities

    def parallel_slots(self, ask: Question) -> int | None:
        """Requests the server runs at once (the default: the server does not say).

        Raises:
            OllmError: when asking failed.
        """
        return None

    def annotate_models(self, ask: Question, models: list[ModelInfo]) -> None:
        """Complete ``/v1/models`` entries with what the server tells elsewhere."""
