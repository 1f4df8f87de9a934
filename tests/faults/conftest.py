"""Shared fixtures of the fault suite: providers of both wire formats and a leak check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from faults.fault_server import OLLAMA_CHAT, OPENAI_CHAT, Baseline

from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.transport import Timeouts

#: Small limits so every fault resolves in well under a second on loopback.
FAST = Timeouts(connect=1.0, idle=1.0)


class Wire:
    """One streaming wire format: how to build its provider and what its chat path is."""

    def __init__(self, name: str, path: str, content_type: str) -> None:
        self.name = name
        self.path = path
        self.content_type = content_type

    def provider(self, url: str, *, timeout: Any = FAST, retries: int = 0, **kw: Any) -> Any:
        if self.name == "ndjson":
            return LocalProvider(base_url=url, timeout=timeout, retries=retries, **kw)
        return OpenAICompatibleProvider(base_url=url, timeout=timeout, retries=retries, **kw)

    def __repr__(self) -> str:
        return self.name


NDJSON = Wire("ndjson", OLLAMA_CHAT, "application/x-ndjson")
SSE = Wire("sse", OPENAI_CHAT, "text/event-stream")


@pytest.fixture(params=[NDJSON, SSE], ids=["ndjson", "sse"])
def wire(request: pytest.FixtureRequest) -> Wire:
    """Each test runs once against Ollama (NDJSON) and once against OpenAI-compatible (SSE)."""
    param: Wire = request.param
    return param


@pytest.fixture
def no_leaks() -> Iterator[Callable[..., None]]:
    """A baseline of threads and descriptors, checked at the end of the test."""
    base = Baseline.take()
    checked: list[bool] = []

    def check(**kw: Any) -> None:
        checked.append(True)
        base.check(**kw)

    yield check
    if not checked:
        base.check()
