"""The ReAct fallback: tool calling as text, for models without native tool calls.

The model is told (:meth:`ReActToolHandler.instructions`) to answer either with::

    Thought: <reasoning>
    Action: <tool name>
    Action Input: <arguments as one JSON object>

or with ``Final Answer: <answer>``. The runtime runs the action and sends the result back as
``Observation: <ToolResult JSON>`` (:meth:`~ReActToolHandler.format_observation`).

The parser (:meth:`~ReActToolHandler.parse`) is tolerant of what small models really write:

* labels in any case, with extra spaces, ``_``/``-`` inside (``ACTION_INPUT :``), in Markdown
  bold (``**Action:**``) or list items, ``Thought:`` left out;
* the JSON spread over several lines, inside a code fence (```` ```json ````), followed by
  prose, or written on the ``Action:`` line itself (``Action: search {"q": "x"}``);
* the tool name in backticks, quotes or brackets, or in another case than registered;
* an ``Observation:`` the model invented after its action: the text is cut there, since the
  model made that result (and anything after it) up.

Decisions, in order: a ``Final Answer`` ends the turn (no tool runs, even when an action is
also present); else an ``Action`` becomes a tool call, or an ``error`` when its input is not
one JSON object (the runtime then sends :meth:`~ReActToolHandler.correction_message`, at most
``max_corrections`` times in a row); an ``Action Input`` without an ``Action`` is an error too;
text in none of these shapes is taken whole as the final answer, so nothing is lost.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .types import ToolCall, ToolResult, ToolSchema

__all__ = ["STOP_SEQUENCES", "ReActStep", "ReActToolHandler"]

STOP_SEQUENCES: tuple[str, ...] = ("\nObservation:",)
"""Stop sequences a runtime may send so the model does not invent the tool's result."""

_LABEL = re.compile(
    r"^[ \t>*_#-]*"
    r"(?P<label>thoughts?|action[ \t_-]*input|action|final[ \t_-]*answer|observation)"
    # Emphasis closing right after the colon ("**Action:**") is markup; a "_" after a space
    # is the model's (invalid) input, not markup.
    r"[ \t*_]*[:\uff1a](?:\*{1,2}|_{1,2})?[ \t]*",
    re.IGNORECASE | re.MULTILINE,
)
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\r?\n?")
_NO_ACTION = {"none", "n/a", "na", "null", "no", "nothing"}
_PREVIEW = 200


@dataclass(frozen=True, slots=True)
class ReActStep:
    """What one model reply says, as parsed by :meth:`ReActToolHandler.parse`."""

    thought: str | None = None
    """The reasoning (``Thought:``, or unlabelled text before an action)."""
    action: str | None = None
    """Tool to call (the registered spelling when it matches one case-insensitively)."""
    action_input: dict[str, Any] | None = None
    """Arguments of the action (``{}`` when the action had no ``Action Input``)."""
    final_answer: str | None = None
    """The answer for the user; set when the turn is over."""
    error: str | None = None
    """Why the action cannot run (its input is not one JSON object, or no ``Action``)."""
    raw: str = ""
    """The reply up to any invented ``Observation:`` (what belongs in the history)."""


def _kind(label: str) -> str:
    key = re.sub(r"[ \t_-]+", "", label.lower())
    return {"thoughts": "thought", "actioninput": "input", "finalanswer": "final"}.get(key, key)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


