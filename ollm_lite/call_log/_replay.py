"""Logged calls as a script: what ``ScriptedProvider.from_log`` replays, and how a strict
replay checks that each request is the one its logged turn answered."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..types import ProviderEvent, ProviderRequest
from ._answers import answer_events
from ._masking import Masker
from ._records import LoggedCall

__all__ = ["RequestCheck", "first_difference", "logged_requests", "replay_turns"]

#: What the replayed model is: any model, any provider, any server may replay a turn.
_NOT_COMPARED = frozenset({"model"})
_SHOWN = 80
#: What the log writes for a secret.
_MASK = "***"


def replay_turns(calls: Iterable[LoggedCall]) -> list[list[ProviderEvent]]:
    """Every model turn of ``calls``, oldest call first (whatever order they are given in),
    as the provider events the model sent."""
    ordered = sorted(calls, key=lambda c: c.id or "")  # a damaged id: first
    return [
        answer_events(turn.get("answer") or {}, spent=True)
        for call in ordered
        for turn in call.turns
    ]


def logged_requests(calls: Iterable[LoggedCall]) -> list[dict[str, Any]]:
    """The request of every model turn of ``calls``, in :func:`replay_turns`' order."""
    ordered = sorted(calls, key=lambda c: c.id or "")
    return [dict(turn.get("request") or {}) for call in ordered for turn in call.turns]


class RequestCheck:
    """The check of a strict replay's turn: ``check(request)`` is ``None`` when ``request``
    is the one the logged turn answered, else what differs first."""

    __slots__ = ("logged", "number")

    def __init__(self, logged: dict[str, Any], number: int) -> None:
        self.logged = logged
        self.number = number

    def __call__(self, request: ProviderRequest) -> str | None:
        found = first_difference(self.logged, request)
        if found is None:
            return None
        found = Masker(_header_values(request)).text(found)  # never quote a header value
        return f"the request differs from logged turn {self.number} it replays: {found}"


def first_difference(logged: dict[str, Any], request: ProviderRequest) -> str | None:
    """What first differs between a logged turn's request and ``request``, or ``None``.

    Compared is the cache's identity of a request less its model (see
    :func:`~ollm_lite.call_log._recorder.request_identity`): messages, system prompt, tools,
    schema, ``tool_choice``, ``think`` and each generation option; every member that identity
    has is compared, in its order, so a member added to it is compared too.

    The request is compared as the log stores it: its header values masked. Where the logged
    text holds a masked secret (``***``: one of the call's own, or one its history carried),
    any text matches it there (:func:`_matches`), compared in decoded JSON where both sides
    are JSON text.
    """
    from ._recorder import request_identity

    live = json.loads(Masker(_header_values(request)).json(request_identity(request)))
    for key in [*live, *(k for k in logged if k not in live)]:
        if key in _NOT_COMPARED:
            continue
        was, now = logged.get(key), live.get(key)
        if _matches(was, now):
            continue
        if key == "messages":
            return _message_difference(was, now)
        if isinstance(was, dict) and isinstance(now, dict):
            for name in [*now, *(k for k in was if k not in now)]:
                if not _matches(was.get(name), now.get(name)):
                    return (
                        f"{key}.{name}: logged {_shown(was.get(name))}, now {_shown(now.get(name))}"
                    )
        return f"{key}: logged {_shown(was)}, now {_shown(now)}"
    return None


def _message_difference(was: Any, now: Any) -> str:
    was = was if isinstance(was, list) else []
    now = now if isinstance(now, list) else []
    for index in range(max(len(was), len(now))):
        old = was[index] if index < len(was) else None
        new = now[index] if index < len(now) else None
        if _matches(old, new):
            continue
        if index == 0 and "system" in (_role(old), _role(new)):
            return f"system prompt: logged {_shown(_system(old))}, now {_shown(_system(new))}"
        if old is None or new is None:
            return f"messages: {len(was)} logged, {len(now)} now"
        role = _role(new)
        if (
            isinstance(old, dict)
            and isinstance(new, dict)
            and old.get("content") != new.get("content")
        ):
            old, new = old.get("content"), new.get("content")  # the text, when that differs
        at = index - (_role(now[0]) == "system")  # the place in the request's own messages
        return f"messages[{at}] ({role}): logged {_shown(old)}, now {_shown(new)}"
    return "messages"


def _header_values(request: ProviderRequest) -> list[str]:
    headers = request.headers
    return [v for v in headers.values() if isinstance(v, str)] if isinstance(headers, dict) else []


def _matches(was: Any, now: Any) -> bool:
    """Whether the live value ``now`` is the logged value ``was``, where each ``***`` in a
    logged string stands for some text (a secret the log masked)."""
    if was == now:
        return True
    if isinstance(was, dict) and isinstance(now, dict):
        return was.keys() == now.keys() and all(_matches(v, now[k]) for k, v in was.items())
    if isinstance(was, list) and isinstance(now, list):
        return len(was) == len(now) and all(map(_matches, was, now))
    if not (isinstance(was, str) and isinstance(now, str) and _MASK in was):
        return False
    if was.lstrip()[:1] in ("{", "[") and now.lstrip()[:1] in ("{", "["):
        try:  # masked in its decoded values, the logged JSON text was written anew
            return _matches(json.loads(was), json.loads(now))
        except (ValueError, RecursionError):
            pass
    return _fills(was.split(_MASK), now)


def _fills(parts: list[str], text: str) -> bool:
    """Whether ``text`` is ``parts`` joined by non-empty texts (each leftmost: linear)."""
    first, *middle, last = parts
    if not text.startswith(first):
        return False
    at = len(first)
    for part in middle:
        found = text.find(part, at + 1)
        if found < 0:
            return False
        at = found + len(part)
    return len(text) - len(last) > at and text.endswith(last)


def _role(message: Any) -> Any:
    return message.get("role") if isinstance(message, dict) else None


def _system(message: Any) -> Any:
    """The system prompt a first message carries (``None``: there is none)."""
    return message.get("content") if _role(message) == "system" else None


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."
