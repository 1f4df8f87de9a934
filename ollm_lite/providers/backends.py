"""The one table of OpenAI-compatible servers, each a small strategy object.

Every server that speaks ``/v1/chat/completions`` differs in small ways: which header carries
the key, which port it listens on, whether and how it counts tokens, where it says how long its
context window is, what it tells about a model's capabilities, and which stream quirks it has.
Each server is one :class:`~ollm_lite.providers._backend_base.Backend` subclass that owns those
differences (:class:`Generic`, :class:`LMStudio`, :class:`LocalAI`, :class:`Kobold`,
:class:`~ollm_lite.providers._llamacpp.LlamaCpp`, :class:`Vllm`), and :data:`BACKENDS` holds one
instance of each, its facts citing where they come from. The providers
(:mod:`~ollm_lite.providers.openai_compat`, :mod:`~ollm_lite.providers.vllm`) ask their backend
and never test its name; the configuration (:mod:`ollm_lite.config`) reads the same table for
the names and aliases it accepts.

A backend is shared by every provider that uses it, so it keeps no state of its own: what it
finds out about one server (which llama.cpp server answers) is kept by that provider.

Sources: [OAI-PY] openai-python, [VLLM] vllm-project/vllm, [LCPP] ggml-org/llama.cpp
``tools/server``, [LCPY] llama-cpp-python ``llama_cpp/server/app.py`` (checked against its
0.3.x server), [LMS] lmstudio-ai/docs, [KCPP] KoboldCpp's Lite UI source and the clients that
call it, [LAI] LocalAI's docs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Any, Literal

from ..errors import ConfigError, OllmError
from ._backend_base import (
    _BEARER,
    Backend,
    Question,
    is_no_route,
    listed_context,
    positive_int,
    request_text,
    token_count,
)
from ._llamacpp import LlamaCpp

if TYPE_CHECKING:
    from ..types import ProviderCapabilities, ProviderRequest

__all__ = [
    "BACKENDS",
    "DEFAULT_BACKEND",
    "OPENAI_COMPATIBLE_BACKENDS",
    "OPENAI_COMPATIBLE_PRESETS",
    "Backend",
    "Question",
    "BackendName",
    "Generic",
    "Kobold",
    "LMStudio",
    "LlamaCpp",
    "LocalAI",
    "Vllm",
    "backend_named",
]

BackendName = Literal["lmstudio", "localai", "kobold", "llamacpp", "generic", "vllm"]


def _bool_or(value: Any, default: bool | None) -> bool | None:
    return value if isinstance(value, bool) else default


class Generic(Backend):
    """Any OpenAI-compatible server; nothing beyond the API itself is assumed."""

    __slots__ = ()


class LocalAI(Backend):
    """LocalAI: the plain API on its own port."""

    __slots__ = ()


class LMStudio(Backend):
    """LM Studio: the loaded window and per-model capabilities from its REST API."""

    __slots__ = ()

    def _entry(self, ask: Question, model: str) -> dict[str, Any] | None:
        answer = ask.json("GET", "/api/v1/models")
        entries = answer.get("models") if isinstance(answer, dict) else None
        for entry in entries or ():
            if isinstance(entry, dict) and model in (entry.get("key"), entry.get("id")):
                return entry
        return None

    def context_length(self, ask: Question, model: str) -> int | None:
        """The loaded window (LM Studio 0.4+ ``/api/v1/models``, else ``/api/v0/models``)."""
        try:
            entry = self._entry(ask, model)
        except OllmError as exc:
            if not is_no_route(exc):
                raise
            answer = ask.json("GET", f"/api/v0/models/{model}")
            loaded = answer.get("loaded_context_length") if isinstance(answer, dict) else None
            return positive_int(loaded)
        for instance in (entry or {}).get("loaded_instances") or ():
            config = instance.get("config") if isinstance(instance, dict) else None
            if isinstance(config, dict) and positive_int(config.get("context_length")):
                return int(config["context_length"])
        return None

    def model_capabilities(self, ask: Question, model: str) -> ProviderCapabilities:
        """``capabilities`` of LM Studio 0.4+'s ``/api/v1/models`` entry."""
        caps = (self._entry(ask, model) or {}).get("capabilities")
        base = ask.host.capabilities
        if not isinstance(caps, dict):
            return base
        return replace(
            base,
            tool_calling=_bool_or(caps.get("trained_for_tool_use"), base.tool_calling),
            vision=_bool_or(caps.get("vision"), base.vision),
            thinking=_bool_or(caps.get("reasoning"), base.thinking),
        )


class Kobold(Backend):
    """KoboldCpp: its own token count and window routes beside the OpenAI adapter."""

    __slots__ = ()
    token_counting = True

    def count_tokens(self, ask: Question, request: ProviderRequest) -> int:
        """``POST /api/extra/tokencount`` over the request's text."""
        path = "/api/extra/tokencount"
        answer = ask.json("POST", path, body={"prompt": request_text(request)})
        return token_count(ask, answer, "value", path)

    def context_length(self, ask: Question, model: str) -> int | None:
        """``/api/extra/true_max_context_length``."""
        answer = ask.json("GET", "/api/extra/true_max_context_length")
        return positive_int(answer.get("value")) if isinstance(answer, dict) else None


