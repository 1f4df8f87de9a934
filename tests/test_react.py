"""The ReAct fallback: instructions, the tolerant parser, tool calls, observations, corrections.

The replies below are the shapes small local models really produce (labels in odd case and
Markdown, JSON over several lines or in fences, prose around it, invented observations).
"""

from __future__ import annotations

import json

import pytest

from ollm_lite.react import STOP_SEQUENCES, ReActStep, ReActToolHandler
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import ErrorInfo, ToolCall, ToolResult, ToolSchema

WEATHER = ToolSchema(
    "get_weather",
    "Current weather for a city.",
    {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
)
CLOCK = ToolSchema("now", None, None)


@pytest.fixture
def handler() -> ReActToolHandler:
    return ReActToolHandler([WEATHER, CLOCK])


OSLO = {"city": "Oslo"}


# --------------------------------------------------------------------------- instructions


def test_instructions_describe_every_tool_and_the_format(handler: ReActToolHandler) -> None:
    text = handler.instructions()
    assert "- get_weather: Current weather for a city." in text
    assert json.dumps(WEATHER.parameters) in text
    assert "- now: (no description)" in text
    assert '{"type": "object", "properties": {}}' in text  # a tool without parameters
    for label in ("Thought:", "Action:", "Action Input:", "Observation:", "Final Answer:"):
        assert label in text
    assert "one of [get_weather, now]" in text


def test_instructions_without_tools() -> None:
    assert "one of [(none)]" in ReActToolHandler([]).instructions()


def test_stop_sequences() -> None:
    assert STOP_SEQUENCES == ("\nObservation:",)


def test_max_corrections() -> None:
    assert ReActToolHandler([]).max_corrections == 2
    assert ReActToolHandler([], max_corrections=0).max_corrections == 0
    with pytest.raises(ValueError):
        ReActToolHandler([], max_corrections=-1)


# --------------------------------------------------------------------------- parsing actions


@pytest.mark.parametrize(
    "reply",
    [
        'Thought: Need it.\nAction: get_weather\nAction Input: {"city": "Oslo"}',
        # case and spacing
        'thought : Need it.\nACTION:get_weather\naction input :  {"city": "Oslo"}',
        'Thought: Need it.\nAction: get_weather\nAction_Input: {"city": "Oslo"}',
        'Thought: Need it.\nAction: get_weather\nAction-Input: {"city": "Oslo"}',
        # Markdown
        '**Thought:** Need it.\n**Action:** get_weather\n**Action Input:** {"city": "Oslo"}',
        '**Thought**: Need it.\n**Action**: `get_weather`\n**Action Input**: {"city": "Oslo"}',
        '- Thought: Need it.\n- Action: "get_weather"\n- Action Input: {"city": "Oslo"}',
        # JSON over several lines, in a fence, with prose after it
        'Thought: Need it.\nAction: get_weather\nAction Input: {\n  "city":\n    "Oslo"\n}',
        'Thought: Need it.\nAction: get_weather\nAction Input:\n```json\n{"city": "Oslo"}\n```',
        'Thought: Need it.\nAction: get_weather\nAction Input: ```{"city": "Oslo"}```',
        'Thought: Need it.\nAction: get_weather\nAction Input: {"city": "Oslo"} '
        "— this will tell me the temperature.\nI will wait for the result.",
        # the tool name in another case, in brackets, with a namespace
        'Thought: Need it.\nAction: Get_Weather\nAction Input: {"city": "Oslo"}',
        'Thought: Need it.\nAction: [get_weather]\nAction Input: {"city": "Oslo"}',
        'Thought: Need it.\nAction: functions.get_weather\nAction Input: {"city": "Oslo"}',
        # Windows line ends
        'Thought: Need it.\r\nAction: get_weather\r\nAction Input: {"city": "Oslo"}\r\n',
        # full-width colon
        'Thought\uff1a Need it.\nAction\uff1a get_weather\nAction Input\uff1a {"city": "Oslo"}',
    ],
)
def test_action_variants(handler: ReActToolHandler, reply: str) -> None:
    step = handler.parse(reply)
    assert step.thought == "Need it."
    assert step.action == "get_weather"
    assert step.action_input == OSLO
    assert step.error is None and step.final_answer is None
    assert not handler.is_final(step)


def test_unlabelled_thought_before_the_action(handler: ReActToolHandler) -> None:
    step = handler.parse('Let me check.\nAction: get_weather\nAction Input: {"city": "Oslo"}')
    assert (step.thought, step.action, step.action_input) == ("Let me check.", "get_weather", OSLO)


def test_json_on_the_action_line(handler: ReActToolHandler) -> None:
    step = handler.parse('Action: get_weather {"city": "Oslo"}')
    assert (step.action, step.action_input, step.error) == ("get_weather", OSLO, None)


def test_action_without_input_means_no_arguments(handler: ReActToolHandler) -> None:
    for reply in ("Thought: what time is it?\nAction: now", "Action: now\nAction Input:"):
        step = handler.parse(reply)
        assert (step.action, step.action_input, step.error) == ("now", {}, None)


@pytest.mark.parametrize(
    "reply",
    [
        'Action:\nget_weather\nAction Input: {"city": "Oslo"}',
        'Action: I will use the get_weather tool\nAction Input: {"city": "Oslo"}',
        'Action: call `get_weather` now {"city": "Oslo"}',
    ],
)
def test_tool_name_on_the_next_line_or_inside_prose(handler: ReActToolHandler, reply: str) -> None:
    step = handler.parse(reply)
    assert (step.action, step.action_input, step.error) == ("get_weather", OSLO, None)


def test_unknown_tool_name_is_kept_for_the_registry_to_report(handler: ReActToolHandler) -> None:
    step = handler.parse('Action: teleport\nAction Input: {"to": "Mars"}')
    assert step.action == "teleport" and step.action_input == {"to": "Mars"}


def test_json_containing_label_like_lines(handler: ReActToolHandler) -> None:
    """The JSON is decoded across lines that look like labels (inside strings)."""
    reply = 'Action: get_weather\nAction Input: {"city": "Oslo\\nThought: x"}'
    assert handler.parse(reply).action_input == {"city": "Oslo\nThought: x"}


def test_first_action_wins(handler: ReActToolHandler) -> None:
    reply = (
        'Action: get_weather\nAction Input: {"city": "Oslo"}\n'
        'Action: get_weather\nAction Input: {"city": "Bergen"}'
    )
    assert handler.parse(reply).action_input == OSLO


# --------------------------------------------------------------------------- invented observations


def test_invented_observation_is_cut(handler: ReActToolHandler) -> None:
    reply = (
        "Thought: I need the weather.\nAction: get_weather\n"
        'Action Input: {"city": "Oslo"}\nObservation: {"temp": 30}\n'
        "Thought: It is hot.\nFinal Answer: 30 degrees in Oslo."
    )
    step = handler.parse(reply)
    assert step.action == "get_weather" and step.action_input == OSLO
    assert step.final_answer is None and not handler.is_final(step)
    assert (
        step.raw
        == 'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Oslo"}'
    )


def test_observation_before_any_action_is_not_a_cut(handler: ReActToolHandler) -> None:
    reply = 'Observation: {"temp": 3}\nThought: I know it.\nFinal Answer: 3 degrees.'
    step = handler.parse(reply)
    assert step.final_answer == "3 degrees." and step.raw == reply


# --------------------------------------------------------------------------- final answers


@pytest.mark.parametrize(
    ("reply", "answer"),
    [
        ("Thought: I know.\nFinal Answer: 3 degrees.", "3 degrees."),
        ("FINAL ANSWER:3 degrees.", "3 degrees."),
        ("**Final Answer:** 3 degrees.", "3 degrees."),
        ("final_answer: 3 degrees.", "3 degrees."),
        ("Final Answer:\nLine one.\n\nLine two.\n", "Line one.\n\nLine two."),
        # a final answer wins over an action in the same reply
        ('Action: get_weather\nAction Input: {"city": "Oslo"}\nFinal Answer: cold', "cold"),
        # the answer keeps lines that look like labels
        (
            "Final Answer: Steps:\nAction: buy milk\nThought: nice",
            "Steps:\nAction: buy milk\nThought: nice",
        ),
        # ... even an answer that quotes a whole ReAct exchange
        (
            "Final Answer: The format is:\nAction: search\nObservation: the result\nDone.",
            "The format is:\nAction: search\nObservation: the result\nDone.",
        ),
    ],
)
def test_final_answers(handler: ReActToolHandler, reply: str, answer: str) -> None:
    step = handler.parse(reply)
    assert step.final_answer == answer
    assert step.action is None and step.error is None
    assert handler.is_final(step)


def test_plain_text_is_the_final_answer(handler: ReActToolHandler) -> None:
    """A model that ignores the format just answered; nothing is lost."""
    step = handler.parse("  It is sunny in Oslo today.  \n")
    assert step.final_answer == "It is sunny in Oslo today." and handler.is_final(step)


def test_action_none_is_an_answer(handler: ReActToolHandler) -> None:
    step = handler.parse("Thought: No tool needed, the answer is 4.\nAction: None")
    assert handler.is_final(step) and step.final_answer == "No tool needed, the answer is 4."


def test_empty_reply(handler: ReActToolHandler) -> None:
    step = handler.parse("")
    assert step == ReActStep(final_answer="", raw="")


# --------------------------------------------------------------------------- errors and corrections


@pytest.mark.parametrize(
    ("action_input", "fragment"),
    [
        ("{city: Oslo}", "not valid JSON"),
        ("{'city': 'Oslo'}", "not valid JSON"),
        ('{"city": "Oslo",}', "not valid JSON"),
        ('{"city": "Oslo"', "not valid JSON"),
        ("city=Oslo", "not valid JSON"),
        ('I will use {"city": "Oslo"}', "not valid JSON"),
        ('{"n": NaN}', "not valid JSON"),
        ('["Oslo"]', "not an array"),
        ('"Oslo"', "not a string"),
        ("42", "not a number"),
        ("true", "not a boolean"),
        ("null", "not null"),
    ],
)
def test_invalid_action_input(handler: ReActToolHandler, action_input: str, fragment: str) -> None:
    step = handler.parse(f"Thought: t\nAction: get_weather\nAction Input: {action_input}")
    assert step.action == "get_weather" and step.action_input is None
    assert step.error is not None and fragment in step.error
    assert action_input[:50] in step.error
    assert not handler.is_final(step)
    message = handler.correction_message(step)
    assert message.startswith("Error: ")
    assert "valid JSON" in message and "Action: get_weather" in message
    assert "get_weather, now" in message


def test_action_input_without_action(handler: ReActToolHandler) -> None:
    step = handler.parse('Thought: t\nAction Input: {"city": "Oslo"}')
    assert step.action is None and step.error is not None and "no Action" in step.error
    assert not handler.is_final(step)
    assert "Action: tool_name" in handler.correction_message(step)


def test_long_invalid_input_is_shortened_in_the_error(handler: ReActToolHandler) -> None:
    step = handler.parse("Action: get_weather\nAction Input: {" + "x" * 1000)
    assert step.error is not None and len(step.error) < 400


# --------------------------------------------------------------------------- calls and observations


def test_to_tool_call(handler: ReActToolHandler) -> None:
    step = handler.parse('Action: get_weather\nAction Input: {"city": "Zürich"}')
    call = handler.to_tool_call(step, "react-1")
    assert call == ToolCall("react-1", "get_weather", {"city": "Zürich"}, '{"city": "Zürich"}')
    assert handler.to_tool_call(ReActStep(action="now"), "r2") == ToolCall("r2", "now", {}, "{}")
    with pytest.raises(ValueError, match="no Action"):
        handler.to_tool_call(ReActStep(final_answer="x"), "r3")


def test_format_observation(handler: ReActToolHandler) -> None:
    ok = ToolResult(ok=True, data={"temp": 3})
    assert handler.format_observation(ok) == 'Observation: {"ok": true, "data": {"temp": 3}}'
    bad = ToolResult(ok=False, error=ErrorInfo("no tool", "TOOL_NOT_FOUND"))
    text = handler.format_observation(bad)
    assert json.loads(text.removeprefix("Observation: ")) == {
        "ok": False,
        "error": {"code": "TOOL_NOT_FOUND", "message": "no tool"},
    }


def test_round_trip_through_a_real_registry() -> None:
    """instructions → a model reply → tool call → the registry → an observation."""

    @tool
    def get_weather(city: str) -> dict[str, object]:
        """Current weather for a city."""
        return {"city": city, "temp": 3}

    registry = ToolRegistry([get_weather])
    handler = ReActToolHandler(registry.schemas())
    assert "get_weather: Current weather for a city." in handler.instructions()
    step = handler.parse('Thought: look it up\nAction: GET_WEATHER\nAction Input: {"city": "Oslo"}')
    result = registry.execute(handler.to_tool_call(step, "r1"))
    assert handler.format_observation(result) == (
        'Observation: {"ok": true, "data": {"city": "Oslo", "temp": 3}}'
    )


def test_a_lone_underscore_input_is_invalid_json_not_markup() -> None:
    """Regression (found by the ReAct JSON validation property): "_" after the colon is the input,
    not emphasis."""
    handler = ReActToolHandler([ToolSchema("t")])
    step = handler.parse("Action: t\nAction Input: _")
    assert step.error is not None and step.action_input is None
    bold = handler.parse('**Action:** t\n**Action Input:** {"a": 1}')
    assert bold.action_input == {"a": 1} and bold.error is None
