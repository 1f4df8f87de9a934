"""Ollama's model management answers, read without I/O: ``/api/tags``, ``/api/show``,
``/api/ps``, ``/api/pull`` progress lines and ``/api/embed``; re-exported by
:mod:`~ollm_lite.providers._ollama_wire` (chat bodies and streams).
"""

from __future__ import annotations

from typing import Any

from ..errors import BadResponse, ModelNotFound, OllmError
from ..types import (
    ModelInfo,
    ProviderCapabilities,
    PullProgress,
)

__all__ = [
    "capabilities_from_list",
    "context_length_from_show",
    "embeddings_from",
    "model_info_from_show",
    "model_info_from_tag",
    "ps_context_length",
    "pull_error",
    "pull_progress_from",
]

# --------------------------------------------------------------------------- models


def capabilities_from_list(caps: Any, base: ProviderCapabilities) -> ProviderCapabilities:
    """Per-model capabilities from ``/api/show``'s ``capabilities`` list.

    ``tools`` → tool calling, ``vision`` → vision, ``thinking`` → thinking. Without a list
    (servers before 0.6.4) those three are unknown (``None``).
    """
    known = isinstance(caps, list)
    names = {c for c in caps if isinstance(c, str)} if known else set()
    return ProviderCapabilities(
        streaming=base.streaming,
        tool_calling=("tools" in names) if known else None,
        model_management=base.model_management,
        embeddings=base.embeddings,
        token_counting=base.token_counting,
        guided_decoding=base.guided_decoding,
        vision=("vision" in names) if known else None,
        thinking=("thinking" in names) if known else None,
    )