class ReActToolHandler:
    """Tool instructions, reply parsing and observation text for the ReAct fallback.

    Attributes:
        max_corrections: How many correction messages the runtime may send in a row before it
            gives up on a reply whose action input stays invalid.
    """

    def __init__(self, tools: Sequence[ToolSchema], *, max_corrections: int = 2) -> None:
        """Describe ``tools`` to the model.

        Raises:
            ValueError: ``max_corrections`` is negative.
        """
        if isinstance(max_corrections, bool) or max_corrections < 0:
            raise ValueError(f"max_corrections must be >= 0, not {max_corrections!r}")
        self.tools = list(tools)
        self.max_corrections = max_corrections
        self._by_folded = {t.name.casefold(): t.name for t in self.tools}

    # ------------------------------------------------------------------- prompting

    def instructions(self) -> str:
        """The system-prompt text: every tool (name, description, JSON Schema) and the format.

        Returns:
            Text to append to the system prompt.
        """
        lines = ["You can use the following tools:", ""]
        for schema in self.tools:
            params = schema.parameters or {"type": "object", "properties": {}}
            lines.append(f"- {schema.name}: {schema.description or '(no description)'}")
            lines.append(f"  Parameters (JSON Schema): {json.dumps(params, ensure_ascii=False)}")
        names = ", ".join(t.name for t in self.tools) or "(none)"
        lines += [
            "",
            "To use a tool, reply in exactly this format, then stop and wait:",
            "",
            "Thought: your reasoning about what to do next",
            f"Action: the tool name, one of [{names}]",
            'Action Input: the arguments as one JSON object, for example {"name": "value"}',
            "",
            "The tool's result comes back to you as:",
            "Observation: the result as JSON",
            "",
            "Repeat Thought / Action / Action Input as often as needed. Never write an "
            "Observation yourself.",
            "When you know the answer, reply with:",
            "",
            "Thought: I know the answer",
            "Final Answer: your answer to the user",
        ]
        return "\n".join(lines)

    def format_observation(self, result: ToolResult) -> str:
        """The text that returns a tool's result to the model.

        Returns:
            ``"Observation: " + result.to_json()``.
        """
        return f"Observation: {result.to_json()}"

    def correction_message(self, step: ReActStep) -> str:
        """The message asking the model to resend its action with valid JSON.

        Args:
            step: The parsed reply whose ``error`` is set.

        Returns:
            Text for a ``user`` message that names the problem and the expected format.
        """
        problem = step.error or "the reply did not follow the format"
        names = ", ".join(t.name for t in self.tools) or "(none)"
        action = step.action or "tool_name"
        return (
            f"Error: {problem}. Action Input must be valid JSON: one object such as "
            '{"name": "value"}, with double quotes and nothing else on its line.\n'
            "Please reply again in exactly this format:\n"
            "Thought: your reasoning\n"
            f"Action: {action}\n"
            'Action Input: {"name": "value"}\n'
            f"Available tools: {names}. If you already know the answer, reply with "
            "Final Answer: your answer"
        )

    # ------------------------------------------------------------------- parsing

    def parse(self, text: str) -> ReActStep:
        """Read one model reply (see the module docstring for what is tolerated).

        Args:
            text: The whole reply.

        Returns:
            The step: a final answer, an action with its input, or an action with ``error``.
        """
        text = _cut_invented_observation(text)
        marks = [(_kind(m.group("label")), m) for m in _LABEL.finditer(text)]
        first: dict[str, re.Match[str]] = {}
        for kind, m in marks:
            first.setdefault(kind, m)
        thought = _section(text, first["thought"], marks) if "thought" in first else None
        if thought is None and marks and marks[0][1].start() > 0:
            thought = text[: marks[0][1].start()].strip() or None

        if "final" in first:
            answer = text[first["final"].end() :].strip()
            return ReActStep(thought=thought, final_answer=answer, raw=text)
        if "action" in first:
            return self._action_step(text, marks, first, thought)
        if "input" in first:
            return ReActStep(
                thought=thought,
                error="the reply has an Action Input but no Action line naming the tool",
                raw=text,
            )
        return ReActStep(thought=thought, final_answer=text.strip(), raw=text)

    def _action_step(
        self,
        text: str,
        marks: list[tuple[str, re.Match[str]]],
        first: dict[str, re.Match[str]],
        thought: str | None,
    ) -> ReActStep:
        action_mark = first["action"]
        # The name is on the label's line, or on the next non-empty one ("Action:\nsearch").
        end = next((m.start() for _, m in marks if m.start() > action_mark.start()), len(text))
        line_start = action_mark.end()
        while True:
            line_end = text.find("\n", line_start, end)
            line = text[line_start : line_end if line_end >= 0 else end]
            if line.strip() or line_end < 0:
                break
            line_start = line_end + 1
        name, rest = self._tool_name(line)
        if name is None:
            # "Action: None" — the model decided not to act; whatever it said is the answer.
            return ReActStep(thought=thought, final_answer=thought or "", raw=text)
        inputs = [m for kind, m in marks if kind == "input" and m.start() > action_mark.start()]
        if inputs:
            start = inputs[0].end()
        elif "{" in rest:
            start = line_start + line.index("{")
        else:
            return ReActStep(thought=thought, action=name, action_input={}, raw=text)
        args, error = _json_object(text, start, marks)
        return ReActStep(thought=thought, action=name, action_input=args, error=error, raw=text)

    def _tool_name(self, line: str) -> tuple[str | None, str]:
        """The tool named on an ``Action:`` line and the rest of that line."""
        head = line.split("{", 1)[0]
        words = list(_NAME.finditer(head))
        if not words:
            return None, line
        for m in words:  # "I will use get_weather" names a known tool after some prose
            known = self._known(m.group(0).strip(".-"))
            if known is not None:
                return known, line[m.end() :]
        first = words[0]
        name = first.group(0).strip(".-")
        if not name or name.casefold() in _NO_ACTION:
            return None, line[first.end() :]
        return name, line[first.end() :]

    def _known(self, word: str) -> str | None:
        """The registered spelling of ``word`` (any case, ``functions.`` prefix allowed)."""
        folded = word.casefold()
        if folded not in self._by_folded and "." in word:
            folded = word.rsplit(".", 1)[-1].casefold()  # "functions.get_weather"
        return self._by_folded.get(folded)

    def to_tool_call(self, step: ReActStep, call_id: str) -> ToolCall:
        """The tool call a parsed action stands for.

        Args:
            step: A step with ``action`` set.
            call_id: The id to give the call (ReAct replies carry none).

        Returns:
            A :class:`~ollm_lite.types.ToolCall` whose ``arguments`` is the JSON of the input.

        Raises:
            ValueError: the step has no action.
        """
        if step.action is None:
            raise ValueError("this ReAct step has no Action to call")
        args = dict(step.action_input or {})
        return ToolCall(
            id=call_id,
            name=step.action,
            args=args,
            arguments=json.dumps(args, ensure_ascii=False),
        )

    def is_final(self, step: ReActStep) -> bool:
        """Whether the step ends the turn (it carries a final answer)."""
        return step.final_answer is not None


