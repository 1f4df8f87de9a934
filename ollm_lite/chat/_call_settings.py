"""Per-call request settings the chat loop applies beside the generation options.

:class:`CallSettings` carries what one script-level call (``Client.ask``/``run``/``events``)
asks of every request it sends: its generation options, the tool choice (first model turn only,
so a forced call does not repeat every turn), a structured-output schema, the reasoning switch,
how long the server keeps the model loaded, extra headers, the total deadline of the whole call
(set once, as a ``time.monotonic()`` value, when the call starts: every wait and request of
the call reads it, down to the socket, through the call's cancel event),
and tools the model may call but the caller runs itself (no handler here). A field that
:class:`~ollm_lite.types.ProviderRequest` has too, under the same name, goes into every request
as it is (the chat loop copies them by name); ``tool_choice`` is set per turn, and the deadline
travels with the request's cancel event, never as seconds.

Stdlib only: the chat runtime imports it without the HTTP stack.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Literal

from ..types import GenerationOptions, Think, ToolChoice, ToolSchema

__all__ = ["CallSettings"]


@dataclass(frozen=True, slots=True)
class CallSettings:
    """What a call adds to each of its requests.

    Attributes:
        generation: The generation options (temperature, ``max_tokens`` …) of every request.
        tool_choice: Sent with the first model turn only; later turns are ``"auto"``.
        response_format: ``"json"`` or a JSON Schema for structured output.
        think: The reasoning switch (``True``/``False`` or an effort level).
        keep_alive: How long the server keeps the model loaded (Ollama's ``keep_alive``).
        headers: Extra HTTP headers for every request of the call.
        deadline: ``time.monotonic()`` value by which the whole call must end (``None``:
            no deadline beyond each request's own timeouts).
        timeout: The seconds the deadline was set from (for messages).
        external_tools: Tools offered to the model that have no handler: a call to one ends
            the chat with ``tool_calls`` for the caller to run.
    """

    generation: GenerationOptions = field(default_factory=GenerationOptions)
    tool_choice: ToolChoice = "auto"
    response_format: Literal["json"] | dict[str, Any] | None = None
    think: Think | None = None
    keep_alive: str | float | None = None
    headers: dict[str, str] = field(default_factory=dict)
    deadline: float | None = None
    timeout: float | None = None
    external_tools: tuple[ToolSchema, ...] = ()

    def __repr__(self) -> str:
        """Every field but the recorder; header values (secrets) shown as ``***``."""
        from ..http.secrets import headers_masked_repr

        return headers_masked_repr(self)

    def remaining(self) -> float | None:
        """Seconds left before the deadline (``None``: no deadline; may be <= 0)."""
        return None if self.deadline is None else self.deadline - time.monotonic()

    def tool_choice_for(self, turn: int) -> ToolChoice:
        """The tool choice of model turn ``turn`` (1 for the first)."""
        return self.tool_choice if turn == 1 else "auto"
