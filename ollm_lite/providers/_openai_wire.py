"""Pure mapping between the library's types and the OpenAI Chat Completions wire format.

No I/O here: :func:`chat_body` builds request bodies, :class:`ChatStreamState` turns the data
of decoded SSE events into provider events, :func:`result_from_answer` reads a non-streamed
answer, and a few helpers read ``/v1/models`` and ``/v1/embeddings`` answers. Wire facts
follow openai-python's types and the vLLM / llama.cpp / LM Studio sources quoted in
:mod:`~ollm_lite.providers.backends`.

Tool-call fragments are assembled by ``index`` (:class:`ToolCallAssembler`) and tolerate every
quirk seen in the wild: a missing ``index``, one index reused for two calls with different
ids, ``id`` and ``name`` repeated in every fragment (llama.cpp servers), the whole call in one
fragment, ``arguments`` sent as an object instead of a string, the legacy ``function_call``
delta, and ``finish_reason: "stop"`` although tool calls were streamed. Complete calls are
emitted as ``ToolCallEvent`` just before the ``FinishEvent``.

Invariants of :class:`ChatStreamState`: exactly one terminal event per stream (``terminal`` is
set once and never replaced); text already returned stays valid when an error ends the stream;
``data: {"error": ...}`` ends it with one ``ErrorEvent`` (``LLM_BAD_RESPONSE``, the server's
message); a stream that stops without ``[DONE]`` and without a ``finish_reason`` ends with an
``ErrorEvent`` saying it was truncated.
"""

from __future__ import annotations

import json
import math
import random
import re
import string
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import BadResponse, ConfigError
from ..streams import _scan_once
from ..types import (
    ChatResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    FinishReason,
    ImagePart,
    Message,
    ModelInfo,
    Part,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    ToolSchema,
    Usage,
)
from .backends import Backend
from .base import MAX_TOOL_ARGUMENTS, MAX_TOOL_CALLS, merge_body

__all__ = [
    "choice_zero",
    "ChatStreamState",
    "ToolCallAssembler",
    "chat_body",
    "embeddings_from",
    "merge_body",
    "message_from_openai",
    "message_to_openai",
    "messages_to_openai",
    "model_info_from_openai",
    "result_from_answer",
    "tools_to_openai",
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

_ID_ALPHABET = string.ascii_letters + string.digits
_rng = random.SystemRandom()
_EMPTY: tuple[ProviderEvent, ...] = ()


def new_call_id() -> str:
    """A fresh tool-call id for servers that send none (``call_`` + 24 random characters)."""
    return "call_" + "".join(_rng.choices(_ID_ALPHABET, k=24))


# --------------------------------------------------------------------------- requests


def _image_url(part: ImagePart) -> dict[str, Any]:
    data = part.data
    url = data if data.startswith("data:") else f"data:{part.mime_type};base64,{data}"
    return {"type": "image_url", "image_url": {"url": url}}


def message_to_openai(message: Message) -> dict[str, Any]:
    """One message in the Chat Completions shape.

    Text-only content is a string; a user message with images becomes a content list of
    ``text`` and ``image_url`` (data URL) parts. An assistant's tool calls carry their raw
    ``arguments`` text (``json.dumps(args)`` when there is none); a tool result carries its
    ``tool_call_id``.
    """
    role = message.role
    if role == "tool":
        return {"role": "tool", "tool_call_id": message.tool_call_id or "", "content": message.text}
    images = message.images
    if images and role == "user":
        content: Any = [{"type": "text", "text": message.text}] if message.text else []
        content.extend(_image_url(p) for p in images)
    else:
        content = message.text
    out: dict[str, Any] = {"role": role, "content": content}
    if role == "assistant" and message.tool_calls:
        out["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {
                    "name": call.name,
                    "arguments": call.arguments or json.dumps(call.args),
                },
            }
            for call in message.tool_calls
        ]
    return out


