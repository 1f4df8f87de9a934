"""Properties of the chat runtime, checked with hypothesis over ScriptedProvider.

* Event stream forwarding, abort signal cancellation, tool call queuing and execution, tool
  result continuation, parallel tool execution, the maximum turn limit.
* Turn initialization, event collection completeness, conversation history update, message
  structure validity, the tool message name field, tool execution error handling (runtime
  side), abort signal cleanup, unexpected error resilience.

The registry's properties are in tests/test_registry.py; ScriptedProvider as an
adapter in tests/providers/test_scripted.py. Parallelism is shown with a barrier every call
must reach while the others wait, so it needs no timing assertion.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from support.transport_support import wait_for_threads

from ollm_lite.chat import ChatClient
from ollm_lite.providers.scripted import ScriptedProvider, ScriptedTurn
from ollm_lite.tools import tool
from ollm_lite.types import (
    ChatEvent,
    ChatFinishEvent,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    Message,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolResult,
    TurnCompleteEvent,
    WarningEvent,
)

THREADED = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FAST = settings(max_examples=100, deadline=None)


class Recording(ScriptedProvider):
    """A ScriptedProvider that logs when each stream is closed and what each request held."""

    def __init__(self, turns: Any = (), **kw: Any) -> None:
        super().__init__(turns, **kw)
        self.log: list[str] = []
        self.snapshots: list[list[Message]] = []
        self.open_streams = 0
        self._log_lock = threading.Lock()

    def note(self, entry: str) -> None:
        with self._log_lock:
            self.log.append(entry)

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        self.snapshots.append(list(request.messages))
        inner = super().chat_stream(request)
        return self._wrap(inner)

    def _wrap(self, inner: Iterator[ProviderEvent]) -> Iterator[ProviderEvent]:
        self.open_streams += 1
        try:
            yield from inner
        finally:
            self.open_streams -= 1
            self.note("stream_closed")


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


texts = st.text(max_size=20)
stream_events = st.lists(st.one_of(texts.map(TextEvent), texts.map(ThinkingEvent)), max_size=8)
pairs = st.lists(
    st.tuples(st.integers(-1000, 1000), st.integers(-1000, 1000)), min_size=1, max_size=5
)


def add_calls(turn: int, args: list[tuple[int, int]]) -> list[ToolCall]:
    return [
        ToolCall.from_arguments(f"t{turn}_{i}", "add", {"a": a, "b": b})
        for i, (a, b) in enumerate(args)
    ]


def tool_turn(calls: list[ToolCall], text: str = "") -> list[ProviderEvent]:
    events: list[ProviderEvent] = [TextEvent(text)] if text else []
    return [*events, *(ToolCallEvent(c) for c in calls), FinishEvent("tool")]


def finish(events: list[ChatEvent]) -> ChatFinishEvent:
    last = events[-1]
    assert isinstance(last, ChatFinishEvent)
    assert sum(isinstance(e, ChatFinishEvent) for e in events) == 1
    return last


def check_structure(history: list[Message]) -> None:
    """Message structure validity and tool message names over a whole history."""
    for message in history:
        assert message.role in ("system", "user", "assistant", "tool")
        assert len(message.parts) >= 1
        if message.role == "tool":
            assert message.name and message.tool_call_id
    # every assistant tool call is answered by one tool message with its id and name, in order
    for i, message in enumerate(history):
        if message.role == "assistant" and message.tool_calls:
            answers = history[i + 1 : i + 1 + len(message.tool_calls)]
            assert [(m.role, m.tool_call_id, m.name) for m in answers] == [
                ("tool", c.id, c.name) for c in message.tool_calls
            ]


# -------------------------------------------------------------------------- event stream forwarding


@FAST
@given(
    stream_events,
    st.one_of(
        st.sampled_from(["stop", "length"]).map(FinishEvent),
        st.sampled_from(["LLM_ERROR", "MODEL_NOT_FOUND", "LLM_RATE_LIMITED"]).map(
            lambda code: ErrorEvent(ErrorInfo(f"failed: {code}", code))
        ),
    ),
)
def test_events_are_forwarded_in_order(
    events: list[ProviderEvent], terminal: ProviderEvent
) -> None:
    """Event stream forwarding: same events, same order, same content."""
    provider = ScriptedProvider([[*events, terminal]])
    out = list(ChatClient(provider, model="m").chat("go"))
    runtime_only = (TurnCompleteEvent, ChatFinishEvent, WarningEvent)
    forwarded = [e for e in out if not isinstance(e, runtime_only)]
    if isinstance(terminal, ErrorEvent):
        assert forwarded == [*events, terminal]
        assert finish(out).reason == "error"
    else:
        assert forwarded == events
        assert finish(out).reason == "complete"


# ------------------------------------------------------------------------ abort signal cancellation


@FAST
@given(st.lists(texts.filter(bool), min_size=1, max_size=8), st.data())
def test_cancel_ends_the_stream_with_cancelled(chunks: list[str], data: st.DataObject) -> None:
    """Abort signal cancellation: the stream stops and reports ``cancelled``."""
    at = data.draw(st.integers(0, len(chunks) - 1))
    provider = Recording([[*(TextEvent(c) for c in chunks), FinishEvent("stop")]])
    cancel = threading.Event()
    out: list[ChatEvent] = []
    for event in ChatClient(provider, model="m").chat("go", cancel=cancel):
        out.append(event)
        if isinstance(event, TextEvent) and len(out) == at + 1:
            cancel.set()
    assert out == [*(TextEvent(c) for c in chunks[: at + 1]), ChatFinishEvent("cancelled")]
    assert provider.open_streams == 0


# ------------------------------------------------------------------ tool call queuing and execution


@THREADED
@given(pairs, st.lists(texts.filter(bool), max_size=3))
def test_calls_are_queued_and_run_after_the_stream(
    args: list[tuple[int, int]], prose: list[str]
) -> None:
    """Tool call queuing and execution: every call, once, after the stream ends."""
    calls = add_calls(1, args)
    provider = Recording()

    @tool
    def add(a: int, b: int) -> int:
        """Add.

        Args:
            a: First.
            b: Second.
        """
        provider.note(f"run {a} {b}")
        return a + b

    # text interleaved with the calls; all calls must wait for the stream's end
    events: list[ProviderEvent] = []
    for i, c in enumerate(calls):
        if i < len(prose):
            events.append(TextEvent(prose[i]))
        events.append(ToolCallEvent(c))
    provider.enqueue([*events, FinishEvent("tool")])
    provider.enqueue("done")
    out = list(ChatClient(provider, tools=[add], model="m").chat("go"))

    first_close = provider.log.index("stream_closed")
    runs = [entry for entry in provider.log if entry.startswith("run")]
    assert sorted(runs) == sorted(f"run {a} {b}" for a, b in args)
    assert all(provider.log.index(r) > first_close for r in runs)
    started = [e.tool_call for e in out if isinstance(e, ToolCallStartEvent)]
    assert started == calls
    assert [e.result.data for e in out if isinstance(e, ToolCallResultEvent)] == [
        a + b for a, b in args
    ]
    assert finish(out).reason == "complete"


# ------------------------------------------------------------------------- tool result continuation


@THREADED
@given(st.lists(pairs, min_size=1, max_size=3))
def test_results_continue_the_conversation(turns: list[list[tuple[int, int]]]) -> None:
    """Tool result continuation: results become tool messages of the next turn."""
    provider = Recording(
        [tool_turn(add_calls(n, args)) for n, args in enumerate(turns)] + ["answer"]
    )
    out = list(ChatClient(provider, tools=[add], model="m").chat("go"))
    assert finish(out).reason == "complete"
    assert len(provider.requests) == len(turns) + 1
    for n, args in enumerate(turns):
        before, after = provider.snapshots[n], provider.snapshots[n + 1]
        calls = add_calls(n, args)
        added = after[len(before) :]
        assert after[: len(before)] == before
        assert added[0].role == "assistant" and added[0].tool_calls == calls
        assert [(m.role, m.tool_call_id, m.text) for m in added[1:]] == [
            ("tool", c.id, ToolResult(ok=True, data=a + b).to_json())
            for c, (a, b) in zip(calls, args, strict=True)
        ]


# -------------------------------------------------------------------------- parallel tool execution


@THREADED
@given(st.integers(2, 6))
def test_calls_of_a_turn_run_concurrently(n: int) -> None:
    """Parallel tool execution: every call is running at the same time.

    Each call waits at a barrier for all ``n``: run one after another, the first would time
    out and fail; so all succeeding shows they ran together (wall time ≈ the slowest call).
    """
    barrier = threading.Barrier(n, timeout=5)

    @tool
    def meet(i: int) -> int:
        """Wait for every other call.

        Args:
            i: Index.
        """
        barrier.wait()
        return i

    calls = [ToolCall.from_arguments(f"c{i}", "meet", {"i": i}) for i in range(n)]
    provider = ScriptedProvider([tool_turn(calls), "ok"])
    started = time.monotonic()
    out = list(ChatClient(provider, tools=[meet], model="m", max_parallel_tools=n).chat("go"))
    assert time.monotonic() - started < 4.0  # generous: a sequential run would take 5 s or more
    results = [e.result for e in out if isinstance(e, ToolCallResultEvent)]
    assert [r.data for r in results] == list(range(n))
    assert finish(out).reason == "complete"


# ------------------------------------------------------------------------------- maximum turn limit


@THREADED
@given(st.integers(1, 6))
def test_max_turns_ends_an_endless_loop(max_turns: int) -> None:
    """Maximum turn limit: ``max_turns`` requests, then ``max_turns``."""
    provider = ScriptedProvider([tool_turn(add_calls(n, [(n, 1)])) for n in range(max_turns + 3)])
    out = list(ChatClient(provider, tools=[add], model="m", max_turns=max_turns).chat("go"))
    assert finish(out).reason == "max_turns"
    assert len(provider.requests) == max_turns
    assert [e.turn_number for e in out if isinstance(e, TurnCompleteEvent)] == list(
        range(1, max_turns + 1)
    )


# --------------------------------------------------------------------------- turns and history


@st.composite
def scripts(draw: st.DrawFn) -> list[list[ProviderEvent]]:
    """Some tool turns (with thinking and text), then a plain answer."""
    turns: list[list[ProviderEvent]] = []
    for n in range(draw(st.integers(0, 3))):
        lead = draw(stream_events)
        calls = add_calls(n, draw(pairs))
        turns.append([*lead, *(ToolCallEvent(c) for c in calls), FinishEvent("tool")])
    turns.append([*draw(stream_events), TextEvent(draw(texts)), FinishEvent("stop")])
    return turns


@THREADED
@given(scripts(), st.lists(texts, max_size=3))
def test_each_turn_starts_from_the_current_state(
    script: list[list[ProviderEvent]], earlier: list[str]
) -> None:
    """Turn initialization: a request holds the history so far and keeps it."""
    provider = Recording(["ok"] * len(earlier) + script)
    conversation = ChatClient(provider, tools=[add], model="m").conversation()
    for text in earlier:
        list(conversation.send(text))
    list(conversation.send("go"))
    for request, snapshot in zip(provider.requests, provider.snapshots, strict=True):
        assert request.messages == snapshot  # never changed after it was sent
    for before, after in zip(provider.snapshots, provider.snapshots[1:], strict=False):
        assert after[: len(before)] == before
    assert provider.snapshots[-1] == conversation.history[: len(provider.snapshots[-1])]


@THREADED
@given(scripts())
def test_a_turn_collects_everything_until_its_finish(
    script: list[list[ProviderEvent]],
) -> None:
    """Event collection completeness: text, thinking and calls of each turn."""
    provider = ScriptedProvider(script)
    conversation = ChatClient(provider, tools=[add], model="m").conversation()
    list(conversation.send("go"))
    assert len(conversation.turns) == len(script)
    for turn, events in zip(conversation.turns, script, strict=True):
        assert turn.text == "".join(e.value for e in events if isinstance(e, TextEvent))
        assert turn.thinking == "".join(e.value for e in events if isinstance(e, ThinkingEvent))
        assert turn.tool_calls == [e.value for e in events if isinstance(e, ToolCallEvent)]
        assert turn.finish_reason == events[-1].reason  # type: ignore[union-attr]
        assert [r.ok for r in turn.results] == [True] * len(turn.tool_calls)


def test_events_after_a_finish_are_not_consumed() -> None:
    """Event collection completeness: the turn ends at the finish; the runtime reads no further."""
    pulled: list[str] = []

    class Chatty(ScriptedProvider):
        def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
            self.requests.append(request)
            pulled.append("text")
            yield TextEvent("answer")
            pulled.append("finish")
            yield FinishEvent("stop")
            pulled.append("after")
            yield TextEvent("never")

    out = list(ChatClient(Chatty(), model="m").chat("go"))
    assert pulled == ["text", "finish"]
    assert [e for e in out if isinstance(e, TextEvent)] == [TextEvent("answer")]


@THREADED
@given(scripts())
def test_history_holds_whole_valid_exchanges(
    script: list[list[ProviderEvent]],
) -> None:
    """History update, message structure validity and the tool message name field: each turn
    adds its assistant message and every tool result."""
    provider = ScriptedProvider(script)
    conversation = ChatClient(provider, tools=[add], model="m").conversation()
    list(conversation.send("go"))
    history = conversation.history
    check_structure(history)
    expected: list[tuple[str, str]] = [("user", "go")]
    for turn in conversation.turns:
        expected.append(("assistant", turn.text))
        for call, result in zip(turn.tool_calls, turn.results, strict=True):
            assert result.ok
            expected.append(("tool", result.to_json()))
            assert call.name == "add"
    assert [(m.role, m.text) for m in history] == expected
    assert [m.tool_calls for m in history if m.role == "assistant"] == [
        t.tool_calls for t in conversation.turns
    ]


# -------------------------------------------------------------------- tool execution error handling


failures = st.sampled_from([ValueError, RuntimeError, KeyError, ZeroDivisionError, OSError])


@THREADED
@given(st.lists(st.tuples(st.booleans(), failures, st.text(max_size=15)), min_size=1, max_size=5))
def test_failed_tools_are_results_and_the_chat_goes_on(
    plan: list[tuple[bool, type[Exception], str]],
) -> None:
    """Tool execution error handling: the error is in the tool message and the
    next turn still happens."""

    @tool
    def maybe(i: int) -> int:
        """Fail when planned.

        Args:
            i: Index into the plan.
        """
        fails, exc_type, message = plan[i]
        if fails:
            raise exc_type(message)
        return i

    calls = [ToolCall.from_arguments(f"c{i}", "maybe", {"i": i}) for i in range(len(plan))]
    provider = ScriptedProvider([tool_turn(calls), "recovered"])
    conversation = ChatClient(provider, tools=[maybe], model="m").conversation()
    out = list(conversation.send("go"))
    assert finish(out).reason == "complete"
    assert len(provider.requests) == 2
    tool_messages = [m for m in provider.requests[1].messages if m.role == "tool"]
    assert len(tool_messages) == len(plan)
    for (fails, exc_type, _), message, result in zip(
        plan, tool_messages, conversation.turns[0].results, strict=True
    ):
        assert message.text == result.to_json()
        if fails:
            assert result.error is not None and result.error.code == "TOOL_EXECUTION_FAILED"
            assert exc_type.__name__ in result.error.message
        else:
            assert result.ok
    check_structure(conversation.history)


# ----------------------------------------------------------------------------- abort signal cleanup


@THREADED
@given(st.sampled_from(["stream", "tools", "close"]), st.integers(1, 4))
def test_abort_cleans_up(where: str, n: int) -> None:
    """Abort signal cleanup: stream closed, tool threads gone, running tools told,
    queued calls never started, one ``cancelled`` finish."""
    baseline = threading.active_count()
    started: list[int] = []
    told: list[int] = []
    entered = threading.Event()

    @tool
    def wait(i: int, cancel: threading.Event) -> int:
        """Wait until cancelled.

        Args:
            i: Index.
        """
        started.append(i)
        entered.set()
        if cancel.wait(5):
            told.append(i)
        return i

    calls = [ToolCall.from_arguments(f"c{i}", "wait", {"i": i}) for i in range(n)]
    turn = (
        ScriptedTurn([TextEvent("thinking about it")], hang=True)
        if where == "stream"
        else ScriptedTurn(tool_turn(calls))
    )
    provider = Recording([turn, "never"])
    client = ChatClient(provider, tools=[wait], model="m", max_parallel_tools=1)
    cancel = threading.Event()
    events: list[ChatEvent] = []
    gen = client.chat("go", cancel=cancel)
    t0 = time.monotonic()
    for event in gen:
        events.append(event)
        if isinstance(event, TextEvent | ToolCallStartEvent):
            if where == "tools":
                assert entered.wait(2)
            if where == "close":
                assert entered.wait(2)
                gen.close()
                break
            cancel.set()
    assert time.monotonic() - t0 < 2.0
    if where != "close":
        assert finish(events).reason == "cancelled"
    assert provider.open_streams == 0
    assert len(provider.requests) == 1
    assert wait_for_threads(baseline) <= baseline
    if where != "stream":
        assert started == [0]  # one slot: the queued calls never started
        assert told == [0]


class _HeldStream:
    """A provider stream the provider keeps a reference to: only an explicit ``close()`` by
    the runtime can mark it closed (garbage collection of a dropped generator cannot)."""

    def __init__(self, events: list[ProviderEvent]) -> None:
        self._events = iter(events)
        self.closed = False

    def __iter__(self) -> _HeldStream:
        return self

    def __next__(self) -> ProviderEvent:
        if self.closed:
            raise StopIteration
        return next(self._events)

    def close(self) -> None:
        self.closed = True


class _Holding(ScriptedProvider):
    """Streams that ignore ``request.cancel`` and stay referenced after the chat."""

    def __init__(self, events: list[ProviderEvent]) -> None:
        super().__init__()
        self.events = events
        self.streams: list[_HeldStream] = []

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        stream = _HeldStream(self.events)
        self.streams.append(stream)
        return stream


@FAST
@given(st.lists(texts.filter(bool), min_size=2, max_size=8), st.data())
def test_the_runtime_closes_the_provider_stream_itself(
    chunks: list[str], data: st.DataObject
) -> None:
    """Abort signal cleanup: on cancel the runtime stops reading and calls ``close()`` on the stream
    (its connection goes back or is dropped now), even for a provider deaf to the cancel."""
    at = data.draw(st.integers(0, len(chunks) - 2))
    provider = _Holding([*(TextEvent(c) for c in chunks), FinishEvent("stop")])
    cancel = threading.Event()
    out: list[ChatEvent] = []
    for event in ChatClient(provider, model="m").chat("go", cancel=cancel):
        out.append(event)
        if isinstance(event, TextEvent) and len(out) == at + 1:
            cancel.set()
    assert out == [*(TextEvent(c) for c in chunks[: at + 1]), ChatFinishEvent("cancelled")]
    [stream] = provider.streams
    assert stream.closed


def test_a_tool_ignoring_cancel_does_not_hold_the_chat() -> None:
    """A tool that never looks at the event is left running as a daemon thread;
    the chat still ends ``cancelled`` at once and its late result is dropped."""
    release = threading.Event()

    @tool
    def stubborn() -> str:
        """Ignores cancellation."""
        release.wait(10)
        return "late"

    calls = [ToolCall.from_arguments("c1", "stubborn", {})]
    provider = ScriptedProvider([tool_turn(calls), "never"])
    conversation = ChatClient(provider, tools=[stubborn], model="m").conversation()
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    t0 = time.monotonic()
    events = list(conversation.send("go", cancel=cancel))
    assert time.monotonic() - t0 < 2.0
    assert events[-1] == ChatFinishEvent("cancelled")
    [result] = [e.result for e in events if isinstance(e, ToolCallResultEvent)]
    assert result.error is not None and result.error.code == "CANCELLED"
    release.set()
    time.sleep(0.05)
    check_structure(conversation.history)  # the call was answered with the CANCELLED result
    assert conversation.turns[0].results == [result]


# ---------------------------------------------------------------------- unexpected error resilience


boom = st.sampled_from([RuntimeError, ValueError, KeyError, AttributeError, TypeError])


@FAST
@given(boom, st.text(max_size=20), st.integers(0, 3))
def test_unexpected_errors_become_error_events(
    exc_type: type[Exception], message: str, after: int
) -> None:
    """Unexpected error resilience: a provider bug is an ErrorEvent, the chat
    ends ``error``, nothing is raised and the client keeps working."""

    class Buggy(ScriptedProvider):
        def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
            if self.remaining:
                yield from super().chat_stream(request)
                return
            self.requests.append(request)
            for i in range(after):
                yield TextEvent(str(i))
            raise exc_type(message)

    provider = Buggy()
    client = ChatClient(provider, model="m")
    out = list(client.chat("go"))
    assert [e.value for e in out if isinstance(e, TextEvent)] == [str(i) for i in range(after)]
    errors = [e for e in out if isinstance(e, ErrorEvent)]
    assert len(errors) == 1 and exc_type.__name__ in errors[0].error.message
    assert finish(out).reason == "error"
    provider.enqueue("fine")
    again = list(client.chat("again"))
    assert again[0] == TextEvent("fine") and finish(again).reason == "complete"


def test_text_part_helper_is_what_history_uses() -> None:
    """Assistant messages of tool-only turns still carry a (possibly empty) text part."""
    calls = add_calls(0, [(1, 2)])
    conversation = ChatClient(
        ScriptedProvider([tool_turn(calls), "3"]), tools=[add], model="m"
    ).conversation()
    list(conversation.send("go"))
    assert conversation.history[1].parts == [TextPart("")]
