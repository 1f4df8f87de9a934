"""The one table of per-backend differences for the OpenAI-compatible providers.

Every server that speaks ``/v1/chat/completions`` differs in small ways: which header carries
the key, which port it listens on, whether it has a tokenizer endpoint, where it says how long
its context window is, and which stream quirks it has. All of those live in :data:`BACKENDS`,
one :class:`Backend` row per server, each citing where the fact comes from. The providers
(:mod:`~ollm_lite.providers.openai_compat`, :mod:`~ollm_lite.providers.vllm`) read the row and
never switch on a backend's name anywhere else.

Citation keys are those of the project's protocol fact sheet: [OAI-PY] openai-python,
[VLLM] vllm-project/vllm, [LCPP] ggml-org/llama.cpp ``tools/server``, [LCPY] llama-cpp-python
``llama_cpp/server/app.py`` (checked against its 0.3.x server), [LMS] lmstudio-ai/docs,
[KCPP] KoboldCpp's Lite UI source and the clients that call it, [LAI] LocalAI's docs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ..errors import ConfigError

__all__ = ["BACKENDS", "Backend", "BackendName", "backend_named"]

BackendName = Literal["lmstudio", "localai", "kobold", "llamacpp", "generic", "vllm"]

#: How the key is sent: a header name, and whether its value gets the ``Bearer `` prefix.
AuthHeader = tuple[str, bool]

_BEARER: AuthHeader = ("Authorization", True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Backend:
    """What one OpenAI-compatible server needs from a client.

    Attributes:
        name: The preset's name (``backend=`` of the provider).
        title: Human name for messages.
        default_base_url: Where the server listens out of the box.
        auth_headers: Headers that carry the API key (all are sent).
        include_usage: Whether ``stream_options: {"include_usage": true}`` is sent.
        tokenizer: Tokenizer endpoint family: ``"vllm"`` (``POST /tokenize`` with
            ``prompt``), ``"llamacpp"`` (discovered per instance: native ``POST /tokenize`` or
            llama-cpp-python's ``POST /extras/tokenize/count``), ``"kobold"``
            (``POST /api/extra/tokencount``), or ``None`` (estimate ceil(chars / 4)).
        context_source: Where the context window comes from: ``"vllm"`` (``/v1/models``
            ``max_model_len``), ``"llamacpp"`` (``/props`` ``n_ctx``, else ``/v1/models``
            ``meta.n_ctx``), ``"lmstudio"`` (``/api/v1/models`` loaded window, else
            ``/api/v0/models/{id}`` ``max_context_length``), ``"kobold"``
            (``/api/extra/true_max_context_length``), or ``None`` (the server does not say).
        health_path: What :meth:`health` asks (a backend-specific route, else ``/v1/models``).
        version_path: Where the server's version is read, or ``None``.
        repeat_penalty_key: Body key for ``GenerationOptions.repeat_penalty``.
        tool_calling: Whether tool calling is known to work (``None``: depends on the model).
        thinking: Whether reasoning deltas can arrive (``None``: unknown).
        embeddings: Whether ``/v1/embeddings`` exists.
        guided_decoding: Whether vLLM-style guided decoding (``guided_*`` /
            ``structured_outputs``) is available.
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
    auth_headers: tuple[AuthHeader, ...] = (_BEARER,)
    include_usage: bool = True
    tokenizer: Literal["vllm", "llamacpp", "kobold"] | None = None
    context_source: Literal["vllm", "llamacpp", "lmstudio", "kobold"] | None = None
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

    def auth(self, api_key: str | None) -> dict[str, str]:
        """The headers that carry ``api_key`` (none without a key)."""
        if not api_key:
            return {}
        return {
            name: f"Bearer {api_key}" if bearer else api_key for name, bearer in self.auth_headers
        }


BACKENDS: dict[str, Backend] = {
    "generic": Backend(
        name="generic",
        title="OpenAI-compatible server",
        default_base_url="http://localhost:1234",
        quirks="none assumed; every quirk below is tolerated anyway",
        source="[OAI-PY] _client.py (Bearer auth), chat_completion_stream_options_param.py "
        "(include_usage), types/model.py (/v1/models has no context length)",
    ),
    "lmstudio": Backend(
        name="lmstudio",
        title="LM Studio",
        default_base_url="http://localhost:1234",
        # The product spec asks for X-API-Key; LM Studio 0.4+ checks Bearer. Both are sent.
        auth_headers=(_BEARER, ("X-API-Key", False)),
        context_source="lmstudio",
        thinking=None,
        keep_alive_key="ttl",
        quirks="first tool-call fragment id is a numeric string; reasoning_content only when "
        "the app's developer setting is on",
        source="[LMS] 0_core/authentication.mdx (Bearer, 0.4.0+), 3_openai-compat/index.mdx "
        "(port 1234), 2_rest/list.md + v0.md (context length), 3_openai-compat/tools.mdx, "
        "api-changelog.md (ttl, 0.3.9)",
    ),
    "localai": Backend(
        name="localai",
        title="LocalAI",
        default_base_url="http://localhost:8080",
        source="[LAI] docs: OpenAI-compatible API on port 8080, API_KEY checked as Bearer",
    ),
    "kobold": Backend(
        name="kobold",
        title="KoboldCpp",
        default_base_url="http://localhost:5001",
        tokenizer="kobold",
        context_source="kobold",
        version_path="/api/extra/version",
        health_path="/api/extra/version",
        quirks="OpenAI routes are an adapter over the Kobold API; tool calls are emulated",
        source="[KCPP] koboldcpp.py (defaultport 5001, --password as Bearer), Lite UI "
        "endpoints /api/extra/tokencount {prompt}->{value}, "
        "/api/extra/true_max_context_length ->{value}, /api/extra/version",
    ),
    "llamacpp": Backend(
        name="llamacpp",
        title="llama.cpp server",
        default_base_url="http://localhost:8080",
        tokenizer="llamacpp",
        context_source="llamacpp",
        health_path="/health",
        thinking=True,
        thinking_switch="chat_template_kwargs",
        schema_format="json_object",
        quirks="id and name repeated in every tool-call fragment (llama-cpp-python); final "
        "chunk carries usage and timings (native); SSE comment pings; 503 while loading; "
        "llama-cpp-python ignores include_usage",
        source="[LCPP] tools/server/README.md (/tokenize, /props n_ctx, /health 503, "
        "/v1/models meta, timings, port 8080 moving to 9931), server-http.cpp (Bearer or "
        "X-Api-Key), response_format json_object + schema; [LCPY] /extras/tokenize/count, no "
        "/props or /health, server/types.py response_format type text|json_object + schema",
    ),
    "vllm": Backend(
        name="vllm",
        title="vLLM",
        default_base_url="http://localhost:8000",
        tokenizer="vllm",
        context_source="vllm",
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
}
"""Every backend preset by name (``vllm`` is the row of ``VllmProvider``)."""

#: The presets ``OpenAICompatibleProvider(backend=...)`` accepts.
OPENAI_COMPATIBLE_BACKENDS = ("lmstudio", "localai", "kobold", "llamacpp", "generic")


def backend_named(name: str, *, allowed: tuple[str, ...] = OPENAI_COMPATIBLE_BACKENDS) -> Backend:
    """The row for ``name``.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the valid backends.
    """
    if not isinstance(name, str) or name not in allowed or name not in BACKENDS:
        raise ConfigError(
            f"unknown backend {name!r}: expected one of {', '.join(allowed)}",
            details={"valid": list(allowed)},
        )
    return BACKENDS[name]
