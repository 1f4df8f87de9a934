"""One turn's tool calls, run in parallel on a bounded set of daemon threads.

:class:`ToolBatch` starts ``width`` workers that take the calls in order; queued calls wait
their turn. Results come back in call order whatever order the tools finish in. Every call
gets a cancel event of its own, set when the chat is cancelled and when that call runs past
``timeout``: a tool that takes ``cancel`` (an MCP server's tool among them) learns that its
result is no longer wanted and can stop its work. Python cannot stop a thread, so a tool
that ignores its event runs on as a daemon and its late result is dropped.

:func:`run_tool_calls` is the chat loop's view: it yields the start and result events and returns
the results.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Generator, Iterator

from .._safe_text import exception_text, type_name
from ..tools import ToolRegistry
from ..tools._calls import failure
from ..types import (
    ChatEvent,
    ToolCall,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolResult,
)

__all__ = ["ToolBatch", "run_tool_calls"]

POLL_S = 0.02  # how often a wait for tool results looks at the cancel event


def run_tool_calls(
    registry: ToolRegistry,
    calls: list[ToolCall],
    cancel: threading.Event,
    *,
    width: int,
    timeout: float | None,
    announce: list[ToolCall] | None = None,
) -> Generator[ChatEvent, None, list[ToolResult]]:
    """Run ``calls``; yield their start and result events; return the results in call order.

    ``announce``: the calls to yield start events for (default ``calls``), in order.
    """
    # Started before the start events go out: a slow consumer does not hold the tools back.
    batch = ToolBatch(registry, calls, cancel, width, timeout)
    for call in calls if announce is None else announce:
        yield ToolCallStartEvent(call)
    results: list[ToolResult] = []
    for call, result in zip(calls, batch.results_in_order(), strict=True):
        results.append(result)
        yield ToolCallResultEvent(call, result)
    return results


class ToolBatch:
    """The tool calls of one turn on ``width`` daemon threads; queued calls wait their turn."""

    def __init__(
        self,
        registry: ToolRegistry,
        calls: list[ToolCall],
        cancel: threading.Event,
        width: int,
        timeout: float | None,
    ) -> None:
        self._registry = registry
        self._calls = calls
        self._cancel = cancel
        self._timeout = timeout
        self._results: list[ToolResult | None] = [None] * len(calls)
        self._started: list[float | None] = [None] * len(calls)
        self._done = [threading.Event() for _ in calls]
        self._call_cancel = [threading.Event() for _ in calls]
        self._next = 0
        self._lock = threading.Lock()
        self._workers: list[threading.Thread] = []
        for _ in range(min(width, len(calls))):
            self._start_worker()
        if calls:
            relay = threading.Thread(target=self._relay_cancel, name="ollm-tool-cancel")
            relay.daemon = True
            relay.start()

    def _relay_cancel(self) -> None:
        """Set every call's event once the chat's is set, even when nobody reads the results."""
        while not all(done.is_set() for done in self._done):
            if self._cancel.wait(POLL_S):
                self._cancel_all()
                return

    def _cancel_all(self) -> None:
        for event in self._call_cancel:
            event.set()

    def _start_worker(self) -> None:
        worker = threading.Thread(target=self._work, name="ollm-tool", daemon=True)
        self._workers.append(worker)
        worker.start()

    def _work(self) -> None:
        while True:
            with self._lock:
                index = self._next
                if index >= len(self._calls) or self._cancel.is_set():
                    return
                self._next += 1
                self._started[index] = time.monotonic()
            call = self._calls[index]
            result: ToolResult | None = None
            try:
                result = self._execute(call, self._call_cancel[index])
            except BaseException as exc:  # even KeyboardInterrupt: this thread must answer
                result = failure(
                    "TOOL_EXECUTION_FAILED",
                    f"tool {call.name!r} raised {exception_text(exc)}",
                    {"exception": type_name(exc)},
                )
            finally:  # whatever happened above, the call gets an answer and its waiter wakes
                self._settle(index, result or _stopped(call))
                self._done[index].set()

    def _execute(self, call: ToolCall, cancel: threading.Event) -> ToolResult:
        answer: object = self._registry.execute(call, cancel)
        if isinstance(answer, ToolResult):
            return answer
        # A registry subclass may break its contract: check rather than trust.
        return failure(
            "TOOL_RESULT_INVALID",
            f"tool {call.name!r} gave a {type_name(answer)}, not a ToolResult",
        )

    def results_in_order(self) -> Iterator[ToolResult]:
        """Each call's result, in call order, as soon as it is known."""
        for index, call in enumerate(self._calls):
            yield self._wait(index, call)

    def _wait(self, index: int, call: ToolCall) -> ToolResult:
        done = self._done[index]
        while not done.wait(POLL_S):
            if self._cancel.is_set():
                self._cancel_all()
                return self._settle(index, failure("CANCELLED", f"tool {call.name!r} cancelled"))
            if not any(worker.is_alive() for worker in self._workers) and not done.is_set():
                with self._lock:  # every worker is gone: run what is queued, answer the rest
                    queued = self._next <= index
                if not queued:
                    return self._settle(index, _stopped(call))
                self._start_worker()
                continue
            if self._overdue(index):
                return self._time_out(index, call)
        result = self._results[index]
        assert result is not None
        return result

    def _overdue(self, index: int) -> bool:
        started = self._started[index]
        return (
            self._timeout is not None
            and started is not None
            and time.monotonic() - started > self._timeout
        )

    def _time_out(self, index: int, call: ToolCall) -> ToolResult:
        timed_out = self._settle(
            index,
            failure(
                "TOOL_TIMEOUT",
                f"tool {call.name!r} did not finish within {self._timeout:g} s",
                {"timeout": self._timeout},
            ),
        )
        self._call_cancel[index].set()
        with self._lock:
            queued = self._next < len(self._calls)
        if queued:  # its thread is still stuck in the tool: the queue needs another
            self._start_worker()
        return timed_out

    def _settle(self, index: int, result: ToolResult) -> ToolResult:
        with self._lock:
            if self._results[index] is None:
                self._results[index] = result
            final = self._results[index]
        assert final is not None
        return final


def _stopped(call: ToolCall) -> ToolResult:
    return failure("TOOL_EXECUTION_FAILED", f"tool {call.name!r} stopped without a result")
