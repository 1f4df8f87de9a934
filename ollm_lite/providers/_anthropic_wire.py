"""Requests of Anthropic's Messages API (``POST /v1/messages``), built without I/O.

:func:`request_body` turns a :class:`~ollm_lite.types.ProviderRequest` into the JSON body of
``/v1/messages``, :func:`count_body` into that of ``/v1/messages/count_tokens``. The answers
(the SSE stream and whole messages) are read by :mod:`~ollm_lite.providers._anthropic_answers`.

Wire facts (Messages API reference, https://platform.claude.com/docs/en/api/messages):

* ``system`` is a top-level field; ``messages`` hold only ``user`` and ``assistant`` turns,
  and consecutive turns of one role are merged into one (the API combines them itself, but
  servers that speak the API locally do not all do so). System messages found in the history
  join the system prompt, in order.
* Content is a list of blocks: ``text``, ``image`` with a ``base64`` ``source``, ``tool_use``
  (``id``, ``name``, ``input`` object) in assistant turns, ``tool_result`` (``tool_use_id``,
  ``content``, ``is_error``) in user turns
  (https://platform.claude.com/docs/en/agents-and-tools/tool-use/implement-tool-use).
* ``max_tokens`` is required. ``tool_choice`` is ``{"type": "auto" | "any" | "none"}`` or
  ``{"type": "tool", "name"}``. There is no ``seed``, no repetition or presence/frequency
  penalty: those options are not sent. There is no JSON mode either: a structured answer is
  a forced tool (:data:`ANSWER_TOOL`) whose ``input`` is the answer.
* Extended thinking is ``thinking: {"type": "enabled", "budget_tokens": N}``, and the
  ``thinking`` / ``redacted_thinking`` blocks of an assistant turn go back unchanged, signature
  included, when that turn is sent again
  (https://platform.claude.com/docs/en/build-with-claude/extended-thinking). They travel on
  the assistant :class:`~ollm_lite.types.Message` as its ``provider_blocks``.
"""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigError
from ..types import ImagePart, Message, ProviderRequest, TextPart, ToolSchema
from .base import merge_body

__all__ = [
    "ANSWER_TOOL",
    "DEFAULT_MAX_TOKENS",
    "THINK_BUDGETS",
    "WIRE",
    "answer_schema",
    "count_body",
    "messages_from",
    "request_body",
    "thinking_budget",
]