def _kind(caps: list[str]) -> Any:
    if "embedding" in caps:
        return "embedding"
    if "completion" in caps or "tools" in caps or "thinking" in caps:
        return "chat"
    return None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _str_list(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def model_info_from_tag(entry: Any) -> ModelInfo:
    """One ``/api/tags`` entry as a :class:`ModelInfo`.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when the entry has no name.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("name") or entry.get("model"), str):
        raise BadResponse(f"Ollama listed a model without a name: {entry!r:.200}")
    details = dict(entry["details"]) if isinstance(entry.get("details"), dict) else {}
    for key in ("digest", "model", "remote_model", "remote_host"):
        if entry.get(key) is not None:
            details.setdefault(key, entry[key])
    caps = _str_list(entry.get("capabilities"))
    return ModelInfo(
        name=entry.get("name") or entry["model"],
        size_bytes=_int(entry.get("size")),
        modified_at=entry.get("modified_at") if isinstance(entry.get("modified_at"), str) else None,
        details=details,
        context_length=_int(details.get("context_length")),
        capabilities=caps,
        kind=_kind(caps),
    )


def context_length_from_show(show: dict[str, Any]) -> int | None:
    """The trained maximum from ``model_info["<architecture>.context_length"]``."""
    info = show.get("model_info")
    if not isinstance(info, dict):
        return None
    arch = info.get("general.architecture")
    if isinstance(arch, str):
        value = _int(info.get(f"{arch}.context_length"))
        if value is not None:
            return value
    for key, value in info.items():  # an architecture key that does not match its own name
        if isinstance(key, str) and key.endswith(".context_length") and _int(value):
            return int(value)
    return None


def _full_name(name: str) -> str:
    last = name.rsplit("/", 1)[-1]
    return name if ":" in last else name + ":latest"


def ps_context_length(ps: Any, model: str) -> int | None:
    """The window ``/api/ps`` reports for ``model`` when it is loaded (``None`` otherwise)."""
    models = ps.get("models") if isinstance(ps, dict) else None
    if not isinstance(models, list):
        return None
    wanted = _full_name(model)
    for entry in models:
        if not isinstance(entry, dict):
            continue
        names = (entry.get("name"), entry.get("model"))
        if wanted in {_full_name(n) for n in names if isinstance(n, str)}:
            return _int(entry.get("context_length"))
    return None


def model_info_from_show(
    name: str, show: Any, *, num_ctx: int | None = None, loaded_ctx: int | None = None
) -> ModelInfo:
    """An ``/api/show`` answer as a :class:`ModelInfo`.

    ``context_length`` is the window the server will really use: ``num_ctx`` when set, else
    the loaded model's window from ``/api/ps``, else the trained maximum.
    ``details["context_length_source"]`` says which (``"num_ctx"``, ``"loaded"``,
    ``"trained"``); ``details["trained_context_length"]`` keeps the maximum.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when ``show`` is not a JSON object.
    """
    if not isinstance(show, dict):
        raise BadResponse(f"Ollama's /api/show answer for {name!r} is not a JSON object")
    details = dict(show["details"]) if isinstance(show.get("details"), dict) else {}
    trained = context_length_from_show(show)
    details["trained_context_length"] = trained
    for key in ("parameters", "template", "system", "remote_model", "remote_host"):
        if show.get(key):
            details[key] = show[key]
    info = show.get("model_info")
    if isinstance(info, dict) and isinstance(info.get("general.architecture"), str):
        details.setdefault("architecture", info["general.architecture"])
    context: int | None
    if num_ctx is not None:
        context, source = num_ctx, "num_ctx"
    elif loaded_ctx is not None:
        context, source = loaded_ctx, "loaded"
    elif trained is not None:
        context, source = trained, "trained"
    else:
        context, source = None, None
    details["context_length_source"] = source
    caps = _str_list(show.get("capabilities"))
    modified = show.get("modified_at")
    return ModelInfo(
        name=name,
        modified_at=modified if isinstance(modified, str) else None,
        details=details,
        context_length=context,
        capabilities=caps,
        kind=_kind(caps),
    )


# --------------------------------------------------------------------------- pull, embed


def pull_progress_from(line: dict[str, Any]) -> PullProgress:
    """One ``/api/pull`` progress line (``completed``/``total``/``digest`` may be absent)."""
    status = line.get("status")
    digest = line.get("digest")
    return PullProgress(
        status=status if isinstance(status, str) else "",
        completed=_int(line.get("completed")),
        total=_int(line.get("total")),
        digest=digest if isinstance(digest, str) else None,
    )


def pull_error(message: str, *, model: str, provider: str, url: str) -> OllmError:
    """The exception for an ``{"error": ...}`` line of a pull.

    A manifest that does not exist means the registry has no such model: ``ModelNotFound``;
    anything else is ``BadResponse`` with the server's message.
    """
    low = message.lower()
    details = {"url": url}
    if "file does not exist" in low or "not found" in low:
        return ModelNotFound(
            f"cannot pull {model!r}: the registry has no such model ({message}). "
            "Check the name at https://ollama.com/library",
            provider=provider,
            model=model,
            details=details,
        )
    return BadResponse(
        f"pulling {model!r} failed: {message}", provider=provider, model=model, details=details
    )


def embeddings_from(answer: Any, expected: int, *, model: str, provider: str) -> list[list[float]]:
    """The vectors of one ``/api/embed`` answer, checked for count and shape.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when the answer has no ``embeddings`` list, the
            wrong number of vectors, or a vector that is not a list of numbers.
    """
    vectors = answer.get("embeddings") if isinstance(answer, dict) else None
    if not isinstance(vectors, list):
        raise BadResponse(
            f"{provider}: /api/embed answer for {model!r} has no 'embeddings' list",
            provider=provider,
            model=model,
        )
    if len(vectors) != expected:
        raise BadResponse(
            f"{provider}: /api/embed returned {len(vectors)} vectors for {expected} texts "
            f"with model {model!r}",
            provider=provider,
            model=model,
        )
    for vec in vectors:
        if not isinstance(vec, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vec
        ):
            raise BadResponse(
                f"{provider}: /api/embed returned a vector that is not a list of numbers "
                f"for model {model!r}",
                provider=provider,
                model=model,
            )
    return vectors
