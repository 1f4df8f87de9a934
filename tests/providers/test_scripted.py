"""ScriptedProvider: replay, terminal events, recording, cancellation, the adapter contract."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from hypothesis import given, strategies as st

from ollm_lite.errors import Cancelled, OllmError
from ollm_lite.providers.base import ProviderAdapter, approx_token_count
from ollm_lite.providers.scripted import ScriptedProvider, ScriptedTurn
from ollm_lite.types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    Message,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)


def request(text: str = "hi", cancel: threading.Event | None = None) -> ProviderRequest:
    return ProviderRequest("m", [Message.user(text)], cancel=cancel)


def play(provider: ScriptedProvider, req: ProviderRequest | None = None) -> list[ProviderEvent]:
    return list(provider.chat_stream(req or request()))


def test_a_string_turn_is_text_then_stop() -> None:
    assert play(ScriptedProvider(["Hello."])) == [TextEvent("Hello."), FinishEvent("stop")]


def test_a_finish_is_added_stop_or_tool() -> None:
    call = ToolCall.from_arguments("c1", "add", {"a": 1})
    provider = ScriptedProvider([[TextEvent("a"), ThinkingEvent("b")], [ToolCallEvent(call)]])
    assert play(provider)[-1] == FinishEvent("stop")
    assert play(provider) == [ToolCallEvent(call), FinishEvent("tool")]


def test_the_turn_ends_at_its_first_terminal_event() -> None:
    usage = Usage(3, 4, 7)
    error = ErrorEvent(ErrorInfo("boom", "LLM_ERROR"))
    provider = ScriptedProvider(
        [
            [TextEvent("a"), FinishEvent("length", usage), TextEvent("never")],
            [error, FinishEvent("stop")],
        ]
    )
    assert play(provider) == [TextEvent("a"), FinishEvent("length", usage)]
    assert play(provider) == [error]


def test_an_exhausted_script_is_a_bad_response() -> None:
    provider = ScriptedProvider(["only"])
    play(provider)
    events = play(provider)
    assert len(events) == 1 and isinstance(events[0], ErrorEvent)
    assert events[0].error.code == "LLM_BAD_RESPONSE"
    assert "exhausted" in events[0].error.message


def test_requests_are_recorded_in_order_and_enqueue_appends() -> None:
    provider = ScriptedProvider(["one"])
    provider.enqueue(ScriptedTurn([TextEvent("two")]))
    provider.enqueue("three")
    assert provider.remaining == 3
    outputs = [play(provider, request(f"q{i}"))[0] for i in range(3)]
    assert outputs == [TextEvent("one"), TextEvent("two"), TextEvent("three")]
    assert [r.messages[0].parts[0].text for r in provider.requests] == ["q0", "q1", "q2"]  # type: ignore[union-attr]
    assert provider.remaining == 0


def test_a_bad_turn_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="scripted turn"):
        ScriptedProvider([42])  # type: ignore[list-item]


def test_cancel_before_the_request_finishes_at_once() -> None:
    cancel = threading.Event()
    cancel.set()
    provider = ScriptedProvider(["never shown"])
    assert play(provider, request(cancel=cancel)) == [FinishEvent("cancelled")]
    assert len(provider.requests) == 1


def test_cancel_interrupts_a_delay_promptly() -> None:
    cancel = threading.Event()
    provider = ScriptedProvider([ScriptedTurn([TextEvent("a"), TextEvent("b")], delay=30.0)])
    threading.Timer(0.1, cancel.set).start()
    start = time.monotonic()
    events = play(provider, request(cancel=cancel))
    assert events == [FinishEvent("cancelled")]
    assert time.monotonic() - start < 2.0


def test_cancel_between_events_stops_the_stream() -> None:
    cancel = threading.Event()
    provider = ScriptedProvider([[TextEvent("a"), TextEvent("b"), TextEvent("c")]])
    seen: list[ProviderEvent] = []
    for event in provider.chat_stream(request(cancel=cancel)):
        seen.append(event)
        cancel.set()
    assert seen == [TextEvent("a"), FinishEvent("cancelled")]


def test_hang_waits_for_cancel() -> None:
    cancel = threading.Event()
    provider = ScriptedProvider([ScriptedTurn([TextEvent("partial")], hang=True)])
    threading.Timer(0.1, cancel.set).start()
    start = time.monotonic()
    assert play(provider, request(cancel=cancel)) == [
        TextEvent("partial"),
        FinishEvent("cancelled"),
    ]
    assert 0.05 < time.monotonic() - start < 2.0


def test_hang_without_a_cancel_event_is_an_error_not_a_deadlock() -> None:
    provider = ScriptedProvider([ScriptedTurn([], hang=True)])
    events = play(provider)
    assert isinstance(events[-1], ErrorEvent) and events[-1].error.code == "LLM_TIMEOUT"


def test_chat_collects_a_whole_result_and_raises_stream_errors() -> None:
    call = ToolCall.from_arguments("c1", "f", {})
    provider = ScriptedProvider(
        [
            [ThinkingEvent("hmm"), TextEvent("a"), TextEvent("b"), ToolCallEvent(call)],
            [ErrorEvent(ErrorInfo("model not found", "MODEL_NOT_FOUND"))],
            ScriptedTurn([TextEvent("x")], hang=True),
        ]
    )
    result = provider.chat(request())
    assert (result.content, result.thinking, result.tool_calls) == ("ab", "hmm", [call])
    assert result.finish_reason == "tool_calls"
    with pytest.raises(OllmError) as info:
        provider.chat(request())
    assert info.value.code == "MODEL_NOT_FOUND"
    cancel = threading.Event()
    threading.Timer(0.05, cancel.set).start()
    with pytest.raises(Cancelled):
        provider.chat(request(cancel=cancel))


def test_concurrent_requests_each_get_one_distinct_turn() -> None:
    n = 40
    provider = ScriptedProvider([str(i) for i in range(n)])
    got: list[str] = []
    lock = threading.Lock()

    def worker() -> None:
        events = play(provider)
        assert isinstance(events[0], TextEvent)
        with lock:
            got.append(events[0].value)

    threads = [threading.Thread(target=worker) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert sorted(got, key=int) == [str(i) for i in range(n)]
    assert len(provider.requests) == n


def test_context_length_capabilities_and_repr() -> None:
    caps = ProviderCapabilities(tool_calling=False)
    provider = ScriptedProvider(["a"], name="fake", capabilities=caps, context_length=2048)
    assert provider.name == "fake"
    assert provider.context_length("any") == 2048
    assert provider.model_capabilities("any") is caps
    assert repr(provider) == "ScriptedProvider(name='fake', turns_left=1)"
    assert ScriptedProvider().context_length("m") is None


# --------------------------------------------------------------------------- properties


@given(st.text(max_size=40), st.booleans())
def test_provider_interface_compliance(text: str, counting: bool) -> None:
    """Provider interface compliance: a stream of events, one terminal."""
    provider = ScriptedProvider([text], token_counter=(lambda r: 5) if counting else None)
    assert isinstance(provider, ProviderAdapter)
    assert provider.streaming_format == "memory"
    events = play(provider)
    terminal = [e for e in events if isinstance(e, FinishEvent | ErrorEvent)]
    assert terminal == [events[-1]]


@given(
    st.lists(st.text(max_size=200), min_size=1, max_size=5),
    st.one_of(st.none(), st.integers(1, 10**6)),
)
def test_token_counting_is_positive(texts: list[str], fixed: int | None) -> None:
    """Optional method presence: count_tokens returns a positive number."""
    counter: Any = None if fixed is None else (lambda r: fixed)
    provider = ScriptedProvider(token_counter=counter)
    req = ProviderRequest("m", [Message.user(t) for t in texts])
    assert provider.capabilities.token_counting is (fixed is not None)
    count = provider.count_tokens(req)
    assert count >= 1
    assert count == (fixed if fixed is not None else max(1, approx_token_count(req)))
