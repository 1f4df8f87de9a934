"""What a Messages API server sends back, read without I/O: the SSE stream of
``/v1/messages`` (:class:`MessagesDecoder`, :class:`ChatStreamState`), whole messages
(:meth:`ChatStreamState.handle_message`), errors, and ``/v1/models`` entries.
Request bodies are :mod:`~ollm_lite.providers._anthropic_wire`.

The stream (https://platform.claude.com/docs/en/build-with-claude/streaming): ``message_start``
(the message with empty ``content`` and the input usage), then per content block a
``content_block_start``, ``content_block_delta`` events (``text_delta``, ``thinking_delta``,
``signature_delta``, ``input_json_delta``) and a ``content_block_stop``; then ``message_delta``
(``stop_reason``, cumulative ``usage``) and ``message_stop``. ``ping`` events may come
anywhere; an ``error`` event (``{"type": "error", "error": {"type", "message"}}``) can end a
200 stream. Unknown event and block types are skipped, as the page asks of clients.

Streamed and whole answers give the same events: ``text`` blocks are ``TextEvent``s,
``thinking`` blocks ``ThinkingEvent``s, a ``tool_use`` block one ``ToolCallEvent`` once it is
complete (its ``input_json_delta`` fragments put together; unparseable arguments give
``args == {}`` with the raw text kept), then one ``FinishEvent`` carrying the usage and, as its
``provider_blocks``, the turn's ``thinking`` blocks (with their signature) and
``redacted_thinking`` blocks, in order, for the next request to send back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from ..errors import BadResponse, HTTPStatusError, ModelNotFound, OllmError
from ..http.errors import error_for_status
from ..streams import DEFAULT_MAX_LINE, SSEEvent, _SSEParser
from ..streams._ndjson import _scan_once
from ..types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    FinishReason,
    ModelInfo,
    ProviderBlock,
    ProviderEvent,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from ._anthropic_wire import ANSWER_TOOL, WIRE
from .base import MAX_TOOL_ARGUMENTS, MAX_TOOL_CALLS, usage_from

__all__ = [
    "ERROR_STATUS",
    "ChatStreamState",
    "MessagesDecoder",
    "about_the_model",
    "error_info",
    "model_info_from_entry",
    "refine_not_found",
]

_FINISH: dict[str, FinishReason] = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_use": "tool",
    "refusal": "refusal",
}
#: Anthropic's error types and the HTTP status each comes with
#: (https://platform.claude.com/docs/en/api/errors): an ``error`` event inside a 200 stream
#: maps exactly as the same error answered before the stream would.
ERROR_STATUS: dict[str, int] = {
    "invalid_request_error": 400,
    "authentication_error": 401,
    "billing_error": 402,
    "permission_error": 403,
    "not_found_error": 404,
    "request_too_large": 413,
    "rate_limit_error": 429,
    "api_error": 500,
    "timeout_error": 504,
    "overloaded_error": 529,
}
_NAMED = frozenset({"ping", "error"})  # the events whose name changes what their data means
_MODEL_WORD = re.compile(r"\bmodels?\b", re.IGNORECASE)
_EMPTY: tuple[ProviderEvent, ...] = ()
_new = object.__new__
_set_text = TextEvent.__dict__["value"].__set__


class MessagesDecoder(_SSEParser[str]):
    """The SSE decoder of :mod:`ollm_lite.streams` giving every event's ``data`` as a string.

    Every Messages API event names itself twice, as the SSE ``event:`` and as the ``type``
    member of its data, so the data alone is read (WHATWG rules, chunk boundaries anywhere,
    as :class:`~ollm_lite.streams.SSEDataDecoder`). A chunk holding exactly one
    ``event: …`` / ``data: …`` pair, as servers send each token, skips the line loop.

    ``ping`` events give nothing: they keep an idle connection open and are no progress of
    the answer, so they must not hold off the transport's idle limit, which counts the items
    a decoder gives (as it does the comment lines other SSE servers keep alive with).
    """

    __slots__ = ("_dropped",)

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        super().__init__(max_line=max_line)
        self._dropped = False

    def feed(self, chunk: bytes) -> list[str]:
        """The data of the events this chunk completes, in order (often empty).

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` when a line passes ``max_line`` bytes.
        """
        if (
            chunk[:7] == b"event: "
            and chunk[-2:] == b"\n\n"
            and not self._pieces
            and not self._data
            and self._head is None
            and not self._cr
            and len(chunk) <= self._max
        ):
            eol = chunk.find(b"\n")
            if (
                chunk[eol + 1 : eol + 7] == b"data: "
                and chunk.find(b"\n", eol + 1) == len(chunk) - 2
                and 13 not in chunk  # 13: CR
                and self._error is None
            ):
                name = chunk[7:eol]
                data = chunk[eol + 7 : -2].decode("utf-8", "replace")
                if name == b"ping" or name == b"error":
                    data = _named(name.decode("utf-8", "replace"), data)
                    return [data] if data else []
                return [data]
        datas = super().feed(chunk)
        if self._dropped:
            self._dropped = False
            return [d for d in datas if d]
        return datas

    def _dispatch(self, data: str) -> str:
        name = self._event
        self._event = ""
        self._retry = None
        if name in _NAMED:
            data = _named(name, data)
            if not data:  # a ping: left out by feed
                self._dropped = True
        return data

    def _messages(self, datas: list[str]) -> list[str]:
        return datas


def _named(name: str, data: str) -> str:
    """An event's data as the state reads it, by the event's name: ``""`` (nothing) for a
    ``ping``; for an ``error`` whose data is not the API's ``{"type": "error", "error": …}``,
    that object around it (llama.cpp's ``llama-server`` sends its own ``{"code", "message",
    "type"}`` as an ``error`` event's data, tools/server/server-context.cpp)."""
    if name == "ping":
        return ""
    if name != "error":
        return data
    try:
        obj = json.loads(data)
    except (ValueError, RecursionError):
        return data
    if isinstance(obj, dict) and obj.get("type") != "error":
        return json.dumps({"type": "error", "error": obj})
    return data


def about_the_model(message: str, model: str | None) -> bool:
    """Whether a "not found" answer is about the model: its message says "model" or names
    ``model`` (Anthropic's ``model: <name>``, Ollama's and vLLM's words). llama.cpp's
    ``llama-server`` answers ``not_found_error`` "File Not Found" for a path it does not
    serve, a FastAPI server (llama-cpp-python's) "Not Found": those are about the path."""
    if _MODEL_WORD.search(message):
        return True
    return bool(model) and str(model).lower() in message.lower()


def refine_not_found(exc: OllmError, *, model_hint: str = "", path: str | None = None) -> OllmError:
    """A 404 mapped as a missing route, read as the Messages API means it.

    ``MODEL_NOT_FOUND`` when the server's message is about the model
    (:func:`about_the_model`); else, for a request to ``path``, ``LLM_HTTP_ERROR`` saying that
    the server does not serve the Messages API there. Any other error is returned as it is.
    """
    if type(exc) is not HTTPStatusError or exc.status != 404:
        return exc
    said = str(exc.details.get("server_message") or "")
    where = f"{exc.provider} at {exc.details.get('url', '')}"
    server_says = f": {said}" if said else ""
    kw: dict[str, Any] = {"details": exc.details, "provider": exc.provider, "model": exc.model}
    if exc.model and about_the_model(said, exc.model):
        hint = f" {model_hint.format(model=exc.model)}" if model_hint else ""
        return ModelNotFound(
            f"model {exc.model!r} not found on {where}{server_says}.{hint}", status=404, **kw
        )
    if path is None:
        return exc
    if path == "/v1/messages":
        what = (
            "this server does not serve the Messages API (/v1/messages). llama.cpp's "
            "llama-server, vLLM, Ollama and LM Studio serve it; llama-cpp-python's server "
            "does not. Check the base URL (ANTHROPIC_BASE_URL)."
        )
    else:
        what = f"this server does not serve {path}."
    return HTTPStatusError(f"{where} answered HTTP 404{server_says}: {what}", status=404, **kw)


def error_info(
    error: Any,
    *,
    provider: str,
    url: str,
    model: str | None,
    redact: Callable[[str], str] = str,
    model_hint: str = "",
) -> ErrorInfo:
    """An ``error`` object from inside a stream, mapped as the HTTP answer it stands for
    (:func:`~ollm_lite.http.errors.error_for_status`, the one mapping): ``overloaded_error``
    and ``rate_limit_error`` are ``LLM_RATE_LIMITED``, ``authentication_error`` and
    ``permission_error`` ``LLM_AUTH_FAILED``, ``not_found_error`` ``MODEL_NOT_FOUND`` when its
    message is about the model (:func:`about_the_model`); others ``LLM_HTTP_ERROR`` with the
    server's message."""
    kind = error.get("type") if isinstance(error, dict) else None
    status = ERROR_STATUS.get(kind, 0) if isinstance(kind, str) else 0
    if not status:  # another server's own error object: its HTTP code, where it gives one
        code = _int(error.get("code")) if isinstance(error, dict) else None
        status = code if code is not None and 400 <= code <= 599 else 500
    body = json.dumps({"type": "error", "error": error}).encode()
    exc = error_for_status(
        status,
        body,
        {"content-type": "application/json"},
        provider=provider,
        url=url,
        model=model,
        redact=redact,
    )
    info = refine_not_found(exc, model_hint=model_hint).to_info()
    details = dict(info.details or {})
    details["in_stream"] = True
    return ErrorInfo(info.message, info.code, details)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _usage(raw: dict[str, Any]) -> Usage | None:
    """``prompt_tokens`` = input + cache read + cache creation; the cache figures in ``extra``."""
    if not raw:
        return None
    inputs = _int(raw.get("input_tokens"))
    read = _int(raw.get("cache_read_input_tokens"))
    created = _int(raw.get("cache_creation_input_tokens"))
    prompt = None if inputs is None else inputs + (read or 0) + (created or 0)
    extra = {"cache_read_input_tokens": read, "cache_creation_input_tokens": created}
    return usage_from(prompt, raw.get("output_tokens"), None, extra)


class _Block:
    """One content block being streamed: its type and what it has gathered so far."""

    __slots__ = ("data", "kind", "parts", "signature", "size")

    def __init__(self, kind: str, data: dict[str, Any]) -> None:
        self.kind = kind
        self.data = data
        self.parts: list[str] = []
        self.signature: str | None = None
        self.size = 0


class ChatStreamState:
    """Assembles the events of one Messages API answer: a stream's data payloads
    (:meth:`feed`) or a whole message (:meth:`handle_message`).

    Args:
        map_error: Maps an ``error`` object inside the stream to the ``ErrorInfo`` to report
            (the provider passes one naming itself and its server; default: :func:`error_info`
            without them).
        answer_wrapped: A structured answer was asked for (:data:`ANSWER_TOOL`): ``None``
            when not, else whether the answer is the ``value`` member of the tool's input.
        redact: Masks secrets in quotes of the answer.
    """

    __slots__ = (
        "_answer",
        "_blocks",
        "_calls",
        "_kept",
        "_map_error",
        "_redact",
        "_stop",
        "_usage",
        "content",
        "skipped",
        "stream_error",
        "terminal",
    )

    def __init__(
        self,
        map_error: Callable[[Any], ErrorInfo] | None = None,
        *,
        answer_wrapped: bool | None = None,
        redact: Callable[[str], str] = str,
    ) -> None:
        self._map_error = map_error or (
            lambda error: error_info(error, provider="anthropic", url="", model=None)
        )
        self._answer = answer_wrapped
        self._redact = redact
        self._blocks: dict[int, _Block] = {}
        self._kept: list[ProviderBlock] = []
        self._calls = 0
        self._stop: str | None = None
        self._usage: dict[str, Any] = {}
        self.content = False
        """Whether any text, thinking or tool call was produced (a retry must not repeat it)."""
        self.stream_error = False
        """Whether :attr:`terminal` is an ``error`` event of the stream (not a transport's)."""
        self.skipped = 0
        self.terminal: FinishEvent | ErrorEvent | None = None

    # ------------------------------------------------------------------ stream

    def feed(self, data: str | SSEEvent) -> list[ProviderEvent] | tuple[ProviderEvent, ...]:
        """Events for one SSE data payload (the hot path: one call per streamed token)."""
        if type(data) is not str:
            data = data.data  # type: ignore[union-attr]
        try:
            obj, end = _scan_once(data, 0)
            if end != len(data):
                obj = json.loads(data)
        except (ValueError, RecursionError, StopIteration):
            self.skipped += 1
            return _EMPTY
        if type(obj) is not dict:
            self.skipped += 1
            return _EMPTY
        kind = obj.get("type")
        if kind == "content_block_delta":
            delta = obj.get("delta")
            index = obj.get("index")
            block = self._blocks.get(index) if type(index) is int else None
            if type(delta) is not dict or block is None:
                return _EMPTY
            dkind = delta.get("type")
            if dkind == "text_delta" and block.kind == "text":
                text = delta.get("text")
                if text and type(text) is str:
                    self.content = True
                    event = _new(TextEvent)
                    _set_text(event, text)
                    return (event,)
                return _EMPTY
            return self._delta(block, dkind, delta)
        if kind == "content_block_start":
            index = obj.get("index")
            return self._start(index, obj.get("content_block")) if type(index) is int else _EMPTY
        if kind == "content_block_stop":
            index = obj.get("index")
            block = self._blocks.pop(index, None) if type(index) is int else None
            return self._complete(block) if block is not None else _EMPTY
        if kind == "message_start":
            message = obj.get("message")
            usage = message.get("usage") if isinstance(message, dict) else None
            if isinstance(usage, dict):
                self._usage.update(usage)
        elif kind == "message_delta":
            self._message_delta(obj)
        elif kind == "message_stop":
            self.terminal = self._finish()
        elif kind == "error":
            self.stream_error = True
            self.terminal = ErrorEvent(self._map_error(obj.get("error")))
        return _EMPTY

    def _message_delta(self, obj: dict[str, Any]) -> None:
        delta = obj.get("delta")
        if isinstance(delta, dict) and isinstance(delta.get("stop_reason"), str):
            self._stop = delta["stop_reason"]
        usage = obj.get("usage")
        if isinstance(usage, dict):  # cumulative: the latest figures win
            self._usage.update({k: v for k, v in usage.items() if v is not None})

    def _start(self, index: int, content: Any) -> list[ProviderEvent] | tuple[ProviderEvent, ...]:
        if not isinstance(content, dict) or not isinstance(content.get("type"), str):
            return _EMPTY
        kind = content["type"]
        block = _Block(kind, content)
        self._blocks[index] = block
        if kind == "text":
            text = content.get("text")
            if text and isinstance(text, str):
                self.content = True
                return [TextEvent(text)]
        elif kind == "thinking":
            text = content.get("thinking")
            if isinstance(text, str) and text:
                block.parts.append(text)
                self.content = True
                return [ThinkingEvent(text)]
        return _EMPTY

    def _delta(
        self, block: _Block, kind: Any, delta: dict[str, Any]
    ) -> list[ProviderEvent] | tuple[ProviderEvent, ...]:
        if kind == "thinking_delta" and block.kind == "thinking":
            text = delta.get("thinking")
            if isinstance(text, str) and text:
                block.parts.append(text)
                self.content = True
                return [ThinkingEvent(text)]
        elif kind == "signature_delta" and block.kind == "thinking":
            signature = delta.get("signature")
            if isinstance(signature, str):
                block.signature = (block.signature or "") + signature
        elif kind == "input_json_delta" and block.kind == "tool_use":
            fragment = delta.get("partial_json")
            if isinstance(fragment, str) and fragment:
                block.parts.append(fragment)
                block.size += len(fragment)
                if block.size > MAX_TOOL_ARGUMENTS:
                    self._bad(f"a tool call's input passed {MAX_TOOL_ARGUMENTS} bytes")
        return _EMPTY

    def _complete(self, block: _Block) -> list[ProviderEvent] | tuple[ProviderEvent, ...]:
        """The events of a streamed block once it stops: a tool call, kept thinking."""
        data = block.data
        if block.kind == "thinking":
            signature = block.signature
            if signature is None:
                signature = data.get("signature") if isinstance(data.get("signature"), str) else ""
            kept = {"type": "thinking", "thinking": "".join(block.parts), "signature": signature}
            self._kept.append(ProviderBlock(WIRE, kept))
        elif block.kind == "redacted_thinking":
            self._kept.append(ProviderBlock(WIRE, dict(data)))
        elif block.kind == "tool_use":
            raw = "".join(block.parts)
            given = data.get("input")
            arguments: Any = raw if raw.strip() else (given if isinstance(given, dict) else "")
            return self._tool_use(data, arguments)
        return _EMPTY

    def _tool_use(self, data: dict[str, Any], arguments: Any) -> list[ProviderEvent]:
        """A complete ``tool_use`` block (``arguments``: its input, object or JSON text)."""
        if isinstance(arguments, str):
            try:
                parsed = json.loads(arguments)
            except (ValueError, RecursionError):
                parsed = None
            if isinstance(parsed, dict):
                arguments = parsed  # the same call as the whole message's object gives
        name = str(data.get("name", ""))
        if self._answer is not None and name == ANSWER_TOOL:
            return self._answer_text(arguments)
        if self._calls >= MAX_TOOL_CALLS:
            self._bad(f"the answer carries more than {MAX_TOOL_CALLS} tool calls")
            return []
        self._calls += 1
        self.content = True
        return [ToolCallEvent(ToolCall.from_arguments(str(data.get("id", "")), name, arguments))]

    def _answer_text(self, arguments: Any) -> list[ProviderEvent]:
        """The structured answer's input as the answer's text (JSON)."""
        self.content = True
        if isinstance(arguments, str):  # not JSON: the model's text, for the caller to see
            return [TextEvent(arguments)] if arguments else []
        value = arguments.get("value") if self._answer else arguments
        return [TextEvent(json.dumps(value, ensure_ascii=False))]

    def _bad(self, message: str) -> None:
        if self.terminal is None:
            self.terminal = ErrorEvent(ErrorInfo(message, BadResponse.code))

    def _finish(self) -> FinishEvent:
        stop = self._stop
        reason: FinishReason = _FINISH.get(stop, "stop") if stop is not None else "stop"
        if reason == "tool" and not self._calls:  # only the structured answer was "called"
            reason = "stop"
        return FinishEvent(reason, _usage(self._usage), provider_blocks=tuple(self._kept))

    def end(self) -> list[ProviderEvent]:
        """The terminal event (call once, after the last payload).

        A stream that stopped before ``message_stop`` still finishes when its
        ``message_delta`` gave the ``stop_reason``; without one it ends with
        ``LLM_BAD_RESPONSE`` (the text so far is incomplete).
        """
        if self.terminal is None:
            if self._stop is None:
                self.terminal = ErrorEvent(
                    ErrorInfo(
                        "stream ended early: the server sent no stop_reason; the text so far "
                        "is incomplete",
                        BadResponse.code,
                    )
                )
            else:
                self.terminal = self._finish()
        return [self.terminal]

    # ------------------------------------------------------------------ whole messages

    def handle_message(self, message: Any) -> list[ProviderEvent]:
        """The events of a whole (non-streamed) message, as its stream would have given them."""
        if not isinstance(message, dict):
            self._bad("the server answered something that is not a message object")
            return []
        if message.get("type") == "error":
            self.terminal = ErrorEvent(self._map_error(message.get("error")))
            return []
        content = message.get("content")
        if not isinstance(content, list):
            quote = self._redact(json.dumps(content))[:200]
            self._bad(f"the message's content is not a list of blocks: {quote}")
            return []
        usage = message.get("usage")
        if isinstance(usage, dict):
            self._usage.update(usage)
        out: list[ProviderEvent] = []
        for item in content:
            if not isinstance(item, dict) or not isinstance(item.get("type"), str):
                continue
            kind = item["type"]
            if kind == "text":
                text = item.get("text")
                if isinstance(text, str) and text:
                    self.content = True
                    out.append(TextEvent(text))
                continue
            block = _Block(kind, item)
            if kind == "thinking":
                text = item.get("thinking")
                if isinstance(text, str) and text:
                    block.parts.append(text)
                    self.content = True
                    out.append(ThinkingEvent(text))
            elif kind == "tool_use":
                given = item.get("input")
                out += self._tool_use(item, given if isinstance(given, dict) else {})
                if self.terminal is not None:
                    return out
                continue
            out += self._complete(block)
        stop = message.get("stop_reason")
        self._stop = stop if isinstance(stop, str) else "end_turn"
        self.terminal = self._finish()
        return out


def _context(entry: dict[str, Any]) -> int | None:
    """The context window a model listing states: Anthropic's ``max_input_tokens``, a
    ``context_length``/``context_window``, llama-cpp-python's ``meta.n_ctx``. llama.cpp's
    ``meta.n_ctx_train`` is the trained maximum, not the window the server runs with: not it."""
    for key in ("max_input_tokens", "context_length", "context_window"):
        value = _int(entry.get(key))
        if value is not None and value > 0:
            return value
    meta = entry.get("meta")
    value = _int(meta.get("n_ctx")) if isinstance(meta, dict) else None
    return value if value is not None and value > 0 else None


def model_info_from_entry(entry: dict[str, Any]) -> ModelInfo:
    """A ``/v1/models`` entry, Anthropic's (``id``, ``display_name``, ``created_at``) or the
    OpenAI list shape local servers answer (``id``, ``created``, ``owned_by``)."""
    name = str(entry.get("id") or entry.get("name") or "")
    created = entry.get("created_at")
    return ModelInfo(
        name=name,
        modified_at=created if isinstance(created, str) else None,
        details={k: v for k, v in entry.items() if k != "id"},
        context_length=_context(entry),
        kind="chat",
    )
