"""Pure mapping between the library's types and Ollama's native ``/api/*`` JSON.

No I/O here: every function takes and returns plain values, so the request shapes and the
stream assembly are testable without a server. Wire facts (field names, omitempty metrics,
``done_reason`` values) follow Ollama's ``docs/api.md`` and ``api/types.go``.

Invariants:

* :func:`message_to_ollama` and :func:`message_from_ollama` are inverse on canonical messages
  (text first as one part, then images; tool calls with ``arguments == json.dumps(args)``);
  any other message maps to its canonical form (:func:`canonical_message`).
* :class:`ChatStreamState` turns NDJSON objects into provider events and produces exactly one
  terminal event: a ``FinishEvent`` on ``done: true``, an ``ErrorEvent`` on an ``error`` line,
  a non-object line, or a stream that ended without ``done``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import random
import string
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import BadResponse, ConfigError
from ..http.urls import URLProblem, parse_base_url, without_userinfo
from ..types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    FinishReason,
    GenerationOptions,
    ImagePart,
    Message,
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
from ._ollama_models import (
    capabilities_from_list as capabilities_from_list,
    context_length_from_show as context_length_from_show,
    embeddings_from as embeddings_from,
    model_info_from_show as model_info_from_show,
    model_info_from_tag as model_info_from_tag,
    ps_context_length as ps_context_length,
    pull_error as pull_error,
    pull_progress_from as pull_progress_from,
)
from .base import MAX_TOOL_CALLS, merge_body, system_first

__all__ = [
    "DEFAULT_PORT",
    "ChatStreamState",
    "canonical_message",
    "capabilities_from_list",
    "chat_body",
    "context_length_from_show",
    "embeddings_from",
    "message_from_ollama",
    "message_to_ollama",
    "messages_to_ollama",
    "model_info_from_show",
    "model_info_from_tag",
    "new_call_id",
    "options_to_ollama",
    "parse_ollama_host",
    "ps_context_length",
    "pull_error",
    "pull_progress_from",
    "tool_call_from_ollama",
    "tools_to_ollama",
    "usage_from_chunk",
]

DEFAULT_PORT = 11434
_ROLES = ("system", "user", "assistant", "tool")
_DURATIONS = ("total_duration", "load_duration", "prompt_eval_duration", "eval_duration")
_ID_ALPHABET = string.ascii_lowercase + string.digits
_rng = random.SystemRandom()
# TextEvent(text) without the call of its __init__ (a third of the event's cost), for the
# usual stream line: the slot's own setter on a new instance.
_new = object.__new__
_set_text = TextEvent.__dict__["value"].__set__

# --------------------------------------------------------------------------- host


def parse_ollama_host(value: str) -> str:
    """Turn an ``OLLAMA_HOST``-style value into a base URL, the way Ollama's client reads it.

    Accepted: ``""``, ``host``, ``host:port``, ``:port``, ``[v6]:port``, ``http(s)://host[:port]``,
    each with an optional path (read by the library's one URL parser,
    :func:`~ollm_lite.http.urls.parse_base_url`). Without a scheme the port defaults to 11434;
    with one, to the scheme's own (80/443), as in Ollama's ``envconfig.Host()``. The
    listen-on-everything addresses ``0.0.0.0`` and ``::`` mean "this machine" for a client:
    ``127.0.0.1`` / ``::1``. User-info is kept: the transport makes it basic auth.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for another scheme or a port that is not a number.
    """
    text = value.strip().strip("\"'").strip()
    if not text:
        return f"http://127.0.0.1:{DEFAULT_PORT}"
    try:
        url = parse_base_url(text, bare_ipv6=True)
    except URLProblem as exc:
        shown = without_userinfo(value)
        raise ConfigError(f"invalid Ollama host {shown!r}: {exc.reason}") from None
    host = url.host
    with contextlib.suppress(ValueError):
        host = str(ipaddress.ip_address(host))
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    if ":" in host:
        host = f"[{host}]"
    port = url.port
    if port is None:
        port = {"http": 80, "https": 443}[url.scheme] if url.explicit_scheme else DEFAULT_PORT
    shown_port = "" if (url.scheme, port) in (("http", 80), ("https", 443)) else f":{port}"
    credentials = "" if url.userinfo is None else f"{url.userinfo}@"
    return f"{url.scheme}://{credentials}{host}{shown_port}{url.path.rstrip('/')}"


# --------------------------------------------------------------------------- messages

_MAGIC = (
    ("iVBORw0KGgo", "image/png"),
    ("/9j/", "image/jpeg"),
    ("R0lGOD", "image/gif"),
    ("UklGR", "image/webp"),
    ("Qk", "image/bmp"),
)


def _sniff_mime(data: str) -> str:
    for prefix, mime in _MAGIC:
        if data.startswith(prefix):
            return mime
    return "image/png"


def _image_data(part: ImagePart) -> str:
    data = part.data
    if data.startswith("data:"):  # tolerate a data URL; Ollama wants bare base64
        data = data.partition(",")[2]
    return data


def message_to_ollama(message: Message) -> dict[str, Any]:
    """One internal :class:`Message` as an Ollama chat message.

    Text parts are joined into ``content``; image parts become the ``images`` base64 list;
    assistant tool calls become ``tool_calls`` with object arguments; a tool message carries
    ``tool_name`` (from ``Message.name``) and ``tool_call_id``.
    """
    out: dict[str, Any] = {"role": message.role, "content": message.text}
    images = [_image_data(p) for p in message.parts if isinstance(p, ImagePart)]
    if images:
        out["images"] = images
    if message.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "function": {"name": c.name, "arguments": c.args}}
            for c in message.tool_calls
        ]
    if message.role == "tool":
        if message.name:
            out["tool_name"] = message.name
        if message.tool_call_id:
            out["tool_call_id"] = message.tool_call_id
    return out


def messages_to_ollama(
    messages: Sequence[Message], system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """The ``messages`` list of a chat request: the system prompt first, then ``messages``."""
    return system_first(system_prompt, map(message_to_ollama, messages))


def message_from_ollama(obj: Any) -> Message:
    """An Ollama chat message (request or response shape) as an internal :class:`Message`.

    The inverse of :func:`message_to_ollama`; also useful to load histories written for
    Ollama. Image MIME types are recognised from the data (PNG when unknown), tool calls
    without an id get a fresh ``call_…`` id.

    Raises:
        BadResponse: ``LLM_BAD_RESPONSE`` when ``obj`` is not a message object or its role is
            unknown.
    """
    if not isinstance(obj, dict):
        raise BadResponse(f"an Ollama message must be a JSON object, got {type(obj).__name__}")
    role = str(obj.get("role", "")).lower()
    if role not in _ROLES:
        raise BadResponse(f"unknown Ollama message role {obj.get('role')!r}")
    parts: list[Part] = []
    content = obj.get("content")
    if isinstance(content, str) and content:
        parts.append(TextPart(content))
    for image in obj.get("images") or ():
        if isinstance(image, str):
            parts.append(ImagePart(image, _sniff_mime(image)))
    calls: list[ToolCall] = []
    for raw in obj.get("tool_calls") or ():
        call = tool_call_from_ollama(raw, {c.id for c in calls})
        if call is not None:
            calls.append(call)
    name = obj.get("tool_name") if role == "tool" else None
    call_id = obj.get("tool_call_id") if role == "tool" else None
    return Message(
        role,  # type: ignore[arg-type]  # checked against _ROLES above
        parts,
        name=name if isinstance(name, str) and name else None,
        tool_call_id=call_id if isinstance(call_id, str) and call_id else None,
        tool_calls=calls,
    )


def canonical_message(message: Message) -> Message:
    """What ``message`` becomes after a trip through Ollama's format.

    Text parts merge into one (dropped when empty), images follow in order with their MIME
    type recognised from the data, tool-call arguments are re-serialised from ``args``, and
    ``name``/``tool_call_id`` survive only on tool messages.
    """
    parts: list[Part] = [TextPart(message.text)] if message.text else []
    for p in message.parts:
        if isinstance(p, ImagePart):
            data = _image_data(p)
            parts.append(ImagePart(data, _sniff_mime(data)))
    calls = [ToolCall.from_arguments(c.id, c.name, dict(c.args)) for c in message.tool_calls]
    is_tool = message.role == "tool"
    return Message(
        message.role,
        parts,
        name=(message.name or None) if is_tool else None,
        tool_call_id=(message.tool_call_id or None) if is_tool else None,
        tool_calls=calls,
    )


def new_call_id(taken: Iterable[str] = ()) -> str:
    """A fresh ``call_`` + 8 lowercase letters/digits id (Ollama's own shape), not in ``taken``."""
    used = set(taken)
    while True:
        cid = "call_" + "".join(_rng.choices(_ID_ALPHABET, k=8))
        if cid not in used:
            return cid


def tool_call_from_ollama(
    raw: Any, taken: set[str] | frozenset[str] = frozenset()
) -> ToolCall | None:
    """One wire tool call as a :class:`ToolCall`; ``None`` when it has no function name.

    ``arguments`` arrives as an object (``args`` = it, ``arguments`` = its JSON text); a
    string (some proxies) is parsed; anything else gives ``args == {}``. A missing or empty
    ``id`` is replaced by a fresh one that is not in ``taken``.
    """
    if not isinstance(raw, dict):
        return None
    fn = raw.get("function")
    if not isinstance(fn, dict):
        return None
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        return None
    cid = raw.get("id")
    if not isinstance(cid, str) or not cid:
        cid = new_call_id(taken)
    args = fn.get("arguments")
    if isinstance(args, dict | str) or args is None:
        return ToolCall.from_arguments(cid, name, args)
    return ToolCall(cid, name, {}, json.dumps(args))


def tools_to_ollama(tools: Sequence[ToolSchema]) -> list[dict[str, Any]]:
    """Tool schemas in Ollama's (OpenAI-style) function format."""
    out = []
    for t in tools:
        fn: dict[str, Any] = {"name": t.name}
        if t.description is not None:
            fn["description"] = t.description
        fn["parameters"] = (
            t.parameters if t.parameters is not None else {"type": "object", "properties": {}}
        )
        out.append({"type": "function", "function": fn})
    return out


# --------------------------------------------------------------------------- request


def options_to_ollama(options: GenerationOptions, num_ctx: int | None = None) -> dict[str, Any]:
    """The ``options`` object: only the values that are set (``max_tokens`` → ``num_predict``)."""
    pairs = (
        ("temperature", options.temperature),
        ("top_p", options.top_p),
        ("top_k", options.top_k),
        ("seed", options.seed),
        ("repeat_penalty", options.repeat_penalty),
        ("presence_penalty", options.presence_penalty),
        ("frequency_penalty", options.frequency_penalty),
        ("num_predict", options.max_tokens),
        ("num_ctx", num_ctx),
    )
    out: dict[str, Any] = {k: v for k, v in pairs if v is not None}
    if options.stop:
        out["stop"] = list(options.stop)
    return out


def chat_body(
    request: ProviderRequest, *, stream: bool = True, num_ctx: int | None = None
) -> dict[str, Any]:
    """The JSON body of ``POST /api/chat`` for ``request``.

    ``tools`` is left out when there are none or ``tool_choice == "none"``; a forced tool
    (``{"name": ...}``) sends only that tool, since Ollama has no ``tool_choice`` (for
    ``"required"`` every tool is sent: Ollama cannot force a call). ``think`` (``true``,
    ``false`` or a level such as ``"high"``) and ``keep_alive`` (``"5m"`` or seconds) are sent
    when the request sets them (Ollama's ``/api/chat`` fields; without ``think`` the server
    turns thinking on for models that support it). ``extra_body`` is merged last: nested
    objects such as ``options`` key by key, other values replace.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when a forced tool is not among ``request.tools``.
    """
    body: dict[str, Any] = {
        "model": request.model,
        "messages": messages_to_ollama(request.messages, request.system_prompt),
        "stream": stream,
        "options": options_to_ollama(request.options, num_ctx),
    }
    tools = list(request.tools or ())
    choice = request.tool_choice
    if isinstance(choice, dict):
        wanted = choice.get("name")
        tools = [t for t in tools if t.name == wanted]
        if not tools:
            raise ConfigError(f"tool_choice names {wanted!r}, which is not among the tools")
    elif choice == "none":
        tools = []
    if tools:
        body["tools"] = tools_to_ollama(tools)
    fmt = request.response_format
    if fmt is not None:
        body["format"] = fmt
    if request.think is not None:
        if not isinstance(request.think, bool | str):  # Ollama has levels, not token budgets
            raise ConfigError(
                f"think must be true, false or an effort level, not {request.think!r}"
            )
        body["think"] = request.think
    if request.keep_alive is not None:
        body["keep_alive"] = request.keep_alive
    extra = request.options.extra_body
    return merge_body(body, extra) if extra else body


# --------------------------------------------------------------------------- responses


def usage_from_chunk(chunk: dict[str, Any]) -> Usage | None:
    """Token counts and timings of a final chunk; ``None`` when it carries no metric at all.

    Ollama omits zero metrics (Go ``omitempty``; see docs/api.md in the ollama repository): a chunk
    that carries any metric reports an absent count as 0 — ``prompt_eval_count`` is missing when the
    whole prompt came from the cache. Durations (integer nanoseconds) go to ``Usage.extra``.
    """
    get = chunk.get
    prompt, completion = get("prompt_eval_count"), get("eval_count")
    extra = {k: get(k) for k in _DURATIONS if isinstance(get(k), int | float)}
    p = prompt if isinstance(prompt, int) and not isinstance(prompt, bool) else None
    c = completion if isinstance(completion, int) and not isinstance(completion, bool) else None
    if p is None and c is None and not extra:
        return None
    p, c = p or 0, c or 0
    return Usage(p, c, p + c, extra)


class ChatStreamState:
    """Assembles the events of one ``/api/chat`` stream from its NDJSON objects.

    :meth:`feed` returns the non-terminal events of one object and records the terminal
    one in :attr:`terminal`; once it is set the stream is over. :meth:`end` gives the
    terminal event (an error for a stream that stopped without ``done: true``).

    Args:
        provider, model, url: Named in error details.
        redact: Masks secrets in quotes of the stream, before they are cut.
        skipped: Counts the lines the decoder dropped as not JSON objects (named in the
            message of a stream that ended early).
    """

    __slots__ = ("_ids", "_info", "_redact", "_skipped", "terminal")

    def __init__(
        self,
        *,
        provider: str = "local",
        model: str | None = None,
        url: str = "",
        redact: Callable[[str], str] = str,
        skipped: Callable[[], int] | None = None,
    ) -> None:
        self._ids: set[str] = set()
        self._skipped = skipped
        self._info: dict[str, Any] = {"provider": provider, "model": model, "url": url}
        self._redact = redact
        self.terminal: FinishEvent | ErrorEvent | None = None

    def _error(self, message: str) -> ErrorEvent:
        return ErrorEvent(ErrorInfo(message, BadResponse.code, dict(self._info)))

    def feed(self, chunk: Any) -> list[ProviderEvent]:
        """Events for one decoded NDJSON object (``terminal`` is set on the last one)."""
        if type(chunk) is dict and "error" not in chunk and chunk.get("done") is False:
            # The usual line: a message of role and content only, the stream going on.
            msg = chunk.get("message")
            if type(msg) is dict and len(msg) == 2 and "role" in msg:
                content = msg.get("content")
                if type(content) is str:
                    if not content:
                        return []
                    piece = _new(TextEvent)
                    _set_text(piece, content)
                    return [piece]
        if not isinstance(chunk, dict):
            self.terminal = self._error(
                f"Ollama sent a stream line that is not a JSON object ({type(chunk).__name__})"
            )
            return []
        get = chunk.get
        err = get("error")
        if err is not None:
            text = err if isinstance(err, str) else json.dumps(err)
            self.terminal = self._error(f"Ollama reported an error mid-stream: {text}")
            return []
        events: list[ProviderEvent] = []
        msg = get("message")
        if isinstance(msg, dict):
            thinking = msg.get("thinking")
            if thinking and isinstance(thinking, str):
                events.append(ThinkingEvent(thinking))
            content = msg.get("content")
            if content and isinstance(content, str):
                events.append(TextEvent(content))
            calls = msg.get("tool_calls")
            if calls:
                self._calls(calls, events)
        else:
            # /api/generate-shaped lines (Ollama's own error example uses them)
            thinking = get("thinking")
            if thinking and isinstance(thinking, str):
                events.append(ThinkingEvent(thinking))
            content = get("response")
            if content and isinstance(content, str):
                events.append(TextEvent(content))
        if get("done") is True:
            self.terminal = FinishEvent(self._reason(get("done_reason")), usage_from_chunk(chunk))
        return events

    def _calls(self, calls: Any, events: list[ProviderEvent]) -> None:
        if not isinstance(calls, list):
            calls = [calls]
        for raw in calls:
            if len(self._ids) >= MAX_TOOL_CALLS:
                self.terminal = self._error(f"Ollama sent more than {MAX_TOOL_CALLS} tool calls")
                return
            call = tool_call_from_ollama(raw, self._ids)
            if call is None:
                quote = self._redact(repr(raw))[:200]
                self.terminal = self._error(f"Ollama sent a tool call without a name: {quote}")
                return
            self._ids.add(call.id)
            events.append(ToolCallEvent(call))

    def _reason(self, done_reason: Any) -> FinishReason:
        # Ollama says "stop" even when the turn ended in tool calls (ollama docs/api.md,
        # "done_reason"); "load"/"unload"/absent/unknown values are a normal stop.
        if self._ids:
            return "tool"
        return "length" if done_reason == "length" else "stop"

    def end(self) -> list[ProviderEvent]:
        """The terminal event: the recorded one, else "stream ended early"."""
        if self.terminal is None:
            skipped = self._skipped() if self._skipped is not None else 0
            why = f"; {skipped} line(s) were not JSON objects" if skipped else ""
            self.terminal = self._error(
                f"the Ollama stream ended early (no final `done: true` line{why})"
            )
        return [self.terminal]
