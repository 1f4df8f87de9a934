"""Shared fixtures of the fault suite: providers of both wire formats and a leak check."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.fault_server import NDJSON, SSE, Baseline, Wire


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
