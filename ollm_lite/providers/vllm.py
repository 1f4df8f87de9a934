"""vLLM's OpenAI-compatible server: ``VllmProvider``, a thin configuration of
:class:`~ollm_lite.providers.openai_compat.OpenAICompatibleProvider`.

What vLLM adds on top of the common provider: typed sampling extras (:class:`VllmOptions`:
``guided_json``, ``guided_regex``, ``guided_choice``, ``min_tokens``, ``presence_penalty``,
``frequency_penalty``, ``best_of``, ``use_beam_search``, ``skip_special_tokens``), exact token
counts through ``/tokenize``, the context window from ``/v1/models`` ``max_model_len`` and
``/health``.

Guided decoding by server version: vLLM 0.12 and later accept ``guided_*`` fields and silently
ignore them (HTTP 200, unconstrained output) in favour of ``structured_outputs``. The provider
reads ``GET /version`` once per instance and sends what that server obeys: ``guided_*`` for
versions before 0.12, ``structured_outputs`` from 0.12 on, both when the version cannot be read
(old servers ignore the unknown field, new ones the old fields, so the constraint holds either
way). A JSON Schema ``response_format`` is mapped the same way (one already in the OpenAI wire
shape, ``{"type": "json_schema" | "json_object" | "text", ...}``, is sent as it is).
``GenerationOptions.extra_body`` is sent verbatim, ``guided_*`` keys included; for those the
provider adds ``structured_outputs`` too where the server needs it (unless ``extra_body``
already has one).
"""

from __future__ import annotations

import logging
import re
import threading
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

from ..errors import OllmError
from ..http.policy import Timeouts
from ..types import GenerationOptions, ProviderRequest
from ._http import time_limits
from ._openai_wire import chat_body, merge_body
from .backends import BACKENDS
from .openai_compat import OpenAICompatibleProvider

__all__ = ["STRUCTURED_OUTPUTS_SINCE", "VllmOptions", "VllmProvider", "parse_version"]

logger = logging.getLogger(__name__)

STRUCTURED_OUTPUTS_SINCE = (0, 12)
"""The first vLLM release that ignores ``guided_*`` (PR #29326)."""

#: ``response_format`` objects already in the OpenAI wire shape (passed on unchanged).
_WIRE_FORMATS = ("json_schema", "json_object", "text")