def _cut_invented_observation(text: str) -> str:
    """The text up to the first ``Observation:`` that follows an action, if any.

    Everything after a ``Final Answer`` that comes before any action is the answer, even
    when it quotes ``Action:`` and ``Observation:`` lines (an answer explaining ReAct).
    """
    seen_action = False
    for m in _LABEL.finditer(text):
        kind = _kind(m.group("label"))
        if kind == "final" and not seen_action:
            return text
        if kind in {"action", "input"}:
            seen_action = True
        elif kind == "observation" and seen_action:
            return text[: m.start()].rstrip()
    return text


def _section(text: str, mark: re.Match[str], marks: list[tuple[str, re.Match[str]]]) -> str | None:
    """The text of one labelled section, up to the next label."""
    end = next((m.start() for _, m in marks if m.start() > mark.start()), len(text))
    return text[mark.end() : end].strip() or None


def _json_object(
    text: str, start: int, marks: list[tuple[str, re.Match[str]]]
) -> tuple[dict[str, Any] | None, str | None]:
    """Decode the JSON object starting at ``start`` (after spaces and an optional fence)."""
    end = next((m.start() for _, m in marks if m.start() >= start), len(text))
    shown = text[start:end].strip()[:_PREVIEW]
    pos = _skip_space(text, start)
    fence = _FENCE.match(text, pos)
    if fence:
        pos = _skip_space(text, fence.end())
    if pos >= end:
        return {}, None  # "Action Input:" with nothing after it: a call without arguments
    try:
        value, _ = _DECODER.raw_decode(text, pos)
    except (ValueError, RecursionError) as exc:
        return None, f"Action Input is not valid JSON ({_reason(exc)}): {shown!r}"
    if not isinstance(value, dict):
        kind = {list: "an array", str: "a string", bool: "a boolean"}.get(type(value), "a number")
        kind = "null" if value is None else kind
        return None, f"Action Input must be a JSON object, not {kind}: {shown!r}"
    return value, None


def _skip_space(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\r\n":
        pos += 1
    return pos


def _reason(exc: BaseException) -> str:
    if isinstance(exc, json.JSONDecodeError):
        return exc.msg
    return str(exc) or type(exc).__name__
