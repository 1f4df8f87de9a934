"""``ask``, ``stream``, ``run`` and ``events``, written once for ``Client`` and ``Session``.

:class:`ScriptCalls` holds the four public calls with their full signatures (keyword-only
parameters, ``**options: Unpack[Options]``) and docstrings. A subclass says only where a call
starts and what runs it: :meth:`ScriptCalls._begin` turns the call's :class:`CallInputs` into
a prepared :class:`~ollm_lite.client._prepare.Call` (a ``Client`` with its option defaults, a
``Session`` on its history), :meth:`ScriptCalls._runner` is the ``Client`` that runs it. The
module shortcuts ``ollm_lite.ask``/``ollm_lite.stream`` are these methods on the default client.

``events`` takes exactly ``run``'s parameters (the API defines it so), spelled out in its own
``def`` so that the source reads as ``inspect.signature`` shows it.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from typing import Any, Unpack

from ..chat import ToolMode
from ..errors import OllmError
from ..types import ChatEvent, Message
from ._options import Options, check_names
from ._prepare import Call, CallInputs
from ._run_call import Reply, Runner, call_pieces, call_reply, call_stream, failed, raise_for
from ._typed import answer_spec

__all__ = ["ScriptCalls"]


class ScriptCalls(ABC):
    """The script API's calls; subclasses say where a call starts and what runs it."""

    @abstractmethod
    def _begin(self, inputs: CallInputs) -> Call:
        """Check and prepare a call (raises ``ConfigError`` for a bad input)."""

    @abstractmethod
    def _runner(self) -> Runner:
        """The client whose connection, model and retries run the call."""

    def _as(self, call: Call, source: str) -> Call:
        """``call`` as the surface ``source`` makes it (for the call log), in this session."""
        return replace(call, source=source, session_id=getattr(self, "session_id", None))

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
        """The model's answer as a string, or as a validated ``schema`` value.

        On a :class:`~ollm_lite.Session` the call continues its conversation;
        ``ollm_lite.ask`` makes it on the default client (``connect()``, created once per
        process).

        Args:
            prompt: A ``str``, a ``Message``, or a list of messages (``Message`` or
                ``{"role", "content"}`` dicts).
            system: The system prompt.
            model: The model for this call.
            schema: A dataclass, ``TypedDict`` or JSON Schema ``dict``: the answer is
                requested as structured output, validated and returned as that type (a
                dataclass instance; a ``dict`` for the others).
            images: Paths (regular files), ``bytes`` or ``ImagePart`` values added to the (last)
                user message; at most 10 MiB each, decoded.
            cancel: Setting it stops the call (``Cancelled`` is raised).
            **options: Per-call options: the ``GenerationOptions`` fields (``temperature``,
                ``max_tokens`` …), ``think``, ``keep_alive``, ``timeout`` (the whole call's
                deadline), ``tool_choice`` and ``headers`` (docs/chat-and-tools.md, "Options").

        Returns:
            The final answer's text, or the validated value when ``schema`` is given.

        Raises:
            TypeError: an unknown keyword.
            OllmError: the typed error with its ``.code`` — ``CONNECTION_FAILED``,
                ``MODEL_NOT_FOUND``, ``LLM_TIMEOUT``, ``CONFIG_INVALID`` …;
                ``CANCELLED`` when ``cancel`` was set; ``TOKEN_LIMIT_EXCEEDED`` when the
                prompt does not fit the model's window; ``LLM_BAD_RESPONSE`` (with
                ``.details["raw"]``) for a typed answer that still does not validate after
                the corrective retry.
        """
        check_names(options, "ask")
        call = self._as(self._begin(CallInputs(prompt, system, model, images, options)), "ask")
        spec = answer_spec(schema) if schema is not None else None
        reply, folded = call_reply(self._runner(), call, cancel, spec)
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
        """The answer's text, piece by piece as it arrives.

        The arguments are as :meth:`ask` takes them, checked at the call (a ``TypeError`` or
        ``ConfigError`` is raised before iteration starts). Closing the iterator early stops
        the request. On a :class:`~ollm_lite.Session` the answer joins the history as it
        completes; ``ollm_lite.stream`` streams from the default client.

        Yields:
            Text pieces; the iteration simply ends when ``cancel`` is set.

        Raises:
            OllmError: the typed error (after the pieces already yielded) when the call
                fails; ``TOKEN_LIMIT_EXCEEDED`` when the prompt does not fit.
        """
        check_names(options, "stream")
        call = self._begin(CallInputs(prompt, system, model, images, options))
        return call_pieces(self._runner(), self._as(call, "stream"), cancel)

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
        """Run the whole tool loop and return what it produced.

        Args:
            tools: ``@tool`` functions, plain typed functions, a ``ToolRegistry``, or
                OpenAI-format dicts / ``ToolSchema`` values. A tool without a handler here
                stops the run with ``finish="tool_calls"`` when the model calls it (calls to
                handled tools of the same turn still run); on a
                :class:`~ollm_lite.Session`, answer those calls with
                ``chat.run([Message.tool(result, call), ...])``.
            max_turns: Most model turns (default 10).
            tool_mode: ``"auto"``, ``"native"`` or ``"react"``.
            (others as :meth:`ask`)

        Returns:
            The :class:`Reply` (``finish``: ``complete``, ``max_turns``, ``loop_detected``,
            ``token_limit`` or ``tool_calls``).

        Raises:
            OllmError: the typed error when the chat ends in ``error``; ``Cancelled`` when
                ``cancel`` was set.
        """
        check_names(options, "run")
        inputs = CallInputs(prompt, system, model, images, options, tools, max_turns, tool_mode)
        reply, folded = call_reply(
            self._runner(), self._as(self._begin(inputs), "run"), cancel, None
        )
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
        """Every chat event of the tool loop; never raises (failures are ``ErrorEvent``).

        Takes :meth:`run`'s arguments.

        Yields:
            Chat events, ending with exactly one ``ChatFinishEvent``.

        Raises:
            TypeError: an unknown keyword (at the call, the one exception).
        """
        check_names(options, "events")
        inputs = CallInputs(prompt, system, model, images, options, tools, max_turns, tool_mode)
        try:
            call = self._begin(inputs)
        except OllmError as exc:
            return failed(exc)
        return call_stream(self._runner(), self._as(call, "events"), cancel)