class Vllm(Backend):
    """vLLM: exact counts through ``/tokenize``, the window as ``max_model_len``."""

    __slots__ = ()
    token_counting = True
    own_provider = True  # VllmProvider

    def count_tokens(self, ask: Question, request: ProviderRequest) -> int:
        """``POST /tokenize`` with the chat messages and tools (the templated prompt)."""
        from ._openai_wire import messages_to_openai, tools_to_openai

        body: dict[str, Any] = {
            "model": request.model,
            "messages": messages_to_openai(request.messages, request.system_prompt),
        }
        if request.tools:
            body["tools"] = tools_to_openai(request.tools)
        answer = ask.json("POST", "/tokenize", body=body, model=request.model)
        return token_count(ask, answer, "count", "/tokenize")

    def context_length(self, ask: Question, model: str) -> int | None:
        """``max_model_len`` of ``/v1/models``."""
        return listed_context(ask, model)


_PRESETS: tuple[Backend, ...] = (
    LMStudio(
        name="lmstudio",
        title="LM Studio",
        default_base_url="http://localhost:1234",
        # The product spec asks for X-API-Key; LM Studio 0.4+ checks Bearer. Both are sent.
        auth_headers=(_BEARER, ("X-API-Key", False)),
        thinking=None,
        keep_alive_key="ttl",
        quirks="first tool-call fragment id is a numeric string; reasoning_content only when "
        "the app's developer setting is on; no usage in a stream, include_usage or not "
        "(lmstudio-bug-tracker#713), and no tokenizer route: the call log estimates it",
        source="[LMS] 0_core/authentication.mdx (Bearer, 0.4.0+), 3_openai-compat/index.mdx "
        "(port 1234), 2_rest/list.md + v0.md (context length), 3_openai-compat/tools.mdx, "
        "api-changelog.md (ttl, 0.3.9)",
    ),
    LocalAI(
        name="localai",
        title="LocalAI",
        default_base_url="http://localhost:8080",
        source="[LAI] docs: OpenAI-compatible API on port 8080, API_KEY checked as Bearer",
    ),
    Kobold(
        name="kobold",
        title="KoboldCpp",
        default_base_url="http://localhost:5001",
        aliases=("koboldcpp",),
        version_path="/api/extra/version",
        health_path="/api/extra/version",
        quirks="OpenAI routes are an adapter over the Kobold API; tool calls are emulated",
        source="[KCPP] koboldcpp.py (defaultport 5001, --password as Bearer), Lite UI "
        "endpoints /api/extra/tokencount {prompt}->{value}, "
        "/api/extra/true_max_context_length ->{value}, /api/extra/version",
    ),
    LlamaCpp(
        name="llamacpp",
        title="llama.cpp server",
        default_base_url="http://localhost:8080",
        aliases=("llama.cpp",),
        health_path="/health",
        thinking=True,
        thinking_switch="chat_template_kwargs",
        schema_format="json_object",
        quirks="id and name repeated in every tool-call fragment (llama-cpp-python); final "
        "chunk carries usage and timings (native); SSE comment pings; 503 while loading; "
        "llama-cpp-python ignores include_usage (its PR #1552 is unmerged): the call log counts "
        "a stream with /extras/tokenize/count",
        source="[LCPP] tools/server/README.md (/tokenize, /props n_ctx, /health 503, "
        "/v1/models meta, timings, port 8080 moving to 9931), server-http.cpp (Bearer or "
        "X-Api-Key), response_format json_object + schema; [LCPY] /extras/tokenize/count, no "
        "/props or /health, server/types.py response_format type text|json_object + schema",
    ),
    Generic(
        name="generic",
        title="OpenAI-compatible server",
        default_base_url="http://localhost:1234",
        quirks="none assumed; every quirk of this table is tolerated anyway",
        source="[OAI-PY] _client.py (Bearer auth), chat_completion_stream_options_param.py "
        "(include_usage), types/model.py (/v1/models has no context length)",
    ),
    Vllm(
        name="vllm",
        title="vLLM",
        default_base_url="http://localhost:8000",
        health_path="/health",
        version_path="/version",
        repeat_penalty_key="repetition_penalty",
        thinking=True,
        guided_decoding=True,
        thinking_switch="chat_template_kwargs",
        quirks="reasoning arrives as delta.reasoning (new) or reasoning_content (old); "
        "guided_* silently ignored from 0.12 (structured_outputs instead); errors may come as "
        "data: {error} before [DONE]",
        source="[VLLM] entrypoints/openai api_server.py (Bearer on /v1 only), "
        "chat_completion/protocol.py, PR #29326 (guided_* removed in 0.12), tokenize "
        "protocol, engine/protocol.py ModelCard.max_model_len",
    ),
)

BACKENDS: dict[str, Backend] = {backend.name: backend for backend in _PRESETS}
"""Every backend preset by name (``vllm`` is the backend of ``VllmProvider``)."""

#: The presets ``OpenAICompatibleProvider(backend=...)`` accepts, in the table's order.
OPENAI_COMPATIBLE_BACKENDS = tuple(b.name for b in _PRESETS if not b.own_provider)

#: The backend of an OpenAI-compatible server that names none: nothing beyond the API assumed.
DEFAULT_BACKEND: BackendName = "generic"

#: The backends that are also provider names of their own (``lmstudio``, ``llamacpp`` …):
#: every ``OpenAICompatibleProvider`` preset but the default.
OPENAI_COMPATIBLE_PRESETS = tuple(b for b in OPENAI_COMPATIBLE_BACKENDS if b != DEFAULT_BACKEND)


def backend_named(name: str, *, allowed: tuple[str, ...] = OPENAI_COMPATIBLE_BACKENDS) -> Backend:
    """The preset called ``name``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the valid backends.
    """
    if not isinstance(name, str) or name not in allowed or name not in BACKENDS:
        raise ConfigError(
            f"unknown backend {name!r}: expected one of {', '.join(allowed)}",
            details={"valid": list(allowed)},
        )
    return BACKENDS[name]