#: ``guided_*`` field → ``structured_outputs`` key.
_GUIDED = {
    "guided_json": "json",
    "guided_regex": "regex",
    "guided_choice": "choice",
    "guided_grammar": "grammar",
    "guided_whitespace_pattern": "whitespace_pattern",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class VllmOptions:
    """vLLM's request extras; ``None`` leaves a field out of the body.

    Use them as provider defaults (``VllmProvider(options=...)``) or per request
    (``VllmOptions(...).apply(GenerationOptions(...))``); per-request values win.
    """

    guided_json: dict[str, Any] | str | None = None
    """JSON Schema the output must follow."""
    guided_regex: str | None = None
    """Regular expression the output must match."""
    guided_choice: list[str] | None = None
    """The output must be exactly one of these strings."""
    min_tokens: int | None = None
    """Tokens to generate before EOS or a stop string may end the answer."""
    presence_penalty: float | None = None
    frequency_penalty: float | None = None
    best_of: int | None = None
    """Candidates to sample (ignored by current vLLM chat endpoints)."""
    use_beam_search: bool | None = None
    skip_special_tokens: bool | None = None

    def to_body(self) -> dict[str, Any]:
        """The fields that are set, as request-body keys."""
        return {k: v for k, v in asdict(self).items() if v is not None}

    def apply(self, options: GenerationOptions | None = None) -> GenerationOptions:
        """``options`` with these extras merged into its ``extra_body`` (its own keys win)."""
        options = options or GenerationOptions()
        return replace(options, extra_body={**self.to_body(), **options.extra_body})


def parse_version(text: Any) -> tuple[int, ...] | None:
    """``"0.11.2"`` → ``(0, 11, 2)``, ``"0.12.0rc1.dev5+g1a2b"`` → ``(0, 12, 0)``, else None."""
    if not isinstance(text, str):
        return None
    match = re.match(r"\s*v?(\d+)\.(\d+)(?:\.(\d+))?", text)
    if match is None:
        return None
    return tuple(int(g) for g in match.groups(default="0"))


class VllmProvider(OpenAICompatibleProvider):
    """vLLM through its OpenAI-compatible server.

    Args:
        base_url: Server root, with or without ``/v1``. Default: ``$VLLM_HOST``, else
            ``http://localhost:8000``.
        api_key: The server's ``--api-key``, sent as ``Authorization: Bearer``. Default:
            ``$VLLM_API_KEY``, else none.
        idle_timeout: Longest wait in seconds for the server's next bytes: for an answer to
            begin and, while it streams, between pieces of content (default 120; connecting
            waits at most 5 s, or this if less). Not a deadline for a whole answer: a call's
            ``timeout=`` is that.
        timeout: The older name of ``idle_timeout`` (the same number), or a
            :class:`~ollm_lite.http.policy.Timeouts` (connect, idle and total limits). Given
            with an ``idle_timeout`` that differs: ``CONFIG_INVALID``.
        retries: Retries of failures before the first byte (default 2).
        options: vLLM extras sent with every request (per-request ``extra_body`` wins).
        embed_batch_size: Texts per ``/v1/embeddings`` request (default 64).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a bad URL, ``retries`` or ``embed_batch_size``.
    """

    name: ClassVar[str] = "vllm"

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        idle_timeout: float | None = None,
        timeout: float | Timeouts | None = None,
        retries: int | None = None,
        options: VllmOptions | None = None,
        embed_batch_size: int = 64,
    ) -> None:
        self._configure(
            BACKENDS["vllm"],
            base_url=base_url,
            api_key=api_key,
            timeout=time_limits(timeout, idle_timeout),
            retries=retries,
            embed_batch_size=embed_batch_size,
        )
        self.options = options or VllmOptions()

    # ------------------------------------------------------------------ version

    def server_version(self, *, cancel: threading.Event | None = None) -> tuple[int, ...] | None:
        """The server's version from ``GET /version`` (read once; ``None`` when unknown).

        A failure to connect is not remembered (the next request asks again); an answer
        without a version is.
        """
        try:
            return self._once("vllm.version", lambda: self._read_version(cancel))
        except OllmError:  # not connected, cancelled or late: ask again next time
            return None

    def _read_version(self, cancel: threading.Event | None) -> tuple[int, ...] | None:
        try:
            answer = self._json("GET", "/version", cancel=cancel)
        except OllmError as exc:
            logger.debug("vllm: /version unavailable (%s)", exc.code)
            if exc.code in ("CONNECTION_FAILED", "CANCELLED", "LLM_TIMEOUT"):
                raise
            answer = None
        version = answer.get("version") if isinstance(answer, dict) else None
        logger.debug("vllm at %s: version %s", self.base_url, version)
        return parse_version(version)

    def _guided_style(self, cancel: threading.Event | None) -> str:
        """``"structured"``, ``"guided"`` or ``"both"`` (version unknown)."""
        version = self.server_version(cancel=cancel)
        if version is None:
            return "both"
        return "structured" if version[:2] >= STRUCTURED_OUTPUTS_SINCE else "guided"

    # ------------------------------------------------------------------ body

    def _chat_body(self, request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
        body = chat_body(request, self.backend, stream=stream, extend_extra=False)
        extra = request.options.extra_body  # sent as written, guided_* keys included
        typed = {k: v for k, v in self.options.to_body().items() if k not in extra}
        fmt = request.response_format
        schema = isinstance(fmt, dict) and fmt.get("type") not in _WIRE_FORMATS
        if schema and "guided_json" not in typed and "guided_json" not in extra:
            body.pop("response_format", None)  # a JSON Schema: constrain like guided_json
            typed["guided_json"] = fmt
        body.update({k: v for k, v in typed.items() if k not in _GUIDED})
        guided = {k: v for k, v in {**typed, **extra}.items() if k in _GUIDED}
        if guided:
            style = self._guided_style(request.cancel)
            if style in ("guided", "both"):
                body.update({k: v for k, v in typed.items() if k in _GUIDED})
            if style in ("structured", "both") and "structured_outputs" not in extra:
                body["structured_outputs"] = {_GUIDED[k]: v for k, v in guided.items()}
        return merge_body(body, extra) if extra else body