WIRE = "anthropic"
"""The ``ProviderBlock.wire`` of the blocks this wire keeps (thinking, redacted thinking)."""
DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` when none is given (the API requires one); with thinking, budget + this."""
THINK_BUDGETS: dict[Any, int] = {True: 4096, "medium": 4096, "low": 1024, "high": 16384}
"""``think`` value → ``thinking.budget_tokens``."""
ANSWER_TOOL = "json_answer"
"""The tool a structured answer is asked through: its ``input`` is the answer."""
_ANSWER_DESCRIPTION = "Give your answer as this tool's input, following its schema exactly."
_EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


def thinking_budget(think: Any) -> int | None:
    """``budget_tokens`` for ``think`` (``None``: thinking not asked for).

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a value that is no level nor a positive integer.
    """
    if think is None or think is False:
        return None
    if isinstance(think, int) and not isinstance(think, bool):
        if think <= 0:
            raise ConfigError(f"think as a thinking budget must be a positive integer, not {think}")
        return think
    budget = THINK_BUDGETS.get(think) if isinstance(think, bool | str) else None
    if budget is None:
        raise ConfigError(
            f"think must be true, false, 'low', 'medium', 'high' or a number of tokens, "
            f"not {think!r}"
        )
    return budget


def answer_schema(response_format: Any) -> tuple[dict[str, Any], bool]:
    """The forced tool's ``input_schema`` for a structured answer, and whether the answer is
    wrapped in it as ``{"value": …}`` (a tool's input must be an object)."""
    if isinstance(response_format, dict):
        if response_format.get("type") == "object":
            return response_format, False
        schema = {"type": "object", "properties": {"value": response_format}, "required": ["value"]}
        return schema, True
    return {"type": "object"}, False  # "json": any JSON object


def _text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _tool_result(message: Message) -> dict[str, Any]:
    """A ``tool`` message as a ``tool_result`` block; ``is_error`` for an ``ok: false`` result."""
    text = message.text
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": message.tool_call_id or "",
        "content": text,
    }
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        value = None
    if isinstance(value, dict) and value.get("ok") is False:
        block["is_error"] = True
    return block


def _blocks(message: Message) -> list[dict[str, Any]]:
    """The content blocks of one message (never empty: an empty text block at least)."""
    if message.role == "tool":
        return [_tool_result(message)]
    out: list[dict[str, Any]] = []
    if message.role == "assistant":  # thinking first, as the model wrote them
        out += [dict(b.data) for b in message.provider_blocks if b.wire == WIRE]
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text:
                out.append(_text_block(part.text))
        elif isinstance(part, ImagePart):
            source = {"type": "base64", "media_type": part.mime_type, "data": part.data}
            out.append({"type": "image", "source": source})
    if message.role == "assistant":
        out += [
            {"type": "tool_use", "id": c.id, "name": c.name, "input": c.args}
            for c in message.tool_calls
        ]
    return out or [_text_block("")]


def messages_from(messages: list[Message]) -> list[dict[str, Any]]:
    """The ``messages`` array: system messages left out, tool results as ``user`` turns,
    consecutive turns of one role merged into one."""
    out: list[dict[str, Any]] = []
    for message in messages:
        if message.role == "system":
            continue
        role = "assistant" if message.role == "assistant" else "user"
        blocks = _blocks(message)
        if out and out[-1]["role"] == role:
            out[-1]["content"] += blocks
        else:
            out.append({"role": role, "content": blocks})
    return out


def _system(request: ProviderRequest) -> str | None:
    texts = [m.text for m in request.messages if m.role == "system"]
    if request.system_prompt:
        texts.insert(0, request.system_prompt)
    return "\n\n".join(texts) if texts else None


def _tool(schema: ToolSchema) -> dict[str, Any]:
    tool: dict[str, Any] = {"name": schema.name}
    if schema.description:
        tool["description"] = schema.description
    tool["input_schema"] = schema.parameters or _EMPTY_SCHEMA
    return tool


def _tool_choice(choice: Any, names: set[str]) -> dict[str, Any]:
    if isinstance(choice, dict):
        name = choice.get("name")
        if name not in names:
            raise ConfigError(f"tool_choice names {name!r}, which is not among the tools")
        return {"type": "tool", "name": name}
    return {"type": {"none": "none", "required": "any"}.get(str(choice), "auto")}


def _conversation(request: ProviderRequest) -> dict[str, Any]:
    """What the model reads: ``system``, ``messages``, ``tools``, ``tool_choice``."""
    body: dict[str, Any] = {"model": request.model, "messages": messages_from(request.messages)}
    system = _system(request)
    if system:
        body["system"] = system
    tools = [_tool(t) for t in request.tools or ()]
    choice: Any = request.tool_choice
    if request.response_format is not None:
        schema, _ = answer_schema(request.response_format)
        tools.append(
            {"name": ANSWER_TOOL, "description": _ANSWER_DESCRIPTION, "input_schema": schema}
        )
        # Forcing a tool is refused while thinking: then the model is asked, not forced.
        if (choice == "auto" or not request.tools) and thinking_budget(request.think) is None:
            choice = {"name": ANSWER_TOOL}
    if tools:
        body["tools"] = tools
        body["tool_choice"] = _tool_choice(choice, {t["name"] for t in tools})
    return body


def request_body(request: ProviderRequest, *, stream: bool) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages`` for ``request``.

    ``max_tokens`` is the option given, else :data:`DEFAULT_MAX_TOKENS` (plus the thinking
    budget when ``think`` asks for thinking). ``seed``, ``repeat_penalty``,
    ``presence_penalty`` and ``frequency_penalty`` are not sent (the API has none);
    ``keep_alive`` neither. ``options.extra_body`` is merged last.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a forced tool that is not offered or a bad
            ``think``.
    """
    body = _conversation(request)
    opts = request.options
    budget = thinking_budget(request.think)
    max_tokens = opts.max_tokens
    if max_tokens is None:
        max_tokens = DEFAULT_MAX_TOKENS + (budget or 0)
    body["max_tokens"] = max_tokens
    if opts.stop:
        body["stop_sequences"] = list(opts.stop)
    for key, value in (
        ("temperature", opts.temperature),
        ("top_p", opts.top_p),
        ("top_k", opts.top_k),
    ):
        if value is not None:
            body[key] = value
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    if stream:
        body["stream"] = True
    return merge_body(body, opts.extra_body) if opts.extra_body else body


def count_body(request: ProviderRequest) -> dict[str, Any]:
    """The JSON body of ``POST /v1/messages/count_tokens``: what the model reads (and the
    thinking setting), none of the sampling options
    (https://platform.claude.com/docs/en/build-with-claude/token-counting)."""
    body = _conversation(request)
    budget = thinking_budget(request.think)
    if budget is not None:
        body["thinking"] = {"type": "enabled", "budget_tokens": budget}
    return body
