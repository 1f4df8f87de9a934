"""``cancel=`` on every I/O method of the built-in providers, and adapters without it.

Each case blocks on a loopback server that reads the request and never answers, with an idle
timeout far longer than the test: only the cancel event can end the call. Methods that never
raise (``context_length``, ``model_capabilities``, ``health``) end with their fallback answer;
the others raise ``Cancelled``. The chat runtime passes its cancel to adapters whose methods
take it and calls the others exactly as before (:func:`call_with_cancel`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from support.transport_support import serve, silent, wait_for_threads

from ollm_lite.errors import Cancelled
from ollm_lite.http.policy import Timeouts
from ollm_lite.providers import (
    AnthropicProvider,
    GeminiProvider,
    LocalProvider,
    OpenAICompatibleProvider,
    VllmProvider,
)
from ollm_lite.providers.base import call_with_cancel
from ollm_lite.tokens import TokenCounter
from ollm_lite.types import Message, ProviderCapabilities, ProviderRequest

SLOW = Timeouts(connect=5.0, idle=120.0)
BOUND = 30.0
"""Seconds a cancelled call may take on a busy machine (the idle timeout is 120 s)."""

REQUEST = ProviderRequest(model="m", messages=[Message.user("hello")])

Call = Callable[[Any, threading.Event], Any]

CASES: list[tuple[str, Callable[[str], Any], str, Call]] = [
    ("local.list_models", lambda u: LocalProvider(base_url=u, timeout=SLOW), "/api/tags",
     lambda p, c: p.list_models(cancel=c)),
    ("local.show_model", lambda u: LocalProvider(base_url=u, timeout=SLOW), "/api/show",
     lambda p, c: p.show_model("m", cancel=c)),
    ("local.delete_model", lambda u: LocalProvider(base_url=u, timeout=SLOW), "/api/delete",
     lambda p, c: p.delete_model("m", cancel=c)),
    ("local.embed", lambda u: LocalProvider(base_url=u, timeout=SLOW), "/api/embed",
     lambda p, c: p.embed(["a"], "e", cancel=c)),
    ("llamacpp.count_tokens",
     lambda u: OpenAICompatibleProvider(base_url=u, backend="llamacpp", timeout=SLOW),
     "/props", lambda p, c: p.count_tokens(REQUEST, cancel=c)),
    ("llamacpp.list_models",
     lambda u: OpenAICompatibleProvider(base_url=u, backend="llamacpp", timeout=SLOW),
     "/v1/models", lambda p, c: p.list_models(cancel=c)),
    ("kobold.count_tokens",
     lambda u: OpenAICompatibleProvider(base_url=u, backend="kobold", timeout=SLOW),
     "/api/extra/tokencount", lambda p, c: p.count_tokens(REQUEST, cancel=c)),
    ("generic.embed", lambda u: OpenAICompatibleProvider(base_url=u, timeout=SLOW),
     "/v1/embeddings", lambda p, c: p.embed(["a"], "e", cancel=c)),
    ("vllm.count_tokens", lambda u: VllmProvider(base_url=u, timeout=SLOW), "/tokenize",
     lambda p, c: p.count_tokens(REQUEST, cancel=c)),
    ("gemini.count_tokens", lambda u: GeminiProvider(base_url=u, api_key="k", timeout=SLOW),
     "/v1beta/models/m:countTokens", lambda p, c: p.count_tokens(REQUEST, cancel=c)),
    ("gemini.list_models", lambda u: GeminiProvider(base_url=u, api_key="k", timeout=SLOW),
     "/v1beta/models", lambda p, c: p.list_models(cancel=c)),
    ("gemini.embed", lambda u: GeminiProvider(base_url=u, api_key="k", timeout=SLOW),
     "/v1beta/models/e:batchEmbedContents", lambda p, c: p.embed(["a"], "e", cancel=c)),
    ("anthropic.count_tokens", lambda u: AnthropicProvider(base_url=u, timeout=SLOW),
     "/v1/messages/count_tokens", lambda p, c: p.count_tokens(REQUEST, cancel=c)),
    ("anthropic.list_models", lambda u: AnthropicProvider(base_url=u, timeout=SLOW),
     "/v1/models", lambda p, c: p.list_models(cancel=c)),
    ("anthropic.show_model", lambda u: AnthropicProvider(base_url=u, timeout=SLOW),
     "/v1/models", lambda p, c: p.show_model("m", cancel=c)),
]  # fmt: skip

NEVER_RAISE: list[tuple[str, Callable[[str], Any], str, Call, Callable[[Any], bool]]] = [
    ("local.context_length", lambda u: LocalProvider(base_url=u, timeout=SLOW), "/api/show",
     lambda p, c: p.context_length("m", cancel=c), lambda out: out is None),
    ("local.model_capabilities", lambda u: LocalProvider(base_url=u, timeout=SLOW), "/api/show",
     lambda p, c: p.model_capabilities("m", cancel=c),
     lambda out: isinstance(out, ProviderCapabilities)),
    ("local.health", lambda u: LocalProvider(base_url=u, timeout=SLOW), "/api/version",
     lambda p, c: p.health(cancel=c), lambda out: out.error.code == "CANCELLED"),
    ("lmstudio.context_length",
     lambda u: OpenAICompatibleProvider(base_url=u, backend="lmstudio", timeout=SLOW),
     "/api/v1/models", lambda p, c: p.context_length("m", cancel=c), lambda out: out is None),
    ("llamacpp.model_capabilities",
     lambda u: OpenAICompatibleProvider(base_url=u, backend="llamacpp", timeout=SLOW),
     "/props", lambda p, c: p.model_capabilities("m", cancel=c),
     lambda out: isinstance(out, ProviderCapabilities)),
    ("llamacpp.health",
     lambda u: OpenAICompatibleProvider(base_url=u, backend="llamacpp", timeout=SLOW),
     "/health", lambda p, c: p.health(cancel=c), lambda out: out.error.code == "CANCELLED"),
    ("vllm.context_length", lambda u: VllmProvider(base_url=u, timeout=SLOW), "/v1/models",
     lambda p, c: p.context_length("m", cancel=c), lambda out: out is None),
    ("vllm.server_version", lambda u: VllmProvider(base_url=u, timeout=SLOW), "/version",
     lambda p, c: p.server_version(cancel=c), lambda out: out is None),
    ("gemini.context_length", lambda u: GeminiProvider(base_url=u, api_key="k", timeout=SLOW),
     "/v1beta/models/m", lambda p, c: p.context_length("m", cancel=c), lambda out: out is None),
    ("gemini.health", lambda u: GeminiProvider(base_url=u, api_key="k", timeout=SLOW),
     "/v1beta/models", lambda p, c: p.health(cancel=c),
     lambda out: out.error.code == "CANCELLED"),
    ("anthropic.context_length", lambda u: AnthropicProvider(base_url=u, timeout=SLOW),
     "/v1/models", lambda p, c: p.context_length("m", cancel=c), lambda out: out is None),
    ("anthropic.health", lambda u: AnthropicProvider(base_url=u, timeout=SLOW),
     "/v1/models", lambda p, c: p.health(cancel=c), lambda out: out.error.code == "CANCELLED"),
]  # fmt: skip


def _cancelled_call(
    make: Callable[[str], Any], path: str, call: Call
) -> tuple[Any, BaseException | None]:
    """``call`` against a server silent on ``path``, the event set 0.2 s in."""
    baseline = threading.active_count()
    with serve({path: silent}) as server:
        provider = make(server.url)
        cancel = threading.Event()
        timer = threading.Timer(0.2, cancel.set)
        timer.start()
        started = time.monotonic()
        result: Any = None
        error: BaseException | None = None
        try:
            result = call(provider, cancel)
        except Exception as exc:  # the caller asserts on it
            error = exc
        elapsed = time.monotonic() - started
        timer.join()
        provider.close()
        assert [seen.path.split("?")[0] for seen in server.requests][:1] == [path]
    assert elapsed < BOUND, f"the call took {elapsed:.1f} s: cancel did not reach it"
    assert wait_for_threads(baseline) <= baseline
    return result, error


@pytest.mark.parametrize(("label", "make", "path", "call"), CASES, ids=[c[0] for c in CASES])
def test_cancel_interrupts_the_call(label: str, make: Any, path: str, call: Call) -> None:
    _, error = _cancelled_call(make, path, call)
    assert isinstance(error, Cancelled), f"{label}: {error!r}"
    assert error.code == "CANCELLED"


@pytest.mark.parametrize(
    ("label", "make", "path", "call", "fallback"), NEVER_RAISE, ids=[c[0] for c in NEVER_RAISE]
)
def test_cancel_ends_calls_that_never_raise_with_their_fallback(
    label: str, make: Any, path: str, call: Call, fallback: Callable[[Any], bool]
) -> None:
    result, error = _cancelled_call(make, path, call)
    assert error is None, f"{label} raised {error!r}"
    assert fallback(result), f"{label}: {result!r}"


# --------------------------------------------------------------------------- adapters' own


class Legacy:
    """An adapter written before ``cancel=`` existed."""

    name = "legacy"
    capabilities = ProviderCapabilities(token_counting=True)

    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def context_length(self, model: str) -> int | None:
        self.calls.append(("context_length", model))
        return 1000

    def count_tokens(self, request: ProviderRequest) -> int:
        self.calls.append(("count_tokens", request.model))
        return 7


class Modern(Legacy):
    """An adapter whose methods take ``cancel``, one through ``**kwargs``."""

    def context_length(self, model: str, *, cancel: threading.Event | None = None) -> int | None:
        self.calls.append(("context_length", cancel))
        return 2000

    def count_tokens(self, request: ProviderRequest, **kwargs: Any) -> int:
        self.calls.append(("count_tokens", kwargs.get("cancel")))
        return 9


def test_legacy_adapters_are_called_without_cancel() -> None:
    adapter = Legacy()
    cancel = threading.Event()
    check = TokenCounter(adapter).check(REQUEST, cancel=cancel)  # type: ignore[arg-type]
    assert (check.tokens, check.limit, check.exact) == (7, 1000, True)
    assert adapter.calls == [("count_tokens", "m"), ("context_length", "m")]


def test_adapters_that_take_cancel_receive_it() -> None:
    adapter = Modern()
    cancel = threading.Event()
    check = TokenCounter(adapter).check(REQUEST, cancel=cancel)  # type: ignore[arg-type]
    assert (check.tokens, check.limit) == (9, 2000)
    assert adapter.calls == [("count_tokens", cancel), ("context_length", cancel)]


def test_a_type_error_inside_the_adapter_is_not_masked() -> None:
    """The signature decides, never a ``TypeError``: one raised inside the method surfaces."""

    class Broken(Legacy):
        def context_length(self, model: str) -> int | None:
            raise TypeError("a bug in the adapter")

    with pytest.raises(TypeError, match="a bug in the adapter"):
        call_with_cancel(Broken(), "context_length", "m", cancel=threading.Event())


def test_a_method_set_on_the_instance_is_read_each_time() -> None:
    adapter = Legacy()
    seen: list[object] = []
    adapter.context_length = lambda model, cancel=None: seen.append(cancel) or 5  # type: ignore[method-assign]
    cancel = threading.Event()
    assert call_with_cancel(adapter, "context_length", "m", cancel=cancel) == 5
    assert seen == [cancel]
    assert call_with_cancel(Legacy(), "context_length", "m", cancel=cancel) == 1000


def test_a_cancelled_window_is_not_remembered() -> None:
    """A ``context_length`` cut short by cancel answers ``None``; the counter asks again."""
    adapter = Modern()
    cancel = threading.Event()
    cancel.set()
    counter = TokenCounter(adapter, default_limit=4096)  # type: ignore[arg-type]
    assert counter.limit("m", cancel=cancel) == 2000
    assert counter.limit("m") == 2000
    assert [name for name, _ in adapter.calls] == ["context_length", "context_length"]
