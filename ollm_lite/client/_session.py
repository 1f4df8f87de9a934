"""``Session``: a conversation in a script — each call continues the same history.

A session holds its messages (user, assistant and tool messages; the system prompt is kept
apart) and sends them with every call, so ``chat.ask("And in French?")`` knows what came
before. ``save`` writes them as JSON (atomically) and ``load_session`` reads them back; the
tools are code, not data, so a loaded session gets them again from ``tools=``.

A session runs one call at a time: start the next call after the previous one has finished
(or its iterator was closed).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from .._safe_text import type_name
from ..chat._history_file import SESSION_FORMAT, message_to_dict, read_history, write_history
from ..errors import ConfigError
from ..types import Message
from ._calls import ScriptCalls
from ._inputs import checked_copy
from ._run_call import Runner

if TYPE_CHECKING:
    from ._prepare import Call, CallInputs

__all__ = ["Session", "load"]


class SessionClient(Runner, Protocol):
    """What a session needs of its ``Client``: a call prepared with the client's defaults, and
    the client to run it."""

    def _begin(self, inputs: CallInputs) -> Call: ...


class Session(ScriptCalls):
    """A conversation that keeps its history; create one with ``Client.session()``.

    Args:
        client: The client every call goes through.
        system: The system prompt of every call (a call's own ``system=`` wins).
        tools: The tools every ``run``/``events`` call offers (a call's own ``tools=`` wins).
        messages: History to start from (copied).
        session_id: The id linking this conversation's calls in the call log (default: a
            new one).

    Its :meth:`ask`, :meth:`stream`, :meth:`run` and :meth:`events` are the client's,
    continuing this conversation.
    """

    def __init__(
        self,
        client: SessionClient,
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
        self._history: list[Message] = _checked_history(messages)
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

    def _runner(self) -> Runner:
        return self.client

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON-ready data (``format``, ``version``, ``system``, ``messages``,
        ``session_id``)."""
        data: dict[str, Any] = {
            "format": SESSION_FORMAT,
            "version": 1,
            "system": self.system,
            "messages": [message_to_dict(m) for m in self._history],
            "session_id": self.session_id,
        }
        return data

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the conversation as JSON (atomically: a crash never leaves half a file).

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the file cannot be written.
        """
        write_history(path, self.to_dict(), "session")


def load(path: str | os.PathLike[str], client: SessionClient) -> Session:
    """Read a session written by :meth:`Session.save` (also a saved ``Conversation``).

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file is unreadable or not a saved session.
    """
    saved = read_history(path, "session")
    session = Session(client, system=saved.system, session_id=saved.session_id)
    session._history = saved.messages  # new values, every field checked by the reader
    return session


def _checked_history(messages: Iterable[Message]) -> list[Message]:
    if isinstance(messages, str | bytes | Mapping) or not isinstance(messages, Iterable):
        raise ConfigError(f"messages must be a list of Message values, not {type_name(messages)}")
    history = []
    for index, message in enumerate(messages):
        if not isinstance(message, Message):
            raise ConfigError(f"messages[{index}] must be a Message, not {type_name(message)}")
        try:
            history.append(checked_copy(message))
        except ConfigError as exc:
            raise ConfigError(f"messages[{index}]: {exc.message}") from exc
    return history