def messages_to_openai(
    messages: Sequence[Message], system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` list, with ``system_prompt`` (when given) as the first message."""
    out = [{"role": "system", "content": system_prompt}] if system_prompt else []
    out.extend(message_to_openai(m) for m in messages)
    return out


def message_from_openai(obj: dict[str, Any]) -> Message:
    """A Chat Completions message as a :class:`Message` (the inverse of
    :func:`message_to_openai` on canonical messages: text first, then images).

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` for an unknown role or a message that is not an object.
    """
    if not isinstance(obj, dict) or obj.get("role") not in ("system", "user", "assistant", "tool"):
        raise BadResponse(f"not a chat message: {obj!r:.200}")
    content = obj.get("content")
    parts: list[Part] = []
    if isinstance(content, str):
        if content:
            parts.append(TextPart(content))
    elif isinstance(content, list):
        for item in content:
            if not isinstance(item, dict):
                continue
            if item.get("type") == "text" and isinstance(item.get("text"), str):
                parts.append(TextPart(item["text"]))
            elif item.get("type") == "image_url":
                url = (item.get("image_url") or {}).get("url", "")
                head, _, data = url.partition(";base64,")
                parts.append(ImagePart(data, head.removeprefix("data:") or "image/png"))
    calls = [
        ToolCall.from_arguments(
            c.get("id") or new_call_id(),
            (c.get("function") or {}).get("name") or "",
            (c.get("function") or {}).get("arguments"),
        )
        for c in obj.get("tool_calls") or ()
        if isinstance(c, dict)
    ]
    return Message(obj["role"], parts, tool_call_id=obj.get("tool_call_id"), tool_calls=calls)


def tools_to_openai(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """``tools`` as ``[{"type": "function", "function": {name, description, parameters}}]``."""
    out = []
    for tool in tools:
        function: dict[str, Any] = {"name": tool.name}
        if tool.description:
            function["description"] = tool.description
        function["parameters"] = tool.parameters or {"type": "object", "properties": {}}
        out.append({"type": "function", "function": function})
    return out


def _response_format(fmt: Any, backend: Backend) -> dict[str, Any]:
    if fmt == "json":
        return {"type": "json_object"}
    if isinstance(fmt, dict):
        if fmt.get("type") in ("json_schema", "json_object", "text"):
            return fmt  # already in the wire shape
        if backend.schema_format == "json_object":
            return {"type": "json_object", "schema": fmt}
        return {"type": "json_schema", "json_schema": {"name": "response", "schema": fmt}}
    raise ConfigError(f"response_format must be None, 'json' or a JSON Schema dict, not {fmt!r}")


def _add_think(body: dict[str, Any], think: Any, backend: Backend) -> None:
    if think is None:
        return
    if isinstance(think, bool):
        if backend.thinking_switch == "chat_template_kwargs":
            body["chat_template_kwargs"] = {"enable_thinking": think}
        elif not think:
            body["reasoning_effort"] = "none"
        return
    if not isinstance(think, str) or not think:
        raise ConfigError(f"think must be true, false or an effort level, not {think!r}")
    body["reasoning_effort"] = think


_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ms|h|m|s)")


def keep_alive_seconds(value: str | float) -> int | None:
    """``keep_alive`` as whole seconds: a number of seconds or a Go-style duration
    (``"5m"``, ``"1h30m"``, ``"90s"``); ``None`` for a negative value (keep forever: send
    nothing).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for text that is no duration.
    """
    if isinstance(value, bool):
        raise ConfigError(f"keep_alive must be seconds or a duration like '5m', not {value!r}")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = str(value).strip()
        sign = -1.0 if text.startswith("-") else 1.0
        body = text.lstrip("+-")
        try:
            seconds = float(body) * sign
        except ValueError:
            pieces = _DURATION.findall(body)
            if not body or "".join(n + u for n, u in pieces) != body:
                raise ConfigError(
                    f"keep_alive must be seconds or a duration like '5m', not {value!r}"
                ) from None
            scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
            seconds = sign * sum(float(n) * scale[u] for n, u in pieces)
    if seconds < 0:
        return None
    return math.ceil(seconds)


def chat_body(
    request: ProviderRequest,
    backend: Backend,
    *,
    stream: bool = True,
    extend_extra: bool = True,
) -> dict[str, Any]:
    """The JSON body of ``POST /v1/chat/completions`` for ``request``.

    ``stream_options.include_usage`` is sent when streaming and the backend accepts it.
    ``tool_choice`` is left out for ``"auto"`` (every server's default when tools are given),
    sent as ``"none"`` or ``"required"``, or as ``{"type": "function", "function": {"name":
    ...}}`` to force a tool. ``response_format``: ``"json"`` → ``{"type": "json_object"}``, a
    JSON Schema → ``{"type": "json_schema", ...}`` (``{"type": "json_object", "schema": ...}``
    for the llama.cpp servers). ``repeat_penalty`` goes under the
    backend's own key. ``think``: an effort level → ``reasoning_effort``; ``True``/``False``
    the backend's way (:attr:`~ollm_lite.providers.backends.Backend.thinking_switch`).
    ``keep_alive`` → the backend's key in seconds (LM Studio ``ttl``); other servers keep
    their models loaded and get nothing.
    ``options.extra_body`` is merged last (nested objects key by key), unless ``extend_extra``
    is false (the caller merges it itself).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when a forced tool is not among ``request.tools`` or
            ``response_format`` has an unknown shape.
    """
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages_to_openai(request.messages, request.system_prompt),
        "stream": stream,
    }
    if stream and backend.include_usage:
        body["stream_options"] = {"include_usage": True}
    opts = request.options
    for key, value in (
        ("temperature", opts.temperature),
        ("max_tokens", opts.max_tokens),
        ("top_p", opts.top_p),
        ("top_k", opts.top_k),
        (backend.repeat_penalty_key, opts.repeat_penalty),
        ("seed", opts.seed),
        ("stop", opts.stop),
        ("presence_penalty", opts.presence_penalty),
        ("frequency_penalty", opts.frequency_penalty),
    ):
        if value is not None:
            body[key] = value
    tools = list(request.tools or ())
    choice = request.tool_choice
    if isinstance(choice, dict):
        wanted = choice.get("name")
        if not any(t.name == wanted for t in tools):
            raise ConfigError(f"tool_choice names {wanted!r}, which is not among the tools")
    if tools:
        body["tools"] = tools_to_openai(tools)
        if isinstance(choice, dict):
            body["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        elif choice in ("none", "required"):
            body["tool_choice"] = choice
    if request.response_format is not None:
        body["response_format"] = _response_format(request.response_format, backend)
    _add_think(body, request.think, backend)
    if request.keep_alive is not None and backend.keep_alive_key is not None:
        seconds = keep_alive_seconds(request.keep_alive)
        if seconds is not None:
            body[backend.keep_alive_key] = seconds
    extra = opts.extra_body
    return merge_body(body, extra) if extra and extend_extra else body


# --------------------------------------------------------------------------- answers


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


class _Slot:
    """One tool call being assembled."""

    __slots__ = ("args", "id", "name", "parts", "size")

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.args: dict[str, Any] | None = None


class ToolCallAssembler:
    """Collects streamed tool-call fragments and builds complete :class:`ToolCall` values.

    Which call a fragment belongs to: the call with the same ``index`` — unless the fragment
    names a different ``id`` than that call, which starts a new call (servers reusing index 0
    for every call); without an ``index``, the call with the same ``id``, else the last call.
    ``id`` and ``name`` are taken from the first fragment that has them (repeats are ignored);
    string ``arguments`` are concatenated; an ``arguments`` object replaces what came before.
    """

    __slots__ = ("_by_id", "_by_index", "_slots", "problem")

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[Any, _Slot] = {}
        self._by_id: dict[str, _Slot] = {}
        self.problem: str | None = None
        """Set when the calls outgrew ``MAX_TOOL_ARGUMENTS`` or ``MAX_TOOL_CALLS``."""

    def __bool__(self) -> bool:
        return bool(self._slots)

    def add(self, fragment: Any) -> None:
        """Take one element of ``delta.tool_calls`` (non-objects are ignored)."""
        if not isinstance(fragment, dict):
            return
        index = fragment.get("index")
        call_id = fragment.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = None
        slot: _Slot | None
        if isinstance(index, int) and not isinstance(index, bool):
            slot = self._by_index.get(index)
            if slot is not None and call_id and slot.id and slot.id != call_id:
                slot = self._by_id.get(call_id)  # index reused for another call
        else:
            index = None
            slot = self._by_id.get(call_id) if call_id else None
            if slot is None and not call_id and self._slots:
                slot = self._slots[-1]
        if slot is None:
            if len(self._slots) >= MAX_TOOL_CALLS:
                self.problem = f"more than {MAX_TOOL_CALLS} tool calls in one answer"
                return
            slot = _Slot(call_id)
            self._slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        if call_id:
            if slot.id is None:
                slot.id = call_id
            self._by_id.setdefault(call_id, slot)
        function = fragment.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if name and isinstance(name, str) and not slot.name:
            slot.name = name
        args = function.get("arguments")
        if isinstance(args, str):
            if args:
                slot.size += len(args)
                if slot.size > MAX_TOOL_ARGUMENTS:
                    self.problem = (
                        f"tool call arguments longer than {MAX_TOOL_ARGUMENTS} characters "
                        f"({slot.name or 'unnamed'})"
                    )
                    return
                slot.parts.append(args)
        elif isinstance(args, dict):
            slot.args = args
            slot.parts.clear()
            slot.size = 0

    def calls(self) -> tuple[list[ToolCall], list[str]]:
        """The complete calls, in the order they began, and problems (calls without a name)."""
        calls: list[ToolCall] = []
        problems: list[str] = [self.problem] if self.problem else []
        for slot in self._slots:
            if not slot.name:
                problems.append(f"a tool call without a name (id {slot.id!r})")
                continue
            call_id = slot.id or new_call_id()
            if slot.args is not None and not slot.parts:
                calls.append(ToolCall.from_arguments(call_id, slot.name, slot.args))
            else:
                text = "".join(slot.parts)
                calls.append(ToolCall.from_arguments(call_id, slot.name, text if text else "{}"))
        return calls, problems


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
    """Assembles the events of one ``/v1/chat/completions`` stream from its SSE data strings.

    :meth:`handle` returns the events one ``data`` value completes (text, thinking) and sets
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

    def handle(self, data: str) -> Sequence[ProviderEvent]:
        """Events for one SSE ``data`` value (the hot path: one call per streamed token)."""
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
        if not choices:
            err = get("error")
            if err is None and get("object") == "error":  # vLLM's older flat error shape
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

    def _terminal(self) -> FinishEvent | ErrorEvent:
        terminal = self.terminal
        if terminal is None:  # pragma: no cover - _close always sets it
            raise AssertionError("no terminal event")
        return terminal

    def end(self) -> tuple[Sequence[ProviderEvent], FinishEvent | ErrorEvent]:
        """The last events and the terminal event once the body has ended.

        Without ``[DONE]`` the stream still finishes normally when a ``finish_reason`` arrived;
        otherwise it was truncated: an ``ErrorEvent`` (text already yielded stays valid).
        """
        if self.terminal is not None:
            return _EMPTY, self.terminal
        if self._finish is not None:
            events = self._close()
            return events, self._terminal()
        why = f"; {self.skipped} data line(s) were not JSON objects" if self.skipped else ""
        self.terminal = self._error(
            f"the stream ended early: no [DONE] and no finish_reason (the answer is truncated{why})"
        )
        return _EMPTY, self.terminal


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


# --------------------------------------------------------------------------- models, embeddings


def model_info_from_openai(entry: Any) -> ModelInfo:
    """One ``/v1/models`` entry as a :class:`ModelInfo`.

    ``context_length`` is what the server runs with: vLLM's ``max_model_len`` or llama.cpp's
    ``meta.n_ctx``. The trained maximum (``meta.n_ctx_train``) is never reported as the
    context length; it is kept in ``details["trained_context_length"]``.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` for an entry without an ``id``.
    """
    if not isinstance(entry, dict) or not isinstance(entry.get("id"), str):
        raise BadResponse(f"the server listed a model without an id: {entry!r:.200}")
    details: dict[str, Any] = {}
    for key in ("owned_by", "created", "root", "parent", "object"):
        if entry.get(key) is not None:
            details[key] = entry[key]
    context = _int(entry.get("max_model_len"))
    source = "max_model_len" if context is not None else None
    meta = entry.get("meta")
    if isinstance(meta, dict):
        details["meta"] = meta
        if _int(meta.get("n_ctx_train")) is not None:
            details["trained_context_length"] = meta["n_ctx_train"]
        if context is None and _int(meta.get("n_ctx")) is not None:
            context, source = meta["n_ctx"], "meta.n_ctx"
    details["context_length_source"] = source
    kind: Any = None
    if entry.get("type") in ("embeddings", "embedding"):
        kind = "embedding"
    elif entry.get("type") in ("llm", "vlm"):
        kind = "chat"
    return ModelInfo(name=entry["id"], details=details, context_length=context, kind=kind)


def embeddings_from(answer: Any, expected: int, *, model: str) -> list[list[float]]:
    """The vectors of one ``/v1/embeddings`` answer, in input order (sorted by ``index``).

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when there is no ``data`` list, the count is wrong,
            or a vector is not a list of numbers.
    """
    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise BadResponse(
            f"the /v1/embeddings answer for {model!r} has no 'data' list", model=model
        )
    if len(data) != expected:
        raise BadResponse(
            f"/v1/embeddings returned {len(data)} vectors for {expected} texts with {model!r}",
            model=model,
        )
    items = sorted(
        (d for d in data if isinstance(d, dict)),
        key=lambda d: _int(d.get("index")) or 0,
    )
    vectors: list[list[float]] = []
    for item in items:
        vec = item.get("embedding")
        if not isinstance(vec, list) or not all(
            isinstance(x, int | float) and not isinstance(x, bool) for x in vec
        ):
            raise BadResponse(
                f"/v1/embeddings returned a vector that is not a list of numbers for {model!r}",
                model=model,
            )
        vectors.append(vec)
    if len(vectors) != expected:
        raise BadResponse(f"/v1/embeddings returned malformed entries for {model!r}", model=model)
    return vectors
