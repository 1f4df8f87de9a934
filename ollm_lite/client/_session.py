"""``Session``: a conversation in a script — each call continues the same history.

A session holds its messages (user, assistant and tool messages; the system prompt is kept
apart) and sends them with every call, so ``chat.ask("And in French?")`` knows what came
before. ``save`` writes them as JSON (atomically) and ``load_session`` reads them back; the
tools are code, not data, so a loaded session gets them again from ``tools=``.

A secret stays a secret for the life of the history it touched: the session remembers the
secrets its calls were handed (header values, the ``env``/``headers`` values of MCP servers
whose tools they were given), privately, and every later call's record in the call log masks
them even when that call is handed none; ``save`` writes them (and the client's own keys) as
``***``, so the file holds none in clear and a loaded session continues with the masked text.

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
    from ..call_log._masking import Masker
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
        # The secrets that touched this history; never shown, never saved (only masked).
        self._secrets: set[str] = set()

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
        call = self._remembered(self.client._begin(replace(inputs, system=system, tools=tools)))
        self._history.extend(call.history)
        return replace(call, history=self._history, secrets=tuple(self._secrets))

    def _remembered(self, call: Call) -> Call:
        """``call``, its secrets remembered: from now on they are in this history."""
        from ..call_log._masking import call_secrets

        self._secrets.update(call_secrets(call))
        return call

    def _runner(self) -> Runner:
        return self.client

    # ------------------------------------------------------------------ persistence

    def to_dict(self) -> dict[str, Any]:
        """The session as JSON-ready data (``format``, ``version``, ``system``, ``messages``,
        ``session_id``), as :meth:`save` writes it: every secret that touched the history,
        and the client's own, masked as ``***``."""
        from ..call_log._masking import Masker, client_secrets

        mask = Masker([*self._secrets, *client_secrets(self.client)])
        data: dict[str, Any] = {
            "format": SESSION_FORMAT,
            "version": 1,
            "system": mask.text(self.system) if self.system is not None else None,
            "messages": [_masked(mask, message_to_dict(m)) for m in self._history],
            "session_id": self.session_id,
        }
        return data

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the conversation as JSON (atomically: a crash never leaves half a file),
        secrets masked (see :meth:`to_dict`).

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


def _masked(mask: Masker, message: dict[str, Any]) -> dict[str, Any]:
    """A saved message with its secrets masked (an image's bytes are data, not text: kept).

    A provider block quoting a secret (a thinking block echoing a header) is left out rather
    than masked: its signature covers its text, so a changed block would be refused when the
    loaded session sends it back, while a block of a finished turn may be left out.
    """
    kept = ("parts", "provider_blocks")
    out: dict[str, Any] = mask.value({k: v for k, v in message.items() if k not in kept})
    out["parts"] = [p if p["type"] == "image" else mask.value(p) for p in message["parts"]]
    if "provider_blocks" in message:
        blocks = [b for b in message["provider_blocks"] if mask.value(b) == b]
        if blocks:
            out["provider_blocks"] = blocks
    return out


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
