"""What Gemini sends back, read without I/O: the SSE stream of ``streamGenerateContent``
(:class:`StreamDecoder`, :class:`ChatStreamState`), errors inside it, and model entries.
Request bodies are :mod:`~ollm_lite.providers._gemini_wire`, which re-exports these names.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

from ..errors import BadResponse
from ..streams import DEFAULT_MAX_LINE, SSEDataDecoder, SSEEvent
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
from .base import MAX_TOOL_CALLS, usage_from

__all__ = [
    "GENERATED_ID_PREFIX",
    "ChatStreamState",
    "StreamDecoder",
    "generated_ids",
    "mid_stream_error",
    "model_info_from_gemini",
]

GENERATED_ID_PREFIX = "call_"
"""Prefix of the ids made up for function calls Gemini sent without one (``call_<n>``)."""

_FINISH: dict[str, FinishReason] = {
    "STOP": "stop",
    "MAX_TOKENS": "length",
    "SAFETY": "content_filter",
    "RECITATION": "content_filter",
    "BLOCKLIST": "content_filter",
    "PROHIBITED_CONTENT": "content_filter",
    "SPII": "content_filter",
    "IMAGE_SAFETY": "content_filter",
    "IMAGE_PROHIBITED_CONTENT": "content_filter",
}
#: Finish reasons that mean the model failed to produce a usable turn.
_FAILED = {"MALFORMED_FUNCTION_CALL", "UNEXPECTED_TOOL_CALL", "TOO_MANY_TOOL_CALLS"}


_EOL = re.compile(rb"\r\n?|\n")
# A line starting (after blanks) with "{" or "[": JSON written without "data:".
_RAW_START = re.compile(rb"[\r\n][ \t]*[\[{]")
_RAW_HEAD = re.compile(rb"[ \t]*[\[{]")
_SSE_FIELDS = (b"data:", b"event:", b"id:", b"retry:", b":")
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_MAX_RAW = 1 << 20  # a bare JSON object longer than this is dropped


def _texts(items: list[str | SSEEvent]) -> list[str]:
    """The data of SSE events (event names do not matter to Gemini's stream)."""
    return [item if type(item) is str else item.data for item in items]  # type: ignore[union-attr]


class StreamDecoder:
    """Gemini's stream: SSE ``data:`` events, and JSON written as bare lines.

    Google's SDK reads every ``data:`` line as one payload and any other line as raw JSON,
    joined over lines until its braces balance, because errors can arrive mid-stream
    without the ``data:`` prefix (the google-genai SDK's stream reader). Here the whole body
    goes through :class:`~ollm_lite.streams.SSEDataDecoder` unchanged (a bare line is an
    unknown field to it, so it is ignored there); a line starting with ``{`` or ``[`` also
    starts a bare object, which takes the following lines until its brackets (outside strings)
    close, and is read then if it is JSON, else dropped. Blank lines are skipped; a ``data:``,
    ``event:``, ``id:``, ``retry:`` or comment line drops an object still open (and counts for
    SSE).

    ``feed`` returns the JSON texts, SSE ``data`` and bare objects alike, in stream order.
    Sans-IO, like the decoders of :mod:`ollm_lite.streams`; a chunk without a line
    starting with ``{``/``[`` costs one regex search more than the SSE decoder alone.

    Args:
        max_line: Longest line, and longest event data, accepted (bytes).
    """

    __slots__ = ("_depth", "_lines", "_size", "_sse", "_tail")

    def __init__(self, *, max_line: int = DEFAULT_MAX_LINE) -> None:
        self._sse = SSEDataDecoder(max_line=max_line)
        # The unterminated last line when it may start or continue a bare object (b"": the
        # next chunk starts a line); None while inside a line that cannot.
        self._tail: bytes | None = b""
        self._lines: list[bytes] = []  # the bare object so far
        self._size = 0
        self._depth = 0

    def feed(self, chunk: bytes) -> list[str]:
        """The JSON texts this chunk completed, in order (often empty).

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` when a line passes ``max_line`` bytes.
        """
        tail = self._tail
        if (
            not tail
            and not self._lines
            and _RAW_START.search(chunk) is None
            and (tail is None or not _RAW_HEAD.match(chunk))
        ):
            # Fast path: no bare object pending and none starting in this chunk.
            cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
            if cut >= 0:
                rest = chunk[cut + 1 :]
                self._tail = None if rest.strip(b" \t") else rest
            elif tail is not None and chunk.strip(b" \t"):
                self._tail = None
            return _texts(self._sse.feed(chunk))
        found = self._scan(chunk)
        if not found:
            return _texts(self._sse.feed(chunk))
        out: list[str] = []
        start = 0
        for end, text in found:  # SSE events before each object come first
            out += _texts(self._sse.feed(chunk[start:end]))
            out.append(text)
            start = end
        out += _texts(self._sse.feed(chunk[start:]))
        return out

    def flush(self) -> list[str]:
        """End of the body: a bare object still open is read as it stands (as the SDK does).

        Raises:
            BadResponse: ``LLM_BAD_RESPONSE`` left over from the last :meth:`feed`.
        """
        out = _texts(self._sse.flush())
        if self._tail:
            text = self._line(self._tail)
            if text is not None:
                out.append(text)
        self._tail = b""
        if self._lines:
            text = self._text()
            if text is not None:
                out.append(text)
        return out

    def _scan(self, chunk: bytes) -> list[tuple[int, str]]:
        """``(offset in chunk after the line that completed it, text)`` per bare object."""
        tail = self._tail
        if tail is None:  # the chunk first finishes a line that cannot be bare JSON
            first = _EOL.search(chunk)
            if first is None:
                return []
            data, base, pos = chunk, 0, first.end()
        else:
            data, base, pos = tail + chunk, len(tail), 0
        found: list[tuple[int, str]] = []
        search = _EOL.search
        while (eol := search(data, pos)) is not None:
            text = self._line(data[pos : eol.start()])
            if text is not None:
                found.append((eol.end() - base, text))
            pos = eol.end()
        rest = data[pos:]
        if len(rest) > _MAX_RAW:
            self._reset()
            self._tail = None
        elif self._lines or not rest.strip(b" \t") or _RAW_HEAD.match(rest):
            self._tail = rest
        else:
            self._tail = None
        return found

    def _line(self, line: bytes) -> str | None:
        """Take one complete line; the object's text when this line completed one."""
        stripped = line.strip()
        if not stripped:
            return None
        if not self._lines:
            if stripped[:1] not in (b"{", b"["):
                return None
        elif line.startswith(_SSE_FIELDS):  # SSE resumed: the bare object was never whole
            self._reset()
            return None
        self._lines.append(stripped)
        self._size += len(stripped)
        if self._size > _MAX_RAW:
            self._reset()
            return None
        bare = _JSON_STRING.sub(b"", stripped)  # brackets inside strings do not count
        self._depth += bare.count(b"{") + bare.count(b"[") - bare.count(b"}") - bare.count(b"]")
        if self._depth > 0:
            return None
        return self._text()

    def _text(self) -> str | None:
        """The pending object's text, taken; ``None`` when it is not JSON (then dropped)."""
        raw = b"\n".join(self._lines)
        self._reset()
        try:
            json.loads(raw)
        except (ValueError, RecursionError):
            return None
        return raw.decode("utf-8", "replace")

    def _reset(self) -> None:
        self._lines.clear()
        self._size = 0
        self._depth = 0


def generated_ids() -> Callable[[], str]:
    """A fresh ``call_0``, ``call_1``, … sequence (one per stream when no provider shares one)."""
    counter = itertools.count()
    return lambda: f"{GENERATED_ID_PREFIX}{next(counter)}"


ErrorMapper = Callable[[Any], ErrorInfo]
"""Maps Google's ``error`` object (sent inside a 200 stream) to the ``ErrorInfo`` to report."""


def mid_stream_error(error: Any) -> ErrorInfo:
    """``LLM_BAD_RESPONSE`` with Google's message: the mapping when no :data:`ErrorMapper`
    is given (the provider passes one that maps like an HTTP error answer)."""
    message = error.get("message") if isinstance(error, dict) else str(error)
    details: dict[str, Any] = {}
    if isinstance(error, dict):
        # Google's code is the HTTP status the error would have had; its status
        # string ("INTERNAL") goes beside it, as for errors before the stream.
        if isinstance(error.get("code"), int) and not isinstance(error["code"], bool):
            details["status"] = error["code"]
        if isinstance(error.get("status"), str):
            details["server_status"] = error["status"]
    return ErrorInfo(
        f"Gemini reported an error mid-stream: {message}", "LLM_BAD_RESPONSE", details or None
    )


class ChatStreamState:
    """Per-stream state: each SSE event is a whole ``GenerateContentResponse``.

    Args:
        new_id: Makes the id of a ``functionCall`` sent without one. A provider passes one
            sequence for all its streams, so ids stay unique across turns (its
            ``thoughtSignature`` store is keyed by id). Default: ``call_0``, ``call_1``, …
        map_error: Maps an ``error`` object inside the stream (default:
            :func:`mid_stream_error`).
        redact: Masks secrets in quotes of the stream, before they are cut.
    """

    __slots__ = (
        "_calls",
        "_finish",
        "_loads",
        "_map_error",
        "_new_id",
        "_redact",
        "signatures",
        "skipped",
        "terminal",
        "usage",
    )

    def __init__(
        self,
        new_id: Callable[[], str] | None = None,
        map_error: ErrorMapper | None = None,
        redact: Callable[[str], str] = str,
    ) -> None:
        self._calls = 0
        self._redact = redact
        self._new_id = new_id or generated_ids()
        self._map_error = map_error or mid_stream_error
        self._finish: str | None = None
        self._loads = json.loads
        self.usage: Usage | None = None
        self.terminal: FinishEvent | ErrorEvent | None = None
        """The event that ended the answer: an error as soon as one arrives, else the finish
        (known only at the end: :meth:`end`)."""
        self.signatures: dict[str, str] = {}
        self.skipped = 0

    def feed(self, data: str) -> list[ProviderEvent]:
        """Events for one SSE ``data`` payload."""
        try:
            chunk = self._loads(data)
        except (ValueError, RecursionError):  # nested too deep is not JSON to this reader
            self.skipped += 1
            return []
        if isinstance(chunk, list) and len(chunk) == 1:  # the array form of errors
            chunk = chunk[0]
        if not isinstance(chunk, dict):
            self.skipped += 1
            return []
        return self.handle_object(chunk)

    def handle_object(self, chunk: dict[str, Any]) -> list[ProviderEvent]:
        """Events for one decoded response object."""
        error = chunk.get("error")
        if error is not None:
            self.terminal = ErrorEvent(self._map_error(error))
            return []
        usage = chunk.get("usageMetadata")
        if isinstance(usage, dict):
            self.usage = _usage(usage)
        feedback = chunk.get("promptFeedback")
        candidates = chunk.get("candidates")
        if not candidates:
            if isinstance(feedback, dict) and feedback.get("blockReason"):
                reason = feedback["blockReason"]
                self.terminal = ErrorEvent(
                    ErrorInfo(
                        f"Gemini blocked the prompt ({reason})",
                        "LLM_BAD_RESPONSE",
                        {"block_reason": reason},
                    )
                )
            elif candidates is not None and not isinstance(candidates, list):
                self._shape_error("candidates", candidates)
            return []
        candidate = self._own_candidate(candidates)
        if candidate is None:
            return []
        content = candidate.get("content") or {}
        parts = content.get("parts") or [] if isinstance(content, dict) else None
        if not isinstance(parts, list):
            self._shape_error("content", content)
            return []
        finish = candidate.get("finishReason")
        if finish is not None and not isinstance(finish, str):
            self._shape_error("finishReason", finish)
            return []
        out: list[ProviderEvent] = []
        for part in parts:
            if not isinstance(part, dict):
                continue
            text = part.get("text")
            call = part.get("functionCall")
            if isinstance(call, dict):
                if self._calls >= MAX_TOOL_CALLS:
                    message = f"Gemini sent more than {MAX_TOOL_CALLS} function calls"
                    self.terminal = ErrorEvent(ErrorInfo(message, BadResponse.code))
                    return out
                out.append(ToolCallEvent(self._call(call, part.get("thoughtSignature"))))
            elif text and isinstance(text, str):
                out.append(ThinkingEvent(text) if part.get("thought") else TextEvent(text))
        if finish and finish != "FINISH_REASON_UNSPECIFIED":
            self._finish = finish
        return out

    def _shape_error(self, member: str, value: Any) -> None:
        quote = self._redact(json.dumps(value))[:200]
        self.terminal = ErrorEvent(
            ErrorInfo(f"Gemini sent a chunk whose {member} is not valid: {quote}", BadResponse.code)
        )

    def _own_candidate(self, candidates: Any) -> dict[str, Any] | None:
        """The candidate with ``index`` 0; others (``candidateCount > 1``) are ignored, never
        merged. A ``candidates`` value that is not a list of objects ends the stream."""
        if not isinstance(candidates, list):
            self._shape_error("candidates", candidates)
            return None
        for candidate in candidates:
            if not isinstance(candidate, dict):
                self._shape_error("candidates", candidates)
                return None
            index = candidate.get("index", 0)
            if not isinstance(index, int) or isinstance(index, bool):
                self._shape_error("candidate index", index)
                return None
            if index == 0:
                return candidate
        return None

    def _call(self, call: dict[str, Any], signature: Any) -> ToolCall:
        call_id = call.get("id") or self._new_id()
        self._calls += 1
        args = call.get("args")
        tool_call = ToolCall.from_arguments(
            str(call_id), str(call.get("name", "")), args if isinstance(args, dict) else {}
        )
        if isinstance(signature, str) and signature:
            self.signatures[tool_call.id] = signature
        return tool_call

    def end(self) -> list[ProviderEvent]:
        """The terminal event (call once, after the last payload)."""
        if self.terminal is None:
            self.terminal = self._terminal()
        return [self.terminal]

    def _terminal(self) -> FinishEvent | ErrorEvent:
        if self._finish is None:
            return ErrorEvent(
                ErrorInfo(
                    "stream ended early: Gemini sent no finishReason; the text so far is "
                    "incomplete",
                    "LLM_BAD_RESPONSE",
                )
            )
        if self._finish in _FAILED:
            return ErrorEvent(
                ErrorInfo(
                    f"Gemini could not finish the turn ({self._finish})",
                    "LLM_BAD_RESPONSE",
                    {"finish_reason": self._finish},
                )
            )
        # The signatures travel with the turn (on its assistant Message), so that they
        # survive a saved session and a new client.
        blocks = tuple(
            ProviderBlock("gemini", {"id": call_id, "thoughtSignature": signature})
            for call_id, signature in self.signatures.items()
        )
        if self._calls and self._finish == "STOP":
            return FinishEvent("tool", self.usage, provider_blocks=blocks)
        return FinishEvent(_FINISH.get(self._finish, "stop"), self.usage, provider_blocks=blocks)


def _usage(meta: dict[str, Any]) -> Usage:
    extra = {
        k: v
        for k, v in meta.items()
        if k not in ("promptTokenCount", "candidatesTokenCount", "totalTokenCount")
    }
    return usage_from(
        meta.get("promptTokenCount"),
        meta.get("candidatesTokenCount"),
        meta.get("totalTokenCount"),
        extra,
    )


def model_info_from_gemini(entry: dict[str, Any]) -> ModelInfo:
    """A ``models`` entry; ``inputTokenLimit`` is the context window."""
    name = str(entry.get("name", "")).removeprefix("models/")
    raw_methods = entry.get("supportedGenerationMethods")
    methods = (
        [m for m in raw_methods if isinstance(m, str)] if isinstance(raw_methods, list) else []
    )
    if "generateContent" in methods:
        kind: Any = "chat"
    elif "embedContent" in methods or "batchEmbedContents" in methods:
        kind = "embedding"
    else:
        kind = None
    limit = entry.get("inputTokenLimit")
    return ModelInfo(
        name=name,
        details={k: v for k, v in entry.items() if k != "name"},
        context_length=limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
        capabilities=methods,
        kind=kind,
    )
