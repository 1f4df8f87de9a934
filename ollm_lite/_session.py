"""``Session``: a conversation in a script — each call continues the same history.

A session holds its messages (user, assistant and tool messages; the system prompt is kept
apart) and sends them with every call, so ``chat.ask("And in French?")`` knows what came
before. ``save`` writes them as JSON (atomically) and ``load_session`` reads them back; the
tools are code, not data, so a loaded session gets them again from ``tools=``.

A session runs one call at a time: start the next call after the previous one has finished
(or its iterator was closed).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Unpack

from ._history_format import message_from_dict, message_to_dict
from ._options import Options, check_names
from ._outcome import failed, raise_for
from ._reply import Reply
from ._typed import answer_spec
from .chat import ToolMode
from .errors import ConfigError, OllmError
from .types import ChatEvent, Message

if TYPE_CHECKING:
    from ._prepare import Call
    from .client import Client

__all__ = ["Session", "load"]

_FORMAT = "ollm-lite-session"


class Session:
    """A conversation that keeps its history; create one with ``Client.session()``.

    Args:
        client: The client every call goes through.
        system: The system prompt of every call (a call's own ``system=`` wins).
        tools: The tools every ``run``/``events`` call offers (a call's own ``tools=`` wins).
        messages: History to start from (copied).
    """

    def __init__(
        self,
        client: Client,
        *,
        system: str | None = None,
        tools: Any = None,
        messages: Iterable[Message] = (),
    ) -> None:
        if system is not None and not isinstance(system, str):
            raise ConfigError(f"system must be a str, not {type(system).__name__}")
        self.client = client
        self.system = system
        self.tools = tools
        self._history: list[Message] = [replace(m, parts=list(m.parts)) for m in messages]

    def __repr__(self) -> str:
        return f"Session(messages={len(self._history)}, system={self.system is not None})"

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (a copy), without the system prompt."""
        return list(self._history)

    # ------------------------------------------------------------------ calls

    def ask(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        system: str | None = None,
        model: str | None = None,
        schema: Any = None,
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Any:
        """:meth:`Client.ask <ollm_lite.client.Client.ask>`, continuing this conversation."""
        check_names(options, "ask")
        call = self._start(prompt, system, model, images, options)
        spec = answer_spec(schema) if schema is not None else None
        reply, folded = self.client._reply(call, cancel, spec)
        raise_for(reply, folded, token_limit=True)
        return reply.value if schema is not None else reply.text

    def stream(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        system: str | None = None,
        model: str | None = None,
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Iterator[str]:
        """:meth:`Client.stream <ollm_lite.client.Client.stream>`, continuing this
        conversation (the answer joins the history as it completes)."""
        check_names(options, "stream")
        call = self._start(prompt, system, model, images, options)
        return self.client._pieces(call, cancel)

    def run(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        tools: Any = None,
        system: str | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        tool_mode: ToolMode = "auto",
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Reply:
        """:meth:`Client.run <ollm_lite.client.Client.run>`, continuing this conversation.

        After ``finish == "tool_calls"``, answer the calls left to you with
        ``chat.run([Message.tool(result, call), ...])``.
        """
        check_names(options, "run")
        call = self._start(prompt, system, model, images, options, tools, max_turns, tool_mode)
        reply, folded = self.client._reply(call, cancel, None)
        raise_for(reply, folded, token_limit=False)
        return reply

    def events(
        self,
        prompt: str | Message | Sequence[Message | Mapping[str, Any]],
        *,
        tools: Any = None,
        system: str | None = None,
        model: str | None = None,
        max_turns: int | None = None,
        tool_mode: ToolMode = "auto",
        images: Iterable[Any] | None = None,
        cancel: threading.Event | None = None,
        **options: Unpack[Options],
    ) -> Iterator[ChatEvent]:
        """:meth:`Client.events <ollm_lite.client.Client.events>`, continuing this
        conversation; never raises (a ``TypeError`` for an unknown keyword aside)."""
        check_names(options, "events")
        try:
            call = self._start(prompt, system, model, images, options, tools, max_turns, tool_mode)
        except OllmError as exc:
            return failed(exc)
        return self.client._events(call, cancel, [])

    def _start(
        self,
        prompt: Any,
        system: str | None,
        model: str | None,
        images: Any,
        options: Mapping[str, Any],
        tools: Any = None,
        max_turns: int | None = None,
        tool_mode: ToolMode = "auto",
    ) -> Call:
        """Prepare a call on this history: the prompt's earlier messages join it now, the
        prompt and the answers as the chat runs."""
        call = self.client._prepare(
            prompt,
            system=system if system is not None else self.system,
            model=model,
            images=images,
            options=options,
            tools=tools if tools is not None else self.tools,
            max_turns=max_turns,
            tool_mode=tool_mode,
        )
        self._history.extend(call.history)
        return replace(call, history=self._history)

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON-ready data (``format``, ``version``, ``system``, ``messages``)."""
        return {
            "format": _FORMAT,
            "version": 1,
            "system": self.system,
            "messages": [message_to_dict(m) for m in self._history],
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the conversation as JSON (atomically: a crash never leaves half a file).

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the file cannot be written.
        """
        target = Path(path)
        tmp = target.with_name(target.name + ".tmp")
        try:
            tmp.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1), "utf-8")
            tmp.replace(target)
        except OSError as exc:
            raise ConfigError(f"cannot save the session to {target}: {exc.strerror}") from exc


def load(path: str | os.PathLike[str], client: Client) -> Session:
    """Read a session written by :meth:`Session.save` (also a saved ``Conversation``).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file is unreadable or not a saved session.
    """
    try:
        data = json.loads(Path(path).read_text("utf-8"))
        messages = [message_from_dict(m) for m in data["messages"]]
        system = data.get("system", data.get("system_prompt"))
        if system is not None and not isinstance(system, str):
            raise TypeError("system is not a string")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"cannot load a session from {path}: {exc}") from exc
    return Session(client, system=system, messages=messages)
