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
import uuid
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._history_format import message_from_dict, message_to_dict, write_conversation
from ._script_calls import ScriptCalls
from .errors import ConfigError
from .types import Message

if TYPE_CHECKING:
    from ._prepare import Call, CallInputs
    from .client import Client

__all__ = ["Session", "load"]

_FORMAT = "ollm-lite-session"


class Session(ScriptCalls):
    """A conversation that keeps its history; create one with ``Client.session()``.

    Args:
        client: The client every call goes through.
        system: The system prompt of every call (a call's own ``system=`` wins).
        tools: The tools every ``run``/``events`` call offers (a call's own ``tools=`` wins).
        messages: History to start from (copied).
        session_id: The id linking this conversation's calls in the call log (default: a
            new one).

    Its :meth:`ask`, :meth:`stream`, :meth:`run` and :meth:`events` are the client's
    (:class:`~ollm_lite._script_calls.ScriptCalls`), continuing this conversation.
    """

    def __init__(
        self,
        client: Client,
        *,
        system: str | None = None,
        tools: Any = None,
        messages: Iterable[Message] = (),
        session_id: str | None = None,
    ) -> None:
        if system is not None and not isinstance(system, str):
            raise ConfigError(f"system must be a str, not {type(system).__name__}")
        self.client = client
        self.system = system
        self.tools = tools
        self._history: list[Message] = [replace(m, parts=list(m.parts)) for m in messages]
        #: Links this conversation's calls in the call log; kept by ``save``/``load_session``.
        self.session_id = session_id or uuid.uuid4().hex

    def __repr__(self) -> str:
        return f"Session(messages={len(self._history)}, system={self.system is not None})"

    @property
    def messages(self) -> list[Message]:
        """The conversation so far (a copy), without the system prompt."""
        return list(self._history)

    # ------------------------------------------------------------------ calls

    def _begin(self, inputs: CallInputs) -> Call:
        """Prepare a call on this history: the prompt's earlier messages join it now, the
        prompt and the answers as the chat runs."""
        system = inputs.system if inputs.system is not None else self.system
        tools = inputs.tools if inputs.tools is not None else self.tools
        call = self.client._begin(replace(inputs, system=system, tools=tools))
        self._history.extend(call.history)
        return replace(call, history=self._history)

    def _runner(self) -> Client:
        return self.client

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON-ready data (``format``, ``version``, ``system``, ``messages``)."""
        return {
            "format": _FORMAT,
            "version": 1,
            "system": self.system,
            "messages": [message_to_dict(m) for m in self._history],
            "session_id": self.session_id,
        }

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the conversation as JSON (atomically: a crash never leaves half a file).

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the file cannot be written.
        """
        write_conversation(path, self.to_dict(), "session")


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
        session_id = data.get("session_id")  # files saved before it existed have none
        if session_id is not None and not isinstance(session_id, str):
            raise TypeError("session_id is not a string")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ConfigError(f"cannot load a session from {path}: {exc}") from exc
    return Session(client, system=system, messages=messages, session_id=session_id)
