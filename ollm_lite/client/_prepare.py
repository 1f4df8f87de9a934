"""One script-level call, prepared: its messages and everything its requests carry.

:class:`CallInputs` is what a call was given, as people hold it (the arguments of ``ask``,
``stream``, ``run`` and ``events``). :func:`prepare_call` checks and converts it — the prompt,
images and tools (:mod:`~ollm_lite.client._inputs`), the keyword options over the client's defaults
(:mod:`~ollm_lite.client._options`) — into a :class:`Call` the chat runtime can run. Every bad input
raises ``ConfigError`` here, before anything is sent or added to a history.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..chat import ToolMode
from ..chat._call_settings import CallSettings
from ..chat._loop import ChatCall
from ..errors import ConfigError
from ..tools import ToolRegistry
from ..types import Message, ToolSchema
from ._inputs import as_images, as_messages, as_tools
from ._options import merge, resolve

__all__ = ["Call", "CallInputs", "check_tool_choice", "prepare_call"]


@dataclass(frozen=True, slots=True)
class CallInputs:
    """The arguments of one call, unchecked (the defaults are the public methods' own)."""

    prompt: Any
    system: str | None = None
    model: str | None = None
    images: Any = None
    options: Mapping[str, Any] = field(default_factory=dict)
    tools: Any = None
    max_turns: int | None = None
    tool_mode: ToolMode = "auto"


@dataclass(frozen=True, slots=True)
class Call:
    """One prepared call: its messages and everything its requests carry."""

    history: list[Message]
    """Messages before the prompt (new lists: the loop appends to it)."""
    prompt: Message
    model: str | None
    settings: CallSettings
    loop: ChatCall
    """The :class:`~ollm_lite.chat._loop.ChatLoop` keywords this call sets."""
    source: str = "ask"
    """What the call log records it as: ``ask``, ``stream``, ``run``, ``events`` or ``map``."""
    session_id: str | None = None
    """The :class:`~ollm_lite.Session` the call continues, if any."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """Secrets earlier calls left in :attr:`history` (a ``Session``'s header values and MCP
    secrets): the call log masks them in this call's record too."""


def prepare_call(defaults: Mapping[str, Any], inputs: CallInputs) -> Call:
    """Check and convert everything a call was given, ``defaults`` under its options.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for a bad prompt, image, tool, option value or a
            ``tool_choice`` that names no offered tool.
    """
    system, model = inputs.system, inputs.model
    if system is not None and not isinstance(system, str):
        raise ConfigError(f"system must be a str, not {type(system).__name__}")
    if model is not None and (not isinstance(model, str) or not model):
        raise ConfigError(f"model must be a non-empty str, not {model!r}")
    messages = as_messages(inputs.prompt)
    pictures = as_images(inputs.images)
    if pictures:
        last = messages[-1]
        if last.role != "user":
            raise ConfigError("images= goes with a user message; the prompt ends with another")
        messages[-1] = replace(last, parts=[*last.parts, *pictures])
    registry, external = as_tools(inputs.tools)
    settings = replace(resolve(merge(defaults, inputs.options)), external_tools=external)
    check_tool_choice(settings.tool_choice, registry, external)
    loop = ChatCall(
        system_prompt=system,
        tools=registry,
        options=settings.generation,
        max_turns=inputs.max_turns,
        tool_mode=inputs.tool_mode,
    )
    return Call(messages[:-1], messages[-1], model, settings, loop)


def check_tool_choice(
    choice: Any, registry: ToolRegistry | None, external: tuple[ToolSchema, ...]
) -> None:
    names = [*(registry.names() if registry else []), *(s.name for s in external)]
    if isinstance(choice, dict):
        if choice["name"] not in names:
            offered = ", ".join(names) or "none"
            raise ConfigError(
                f"tool_choice names {choice['name']!r}, which is not among the tools ({offered})"
            )
    elif choice == "required" and not names:
        raise ConfigError("tool_choice='required' needs tools=")
