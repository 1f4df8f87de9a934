"""What an OpenAI-compatible server sends back, read without I/O: streamed chunks
(:class:`ChatStreamState`), whole answers (:func:`result_from_answer`), ``/v1/models`` entries
and ``/v1/embeddings`` answers.
Request bodies are :mod:`~ollm_lite.providers._openai_wire`.

Tool-call fragments are put together by
:class:`~ollm_lite.providers._openai_tool_calls.ToolCallAssembler`; complete calls are emitted
as ``ToolCallEvent`` just before the ``FinishEvent``.

Invariants of :class:`ChatStreamState`: exactly one terminal event per stream (``terminal`` is
set once and never replaced); text already returned stays valid when an error ends the stream;
``data: {"error": ...}`` ends it with one ``ErrorEvent`` (``LLM_BAD_RESPONSE``, the server's
message); a stream that stops without ``[DONE]`` and without a ``finish_reason`` ends with an
``ErrorEvent`` saying it was truncated.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from ..errors import BadResponse
from ..streams._ndjson import _scan_once
from ..types import (
    ChatResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    FinishReason,
    ProviderEvent,
    TextEvent,
    ThinkingEvent,
    ToolCallEvent,
    Usage,
)
from ._openai_tool_calls import ToolCallAssembler

if TYPE_CHECKING:
    from ..streams import SSEEvent

__all__ = [
    "ChatStreamState",
    "choice_zero",
    "error_payload",
    "result_from_answer",
    "usage_from_openai",
]

_FINISH: dict[str, FinishReason] = {
    "stop": "stop",
    "length": "length",
    "tool_calls": "tool",
    "function_call": "tool",
    "content_filter": "content_filter",
}
_RESULT_REASON = {"stop": "stop", "length": "length", "tool": "tool_calls"}

_EMPTY: tuple[ProviderEvent, ...] = ()
# TextEvent(text) without the call of its __init__ (a third of the event's cost), for the
# usual token chunk: the slot's own setter on a new instance.
_new = object.__new__
_set_text = TextEvent.__dict__["value"].__set__


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_from_openai(usage: Any, timings: Any = None) -> Usage | None:
    """A :class:`Usage` from ``usage`` (and llama.cpp's ``timings``, kept in ``extra``).

    ``prompt_tokens_details`` / ``completion_tokens_details`` (cached and reasoning tokens) go
    to ``extra`` too. ``None`` when neither object says anything.
    """
    extra: dict[str, Any] = {}
    if isinstance(timings, dict) and timings:
        extra["timings"] = timings
    if not isinstance(usage, dict):
        return Usage(None, None, None, extra) if extra else None
    prompt = _int(usage.get("prompt_tokens"))
    completion = _int(usage.get("completion_tokens"))
    total = _int(usage.get("total_tokens"))
    if total is None and prompt is not None and completion is not None:
        total = prompt + completion
    for key in ("prompt_tokens_details", "completion_tokens_details"):
        if isinstance(usage.get(key), dict):
            extra[key] = usage[key]
    return Usage(prompt, completion, total, extra)


def _same(text: str) -> str:
    return text


def _error_text(err: Any, redact: Callable[[str], str]) -> tuple[str, dict[str, Any]]:
    """The server's message and a few facts from an ``error`` member (object or string).

    Masked before it is cut: a key straddling the cut must not leave its head behind.
    """
    if isinstance(err, dict):
        facts = {
            k: redact(err[k]) if isinstance(err[k], str) else err[k]
            for k in ("type", "code", "param")
            if isinstance(err.get(k), str | int) and not isinstance(err.get(k), bool)
        }
        message = err.get("message")
        if message is None:
            return redact(json.dumps(err))[:500], facts
        return redact(str(message))[:1000], facts
    return redact(str(err))[:1000], {}


def _quote(value: Any, redact: Callable[[str], str], limit: int = 200) -> str:
    """A short quote of an answer's JSON for a message, masked before it is cut."""
    return redact(json.dumps(value))[:limit]


def choice_zero(choices: Any) -> tuple[dict[str, Any] | None, tuple[str, Any] | None]:
    """The choice with ``index`` 0 (the answer asked for), and what was malformed, if anything.

    Other choices are ignored: ``n > 1`` (sent through ``extra_body``) interleaves several
    answers, and merging them would splice their text and tool calls together. ``choices``
    must be a list of objects whose ``index`` (0 when absent) is an integer.
    """
    if not isinstance(choices, list):
        return None, ("choices", choices)
    for choice in choices:
        if not isinstance(choice, dict):
            return None, ("choices", choices)
        index = choice.get("index", 0)
        if not isinstance(index, int) or isinstance(index, bool):
            return None, ("choice index", index)
        if index == 0:
            return choice, None
    return None, None


class ChatStreamState:
    """Assembles the events of one ``/v1/chat/completions`` stream from its SSE events.

    :meth:`feed` returns the events one SSE event completes (text, thinking) and sets
    :attr:`terminal` when the stream is over (``[DONE]`` or an error object); :meth:`end`
    gives the terminal event once the body has ended, whatever happened.
    """

    __slots__ = (
        "_calls",
        "_finish",
        "_info",
        "_redact",
        "_refused",
        "_timings",
        "_usage",
        "skipped",
        "terminal",
    )

    def __init__(
        self,
        *,
        provider: str = "openai-compatible",
        model: str | None = None,
        url: str = "",
        redact: Callable[[str], str] = _same,
    ) -> None:
        self._calls = ToolCallAssembler()
        self._finish: str | None = None
        self._refused = False
        self._redact = redact
        self._usage: Any = None
        self._timings: Any = None
        self._info: dict[str, Any] = {"provider": provider, "model": model, "url": url}
        self.skipped = 0
        """``data`` values that were not JSON objects (skipped)."""
        self.terminal: FinishEvent | ErrorEvent | None = None

    def _error(self, message: str, **facts: Any) -> ErrorEvent:
        return ErrorEvent(ErrorInfo(message, BadResponse.code, {**self._info, **facts}))

    def feed(self, event: str | SSEEvent) -> Sequence[ProviderEvent]:
        """Events for one SSE event (the hot path: one call per streamed token): the data of
        a ``message`` event (as :class:`~ollm_lite.streams.SSEDataDecoder` hands it over), or
        the whole event."""
        if type(event) is str:
            data = event
        else:
            data = event.data  # type: ignore[union-attr]
            if event.event == "error":  # type: ignore[union-attr]  # some servers name the event
                data = error_payload(data)
        if data[:1] != "{":
            if data.startswith("[DONE]"):
                return self._close()
            self.skipped += 1
            return _EMPTY
        try:
            # The scanner json.loads wraps, without its two whitespace regexes (~15 % of this
            # call). "{" always scans to a dict; trailing text takes json.loads's exact path.
            obj, end = _scan_once(data, 0)
            if end != len(data):
                obj = json.loads(data)
        except (ValueError, RecursionError, StopIteration):
            self.skipped += 1
            return _EMPTY
        get = obj.get
        choices = get("choices")
        usage = get("usage")
        if usage:
            self._usage = usage
        timings = get("timings")
        if timings:
            self._timings = timings
        if type(choices) is list and len(choices) == 1:
            # The usual token chunk: one choice 0, no finish yet, a delta of content only.
            choice = choices[0]
            if type(choice) is dict and choice.get("finish_reason") is None:
                index = choice.get("index", 0)
                delta = choice.get("delta")
                if type(index) is int and index == 0 and type(delta) is dict and len(delta) == 1:
                    content = delta.get("content")
                    if type(content) is str:
                        if not content:
                            return _EMPTY
                        piece = _new(TextEvent)
                        _set_text(piece, content)
                        return (piece,)
        return self._chunk(obj, choices)

    def _chunk(self, obj: dict[str, Any], choices: Any) -> Sequence[ProviderEvent]:
        """Any other chunk: an error object, a finish, a delta beyond plain content."""
        if not choices:
            err = obj.get("error")
            if err is None and obj.get("object") == "error":  # vLLM's older flat error shape
                err = obj
            if err is not None:
                message, facts = _error_text(err, self._redact)
                self.terminal = self._error(
                    f"the server reported an error mid-stream: {message}", **facts
                )
            elif choices is not None and not isinstance(choices, list):
                self.terminal = self._shape_error("choices", choices)
            return _EMPTY
        choice = self._own_choice(choices)
        if choice is None:
            return _EMPTY
        reason = choice.get("finish_reason")
        if reason is not None and not isinstance(reason, str):
            self.terminal = self._shape_error("finish_reason", reason)
            return _EMPTY
        if reason:
            self._finish = reason
        delta = choice.get("delta")
        if not delta:
            return _EMPTY
        if not isinstance(delta, dict):
            self.terminal = self._shape_error("delta", delta)
            return _EMPTY
        return self._delta(delta)

    def _shape_error(self, member: str, value: Any) -> ErrorEvent:
        quote = _quote(value, self._redact)
        return self._error(f"the server sent a chunk whose {member} is not valid: {quote}")

    def _own_choice(self, choices: Any) -> dict[str, Any] | None:
        """:func:`choice_zero`; a ``choices`` of the wrong shape ends the stream."""
        choice, bad = choice_zero(choices)
        if bad is not None:
            self.terminal = self._shape_error(bad[0], bad[1])
        return choice

    def _delta(self, delta: dict[str, Any]) -> Sequence[ProviderEvent]:
        content = delta.get("content")
        thinking = delta.get("reasoning_content") or delta.get("reasoning")
        refusal = delta.get("refusal")
        calls = delta.get("tool_calls")
        if calls:
            add = self._calls.add
            for fragment in calls if isinstance(calls, list) else (calls,):
                add(fragment)
            if self._calls.problem:
                self.terminal = self._error("the server sent " + self._calls.problem)
                return _EMPTY
        elif delta.get("function_call"):  # the legacy single-call delta
            self._calls.add({"index": 0, "function": delta["function_call"]})
        if refusal and isinstance(refusal, str):
            # OpenAI's structured-output refusal: the model's explanation, shown as text.
            self._refused = True
            content = refusal if not (content and isinstance(content, str)) else content + refusal
        if thinking and isinstance(thinking, str):
            if content and isinstance(content, str):
                return (ThinkingEvent(thinking), TextEvent(content))
            return (ThinkingEvent(thinking),)
        if content and isinstance(content, str):
            return (TextEvent(content),)
        return _EMPTY

    def _close(self) -> Sequence[ProviderEvent]:
        """``[DONE]``: the tool calls, and the finish (or an error) as the terminal event."""
        if self.terminal is not None:
            return _EMPTY
        calls, problems = self._calls.calls()
        if problems:
            self.terminal = self._error("the server sent " + "; ".join(problems))
            return _EMPTY
        reason: FinishReason = "tool" if calls else _FINISH.get(self._finish or "stop", "stop")
        if self._refused and not calls:
            reason = "refusal"
        self.terminal = FinishEvent(reason, usage_from_openai(self._usage, self._timings))
        return [ToolCallEvent(c) for c in calls]

    def end(self) -> Sequence[ProviderEvent]:
        """The last events once the body has ended, the terminal event last.

        Without ``[DONE]`` the stream still finishes normally when a ``finish_reason`` arrived;
        otherwise it was truncated: an ``ErrorEvent`` (text already returned stays valid).
        """
        events: Sequence[ProviderEvent] = _EMPTY
        if self.terminal is None and self._finish is not None:
            events = self._close()
        terminal = self.terminal
        if terminal is None:
            why = f"; {self.skipped} data line(s) were not JSON objects" if self.skipped else ""
            terminal = self.terminal = self._error(
                "the stream ended early: no [DONE] and no finish_reason (the answer is "
                f"truncated{why})"
            )
        return [*events, terminal]


def error_payload(data: str) -> str:
    """An ``event: error`` payload as ``{"error": ...}`` JSON, whatever the server sent."""
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        value = data
    if isinstance(value, dict) and "error" in value:
        return data
    return json.dumps({"error": value})


def result_from_answer(answer: Any, *, redact: Callable[[str], str] = _same) -> ChatResult:
    """A non-streamed ``chat.completion`` answer as a :class:`ChatResult`.

    The choice with ``index`` 0 is the answer (others, asked for with ``n > 1``, are ignored).
    A ``refusal`` (OpenAI's structured outputs) is the content, with ``finish_reason``
    ``"refusal"``. ``redact`` masks secrets in the quotes of the answer put in messages.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` for an error object, or an answer without a choice
            carrying a message.
    """
    if not isinstance(answer, dict):
        raise BadResponse(f"the chat answer is not a JSON object: {_quote(answer, redact)}")
    err = answer.get("error")
    if err is None and answer.get("object") == "error":
        err = answer
    if err is not None:
        text, facts = _error_text(err, redact)
        raise BadResponse(f"the server reported an error: {text}", details=facts)
    choice, _ = choice_zero(answer.get("choices"))
    message: Any = choice.get("message") if choice is not None else None
    if not isinstance(message, dict):
        raise BadResponse(f"the chat answer has no message: {_quote(answer, redact)}")
    assembler = ToolCallAssembler()
    raw_calls = message.get("tool_calls")
    if isinstance(raw_calls, list) and raw_calls:
        for i, call in enumerate(raw_calls):
            if isinstance(call, dict):
                assembler.add({**call, "index": call.get("index", i)})
    elif isinstance(message.get("function_call"), dict):
        assembler.add({"index": 0, "function": message["function_call"]})
    calls, problems = assembler.calls()
    if problems:
        raise BadResponse("the server sent " + "; ".join(problems))
    content = message.get("content")
    refusal = message.get("refusal")
    thinking = message.get("reasoning_content") or message.get("reasoning")
    raw_finish = choice.get("finish_reason") if choice is not None else None
    finish = _FINISH.get(raw_finish, "stop") if isinstance(raw_finish, str) else "stop"
    reason: Any = "tool_calls" if calls else _RESULT_REASON.get(finish, finish)
    if isinstance(refusal, str) and refusal and not calls:
        content = (content if isinstance(content, str) else "") + refusal
        reason = "refusal"
    return ChatResult(
        content=content if isinstance(content, str) else (None if calls else ""),
        finish_reason=reason,
        tool_calls=calls,
        usage=usage_from_openai(answer.get("usage"), answer.get("timings")),
        thinking=thinking if isinstance(thinking, str) and thinking else None,
    )
