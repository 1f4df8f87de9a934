"""Token limit warning and enforcement at the runtime level: what a chat does near its context
window.

* Token limit warning: a request using 90 % to 100 % of the window is preceded by
  ``WarningEvent("TOKEN_LIMIT_WARNING")`` and still sent; below 90 % nothing warns.
* Token limit enforcement: a request over the window is never sent; the chat ends
  with ``ErrorEvent(TOKEN_LIMIT_EXCEEDED)`` then ``ChatFinishEvent("token_limit")``.

The window comes from ``ChatClient(context_limits=...)`` or from the provider's
``context_length``; the count from the provider's tokenizer (``token_counter``) or from the
ceil(chars / 4) estimate. ``TokenCounter``'s own flags are checked in
test_runtime_props_tools.py; here the chat runtime is driven over ``ScriptedProvider``, which
records every request it receives. The warning tests use single-request chats, so they hold
whether the runtime warns once per chat or before every request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import assume, given, settings, strategies as st

from ollm_lite.chat import ChatClient
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tools import tool
from ollm_lite.types import (
    ChatEvent,
    ChatFinishEvent,
    ErrorEvent,
    FinishEvent,
    ProviderRequest,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    WarningEvent,
)

RUNTIME = settings(max_examples=100, deadline=None)
ANSWER = "the answer"


@dataclass(frozen=True)
class Setup:
    """How a chat learns its window and counts its request."""

    limit: int
    tokens: int
    window_from: str  # "config" or "provider"
    counted_by: str  # "tokenizer" or "estimate"

    def run(self) -> tuple[ScriptedProvider, list[ChatEvent]]:
        tokens = self.tokens
        counter = (lambda r: tokens) if self.counted_by == "tokenizer" else None
        provider = ScriptedProvider(
            [ANSWER],
            context_length=self.limit if self.window_from == "provider" else None,
            token_counter=counter,
        )
        limits = {"m": self.limit} if self.window_from == "config" else None
        client = ChatClient(provider, model="m", context_limits=limits)
        # The estimate of a lone user message of 4n characters is exactly n tokens.
        prompt = "x" * (4 * tokens) if self.counted_by == "estimate" else "hi"
        return provider, list(client.chat(prompt))


def ceil_90(limit: int) -> int:
    """The fewest tokens that are at least 90 % of ``limit`` (exact integer arithmetic)."""
    return -(-9 * limit // 10)


@st.composite
def setups(draw: st.DrawFn, band: str) -> Setup:
    counted_by = draw(st.sampled_from(["tokenizer", "estimate"]))
    # The estimate needs a real prompt of 4 characters a token: keep those windows small.
    limit = draw(st.integers(1, 10**6 if counted_by == "tokenizer" else 5000))
    if band == "warn":
        tokens = draw(st.integers(ceil_90(limit), limit))
    elif band == "below":
        tokens = draw(st.integers(1, max(1, ceil_90(limit) - 1)))
    else:
        tokens = draw(st.integers(limit + 1, limit + (10**6 if counted_by == "tokenizer" else 500)))
    return Setup(limit, tokens, draw(st.sampled_from(["config", "provider"])), counted_by)


def finish(events: list[ChatEvent]) -> ChatFinishEvent:
    last = events[-1]
    assert isinstance(last, ChatFinishEvent)
    assert sum(isinstance(e, ChatFinishEvent) for e in events) == 1
    return last


def warnings(events: list[ChatEvent]) -> list[int]:
    return [
        i
        for i, e in enumerate(events)
        if isinstance(e, WarningEvent) and e.code == "TOKEN_LIMIT_WARNING"
    ]


# ------------------------------------------------------------------------------ token limit warning


@RUNTIME
@given(setups("warn"))
def test_a_request_at_90_percent_warns_before_the_answer(setup: Setup) -> None:
    """Token limit warning: 90 % <= tokens <= 100 % of the window: one
    ``TOKEN_LIMIT_WARNING`` before the answer's first event, and the request is still sent."""
    provider, events = setup.run()
    assert len(provider.requests) == 1
    found = warnings(events)
    assert len(found) == 1, events
    first_text = next(i for i, e in enumerate(events) if isinstance(e, TextEvent))
    assert found[0] < first_text
    warning = events[found[0]]
    assert isinstance(warning, WarningEvent) and warning.message
    assert [e for e in events if isinstance(e, TextEvent)] == [TextEvent(ANSWER)]
    assert finish(events).reason == "complete"


@RUNTIME
@given(setups("below"))
def test_below_90_percent_nothing_warns(setup: Setup) -> None:
    """Token limit warning, other side: under 90 % of the window the chat has no token warning."""
    assume(ceil_90(setup.limit) > 1)  # a 1-token window has no positive count below 90 %
    provider, events = setup.run()
    assert warnings(events) == []
    assert len(provider.requests) == 1
    assert finish(events).reason == "complete"


# -------------------------------------------------------------------------- token limit enforcement


@RUNTIME
@given(setups("over"))
def test_a_request_over_the_window_is_never_sent(setup: Setup) -> None:
    """Token limit enforcement: nothing reaches the provider; the chat ends with
    ``TOKEN_LIMIT_EXCEEDED`` then ``ChatFinishEvent("token_limit")``."""
    provider, events = setup.run()
    assert provider.requests == []
    assert provider.remaining == 1  # the scripted answer was never played
    assert finish(events).reason == "token_limit"
    error = events[-2]
    assert isinstance(error, ErrorEvent)
    assert error.error.code == "TOKEN_LIMIT_EXCEEDED"
    assert not any(isinstance(e, TextEvent) for e in events)


@tool
def step(n: int) -> int:
    """Return the next number.

    Args:
        n: A number.
    """
    return n + 1


@RUNTIME
@given(
    st.integers(1, 6),  # tool turns before the answer
    st.integers(1, 200),  # tokens of the first request
    st.integers(1, 100),  # tokens each message adds
    st.integers(1, 2000),  # the window
)
def test_a_growing_tool_loop_stops_before_the_request_that_does_not_fit(
    tool_turns: int, base: int, per_message: int, limit: int
) -> None:
    """Every request sent fits the window, and the first one
    that would not is never sent (the chat then ends with ``token_limit``)."""

    def count(request: ProviderRequest) -> int:
        return base + per_message * len(request.messages)

    script: list[Any] = [
        [ToolCallEvent(ToolCall.from_arguments(f"c{i}", "step", {"n": i})), FinishEvent("tool")]
        for i in range(tool_turns)
    ]
    provider = ScriptedProvider([*script, ANSWER], token_counter=count)
    events = list(
        ChatClient(provider, tools=[step], model="m", context_limits={"m": limit}).chat("go")
    )
    # Request i holds the prompt plus an assistant message and a tool message per earlier turn.
    sizes = [base + per_message * (1 + 2 * i) for i in range(tool_turns + 1)]
    fitting = sum(1 for size in sizes if size <= limit)  # sizes grow: the fitting ones lead
    assert [count(r) for r in provider.requests] == sizes[:fitting]
    if fitting == len(sizes):
        assert finish(events).reason == "complete"
    else:
        assert finish(events).reason == "token_limit"
        error = events[-2]
        assert isinstance(error, ErrorEvent) and error.error.code == "TOKEN_LIMIT_EXCEEDED"
