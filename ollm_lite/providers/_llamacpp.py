"""The llama.cpp backend: one strategy for llama.cpp's ``llama-server`` and llama-cpp-python.

Both servers answer the ``llamacpp`` preset, and which one is there is found out once per
provider (thread safe, never configured by hand): ``GET /props`` answers on the native
``llama-server`` (exact prompt counts through ``/v1/chat/completions/input_tokens`` or
``/tokenize``, the running window from ``/props``), ``POST /extras/tokenize/count`` on
llama-cpp-python's server (its count; the window only where ``/v1/models`` reports it).
Sources: llama.cpp ``tools/server/README.md``; llama-cpp-python ``llama_cpp/server/app.py``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from ..errors import OllmError
from ._backend_base import (
    Backend,
    Question,
    is_no_route,
    listed_context,
    positive_int,
    request_text,
    token_count,
)

if TYPE_CHECKING:
    from ..types import ModelInfo, ProviderCapabilities, ProviderRequest

__all__ = ["LlamaCpp", "LlamaCppNative", "LlamaCppPython", "LlamaCppServer"]

logger = logging.getLogger(__name__)

_INPUT_TOKENS = "/v1/chat/completions/input_tokens"


@dataclass(slots=True)
class LlamaCppServer:
    """A server of the llama.cpp family that is neither of the two below: no tokenizer route
    and no ``/props`` (found once per provider; the subclasses are the two known servers)."""

    props: dict[str, Any] | None = None
    """The native server's ``GET /props`` answer."""

    def window(self) -> int | None:
        """``/props`` ``default_generation_settings.n_ctx``: the ``-c`` the server runs with."""
        settings = (self.props or {}).get("default_generation_settings")
        return positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None

    def count(self, ask: Question, request: ProviderRequest, backend: Backend) -> int:
        """Tokens of ``request`` by the server's own tokenizer.

        Raises:
            UnsupportedOperation: this server has none.
        """
        raise ask.host._unsupported(
            f"token counting at {ask.host.base_url} (no /props, /tokenize or /extras/tokenize)"
        )


@dataclass(slots=True)
class LlamaCppPython(LlamaCppServer):
    """llama-cpp-python's server: ``POST /extras/tokenize/count`` over the text."""

    def count(self, ask: Question, request: ProviderRequest, backend: Backend) -> int:
        path = "/extras/tokenize/count"
        answer = ask.json("POST", path, body={"input": request_text(request)})
        return token_count(ask, answer, "count", path)


@dataclass(slots=True)
class LlamaCppNative(LlamaCppServer):
    """llama.cpp's ``llama-server``: the whole templated prompt counted by
    ``/v1/chat/completions/input_tokens``, else ``/tokenize`` over the text (older builds)."""

    input_tokens: bool | None = None
    """Whether ``/v1/chat/completions/input_tokens`` exists (``None``: not tried yet)."""

    def count(self, ask: Question, request: ProviderRequest, backend: Backend) -> int:
        if self.input_tokens is not False:
            from ._openai_wire import chat_body

            try:
                body = chat_body(request, backend, stream=False, extend_extra=False)
                answer = ask.json("POST", _INPUT_TOKENS, body=body)
            except OllmError as exc:
                if not is_no_route(exc):
                    raise
                self.input_tokens = False  # an older build: count the text instead
            else:
                self.input_tokens = True
                return token_count(ask, answer, "input_tokens", "input_tokens")
        body = {"content": request_text(request), "add_special": True}
        answer = ask.json("POST", "/tokenize", body=body)
        return token_count(ask, answer, "tokens", "/tokenize")


class LlamaCpp(Backend):
    """llama.cpp's ``llama-server`` or llama-cpp-python's server, told apart per provider."""

    __slots__ = ()
    token_counting = True

    def server(self, ask: Question) -> LlamaCppServer:
        """Which llama.cpp server answers, found once per provider.

        A server that is still loading (503) or unreachable is not remembered: the error
        propagates and the next call asks again.
        """
        return ask.once("llamacpp.server", lambda: self._discover(ask))

    def _discover(self, ask: Question) -> LlamaCppServer:
        try:
            props = ask.json("GET", "/props")
        except OllmError as exc:
            if not is_no_route(exc):
                raise
            props = None
        if isinstance(props, dict):
            return LlamaCppNative(props)
        try:
            ask.json("POST", "/extras/tokenize/count", body={"input": ""})
        except OllmError as exc:
            if not is_no_route(exc):
                raise
        else:
            return LlamaCppPython()
        logger.debug("%s: a llama.cpp-like server without a tokenizer route", ask.where)
        ask.host.capabilities = replace(ask.host.capabilities, token_counting=False)
        return LlamaCppServer()

    def _window(self, ask: Question) -> int | None:
        try:
            return self.server(ask).window()
        except OllmError as exc:
            logger.debug("%s: llama.cpp discovery failed (%s)", ask.where, exc.code)
            return None

    def count_tokens(self, ask: Question, request: ProviderRequest) -> int:
        """The native server counts the whole templated prompt (``input_tokens``, else
        ``/tokenize`` over the text); llama-cpp-python uses ``/extras/tokenize/count``.

        Raises:
            UnsupportedOperation: when the server turned out to have no tokenizer route.
        """
        return self.server(ask).count(ask, request, self)

    def context_length(self, ask: Question, model: str) -> int | None:
        """The native server's running window from ``/props`` (not the trained maximum);
        llama-cpp-python's ``/v1/models`` ``meta.n_ctx`` where present."""
        found = self.server(ask)  # a failure propagates: nothing is remembered
        window = found.window()
        return window if window is not None else listed_context(ask, model)

    def model_capabilities(self, ask: Question, model: str) -> ProviderCapabilities:
        """The chat template's tool support and the vision modality from ``/props``."""
        props = self.server(ask).props or {}
        base = ask.host.capabilities  # discovery may have changed it
        caps = props.get("chat_template_caps")
        modalities = props.get("modalities")
        tools = caps.get("supports_tool_calls") if isinstance(caps, dict) else None
        vision = modalities.get("vision") if isinstance(modalities, dict) else None
        return replace(
            base,
            tool_calling=tools if isinstance(tools, bool) else base.tool_calling,
            vision=vision if isinstance(vision, bool) else base.vision,
        )

    def parallel_slots(self, ask: Question) -> int | None:
        """The native server's ``/props`` ``total_slots`` (its ``-np``); discovery failures
        propagate (nothing is remembered)."""
        return positive_int((self.server(ask).props or {}).get("total_slots"))

    def annotate_models(self, ask: Question, models: list[ModelInfo]) -> None:
        """The native server's running window as every model's ``context_length``."""
        window = self._window(ask)
        if window is None:
            return
        for info in models:
            info.context_length = window
            info.details["context_length_source"] = "props.n_ctx"
