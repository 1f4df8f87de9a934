"""Streamed OpenAI tool-call fragments put together into complete calls, without I/O.

Fragments follow the ``delta.tool_calls`` shape of OpenAI's chat completion chunk object
(https://platform.openai.com/docs/api-reference/chat-streaming/streaming).

Tool-call fragments are assembled by ``index`` and tolerate every quirk seen in the wild: a
missing ``index``, one index reused for two calls with different ids, ``id`` and ``name``
repeated in every fragment (llama.cpp servers), the whole call in one fragment, ``arguments``
sent as an object instead of a string, the legacy ``function_call`` delta, and
``finish_reason: "stop"`` although tool calls were streamed.
"""

from __future__ import annotations

import random
import string
from typing import Any

from ..types import ToolCall
from .base import MAX_TOOL_ARGUMENTS, MAX_TOOL_CALLS

__all__ = ["ToolCallAssembler", "new_call_id"]

_ID_ALPHABET = string.ascii_letters + string.digits
_rng = random.SystemRandom()


def new_call_id() -> str:
    """A fresh tool-call id for servers that send none (``call_`` + 24 random characters)."""
    return "call_" + "".join(_rng.choices(_ID_ALPHABET, k=24))


class _Slot:
    """One tool call being assembled."""

    __slots__ = ("args", "id", "name", "parts", "size")

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name: str | None = None
        self.parts: list[str] = []
        self.size = 0
        self.args: dict[str, Any] | None = None


class ToolCallAssembler:
    """Collects streamed tool-call fragments and builds complete :class:`ToolCall` values.

    Which call a fragment belongs to: the call with the same ``index`` — unless the fragment
    names a different ``id`` than that call, which starts a new call (servers reusing index 0
    for every call); without an ``index``, the call with the same ``id``, else the last call.
    ``id`` and ``name`` are taken from the first fragment that has them (repeats are ignored);
    string ``arguments`` are concatenated; an ``arguments`` object replaces what came before.
    """

    __slots__ = ("_by_id", "_by_index", "_slots", "problem")

    def __init__(self) -> None:
        self._slots: list[_Slot] = []
        self._by_index: dict[Any, _Slot] = {}
        self._by_id: dict[str, _Slot] = {}
        self.problem: str | None = None
        """Set when the calls outgrew ``MAX_TOOL_ARGUMENTS`` or ``MAX_TOOL_CALLS``."""

    def __bool__(self) -> bool:
        return bool(self._slots)

    def add(self, fragment: Any) -> None:
        """Take one element of ``delta.tool_calls`` (non-objects are ignored)."""
        if not isinstance(fragment, dict):
            return
        index = fragment.get("index")
        call_id = fragment.get("id")
        if not isinstance(call_id, str) or not call_id:
            call_id = None
        slot: _Slot | None
        if isinstance(index, int) and not isinstance(index, bool):
            slot = self._by_index.get(index)
            if slot is not None and call_id and slot.id and slot.id != call_id:
                slot = self._by_id.get(call_id)  # index reused for another call
        else:
            index = None
            slot = self._by_id.get(call_id) if call_id else None
            if slot is None and not call_id and self._slots:
                slot = self._slots[-1]
        if slot is None:
            if len(self._slots) >= MAX_TOOL_CALLS:
                self.problem = f"more than {MAX_TOOL_CALLS} tool calls in one answer"
                return
            slot = _Slot(call_id)
            self._slots.append(slot)
        if index is not None:
            self._by_index[index] = slot
        if call_id:
            if slot.id is None:
                slot.id = call_id
            self._by_id.setdefault(call_id, slot)
        function = fragment.get("function")
        if not isinstance(function, dict):
            return
        name = function.get("name")
        if name and isinstance(name, str) and not slot.name:
            slot.name = name
        args = function.get("arguments")
        if isinstance(args, str):
            if args:
                slot.size += len(args)
                if slot.size > MAX_TOOL_ARGUMENTS:
                    self.problem = (
                        f"tool call arguments longer than {MAX_TOOL_ARGUMENTS} characters "
                        f"({slot.name or 'unnamed'})"
                    )
                    return
                slot.parts.append(args)
        elif isinstance(args, dict):
            slot.args = args
            slot.parts.clear()
            slot.size = 0

    def calls(self) -> tuple[list[ToolCall], list[str]]:
        """The complete calls, in the order they began, and problems (calls without a name)."""
        calls: list[ToolCall] = []
        problems: list[str] = [self.problem] if self.problem else []
        for slot in self._slots:
            if not slot.name:
                problems.append(f"a tool call without a name (id {slot.id!r})")
                continue
            call_id = slot.id or new_call_id()
            if slot.args is not None and not slot.parts:
                calls.append(ToolCall.from_arguments(call_id, slot.name, slot.args))
            else:
                text = "".join(slot.parts)
                calls.append(ToolCall.from_arguments(call_id, slot.name, text if text else "{}"))
        return calls, problems
