"""Properties of tools, the ReAct fallback and token counting, checked with hypothesis.

* Tool schema conversion (tool side): any annotation built from the supported types gives a schema
  that accepts every value of that type, rejects values of another JSON type, and survives
  ``Tool.schema()`` / ``ToolRegistry.schemas()`` unchanged.
* ReAct instruction formatting, output parsing (including label variants, fences, trailing
  prose and invented observations), JSON validation, observation formatting, turn completion
  and JSON error recovery.
* Token count estimation, provider tokenizer usage, fallback token estimation, token limit
  warning and enforcement.
* Tool execution error handling, and ``ToolRegistry.execute`` never raising.
"""

from __future__ import annotations

import enum
import json
import math
import string
from collections.abc import Iterator
from typing import Any, Literal

import pytest
from hypothesis import assume, given, strategies as st
from support.strategies import json_of

from ollm_lite.providers.base import BaseProvider
from ollm_lite.react import ReActToolHandler
from ollm_lite.tokens import TokenCounter, approx_token_count, estimate_tokens
from ollm_lite.tools import Tool, ToolRegistry, tool
from ollm_lite.tools._validation import validate_arguments
from ollm_lite.types import (
    ErrorInfo,
    Message,
    ProviderCapabilities,
    ProviderEvent,
    ProviderRequest,
    ToolCall,
    ToolResult,
    ToolSchema,
)

# --------------------------------------------------------------------------- strategies

json_scalar = (
    st.none()
    | st.booleans()
    | st.integers(-(10**12), 10**12)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12)
)
json_value = json_of(json_scalar, max_leaves=10)
json_object = st.dictionaries(st.text(max_size=8), json_value, max_size=4)

tool_names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True).filter(
    lambda n: n.casefold() not in {"none", "na", "null", "no", "nothing"}
)
# Free text that cannot contain a label (labels need a colon at a line start).
_PLAIN = st.characters(
    categories=("L", "N"), include_characters=" .,!?'()", exclude_characters=":\uff1a"
)
plain_line = st.text(_PLAIN, min_size=1, max_size=40).filter(lambda s: s.strip())
plain_text = st.lists(plain_line, min_size=1, max_size=3).map("\n".join)


def _vary_case(draw: st.DrawFn, word: str) -> str:
    mode = draw(st.sampled_from(["same", "lower", "upper", "random"]))
    if mode == "lower":
        return word.lower()
    if mode == "upper":
        return word.upper()
    if mode == "random":
        flips = draw(st.lists(st.booleans(), min_size=len(word), max_size=len(word)))
        return "".join(c.swapcase() if f else c for c, f in zip(word, flips, strict=True))
    return word


@st.composite
def label(draw: st.DrawFn, words: str) -> str:
    """A label as models write it: any case, spaces/_/- between words, optional Markdown."""
    sep = draw(st.sampled_from([" ", "  ", "_", "-"])) if " " in words else ""
    text = _vary_case(draw, words.replace(" ", sep) if sep else words)
    before_colon = draw(st.sampled_from(["", " "]))
    style = draw(st.sampled_from(["plain", "bold", "bold-outside", "bullet"]))
    if style == "bold":
        return f"**{text}{before_colon}:**"
    if style == "bold-outside":
        return f"**{text}**{before_colon}:"
    if style == "bullet":
        return f"- {text}{before_colon}:"
    return f"{text}{before_colon}:"


@st.composite
def json_text(draw: st.DrawFn, obj: dict[str, Any]) -> str:
    """``obj`` as JSON the way models write it: compact, indented, fenced, prose after it."""
    indent = draw(st.sampled_from([None, 2, 4]))
    text = json.dumps(obj, indent=indent, ensure_ascii=draw(st.booleans()))
    fence = draw(st.sampled_from(["", "```", "```json"]))
    if fence:
        text = f"\n{fence}\n{text}\n```"
    if draw(st.booleans()):
        text += draw(st.sampled_from([" ", "\n"])) + draw(plain_text)
    return text


# --------------------------------------------------------------------- ReAct instruction formatting


@given(
    st.lists(
        st.builds(
            ToolSchema,
            tool_names,
            st.none() | st.text(max_size=30),
            st.none() | json_object,
        ),
        max_size=5,
        unique_by=lambda s: s.name,
    )
)
def test_instructions_name_every_tool(schemas: list[ToolSchema]) -> None:
    """React instruction formatting: names, descriptions and parameter schemas."""
    text = ReActToolHandler(schemas).instructions()
    for schema in schemas:
        described = schema.description or "(no description)"
        assert f"- {schema.name}: {described}" in text
        params = schema.parameters or {"type": "object", "properties": {}}
        assert json.dumps(params, ensure_ascii=False) in text
    for word in ("Thought:", "Action:", "Action Input:", "Observation:", "Final Answer:"):
        assert word in text


# ----------------------------------------------------------------------------- ReAct output parsing


@st.composite
def action_replies(draw: st.DrawFn) -> tuple[str, str, str, dict[str, Any], str]:
    name = draw(tool_names)
    written = _vary_case(draw, name)
    thought = draw(plain_text)
    args = draw(json_object)
    reply = (
        f"{draw(label('Thought'))} {thought}\n"
        f"{draw(label('Action'))} {written}\n"
        f"{draw(label('Action Input'))} {draw(json_text(args))}"
    )
    return reply, name, thought, args, written


@given(action_replies())
def test_action_replies_parse(case: tuple[str, str, str, dict[str, Any], str]) -> None:
    """React output parsing: Thought, Action and Action Input are extracted."""
    reply, name, thought, args, _ = case
    handler = ReActToolHandler([ToolSchema(name)])
    step = handler.parse(reply)
    assert step.thought == thought.strip()
    assert step.action == name  # the registered spelling, whatever case the model used
    assert step.action_input == args
    assert step.error is None and step.final_answer is None
    call = handler.to_tool_call(step, "id-1")
    assert call.name == name and call.args == args and json.loads(call.arguments) == args


@given(plain_text, plain_text, st.data())
def test_final_answers_parse(thought: str, answer: str, data: st.DataObject) -> None:
    """React output parsing: Thought and Final Answer are extracted."""
    reply = f"{data.draw(label('Thought'))} {thought}\n{data.draw(label('Final Answer'))} {answer}"
    step = ReActToolHandler([]).parse(reply)
    assert (step.thought, step.final_answer) == (thought.strip(), answer.strip())


@given(action_replies(), st.text(max_size=60), st.text(max_size=80), st.data())
def test_invented_observation_is_ignored(
    case: tuple[str, str, str, dict[str, Any], str], invented: str, rest: str, data: st.DataObject
) -> None:
    """ReAct output parsing: what follows a model-invented ``Observation:`` changes nothing."""
    reply, name, *_ = case
    handler = ReActToolHandler([ToolSchema(name)])
    tail = f"\n{data.draw(label('Observation'))} {invented}\n{rest}"
    clean, cut = handler.parse(reply), handler.parse(reply + tail)
    assert (cut.thought, cut.action, cut.action_input, cut.error) == (
        clean.thought,
        clean.action,
        clean.action_input,
        clean.error,
    )
    assert cut.final_answer is None and cut.raw == reply.rstrip()


# ------------------------------------------------ ReAct JSON validation / ReAct JSON error recovery


def _parse_input(action_input: str) -> Any:
    handler = ReActToolHandler([ToolSchema("tool")])
    return handler, handler.parse(f"Thought: t\nAction: tool\nAction Input: {action_input}")


@given(json_object, st.data())
def test_valid_json_objects_are_accepted(obj: dict[str, Any], data: st.DataObject) -> None:
    """React JSON validation: any JSON object, in any layout, is accepted as is."""
    _, step = _parse_input(data.draw(json_text(obj)))
    assert step.error is None and step.action_input == obj


_not_json_start = st.text(
    st.characters(exclude_characters="\n\r{`", exclude_categories=("Cs",)), min_size=1, max_size=40
).filter(lambda s: s.strip() and s.lstrip()[0] not in "{`")


@st.composite
def invalid_inputs(draw: st.DrawFn) -> str:
    kind = draw(st.sampled_from(["prose", "truncated", "not-object"]))
    if kind == "prose":
        return draw(_not_json_start)
    if kind == "truncated":
        text = json.dumps(draw(json_object))
        return text[: draw(st.integers(1, len(text) - 1))]
    value = draw(json_value.filter(lambda v: not isinstance(v, dict)))
    return json.dumps(value)


@given(invalid_inputs())
def test_invalid_json_is_rejected(action_input: str) -> None:
    """React JSON validation: text that is not one JSON object is rejected."""
    handler, step = _parse_input(action_input)
    assert step.action == "tool" and step.action_input is None and step.error
    assert not handler.is_final(step)


@given(invalid_inputs())
def test_invalid_json_gets_a_correction_request(action_input: str) -> None:
    """React JSON error recovery: the model is asked to resend valid JSON."""
    handler, step = _parse_input(action_input)
    message = handler.correction_message(step)
    assert message.startswith("Error: ")
    assert "valid JSON" in message and "Action: tool" in message and "Action Input:" in message


# --------------------------------------------------------------------- ReAct observation formatting


results = st.one_of(
    st.builds(ToolResult, st.just(True), json_value),
    st.builds(
        lambda code, msg, details: ToolResult(ok=False, error=ErrorInfo(msg, code, details)),
        st.text(string.ascii_uppercase + "_", min_size=1, max_size=20),
        st.text(max_size=40),
        st.none() | json_object,
    ),
)


@given(results)
def test_observation_is_the_result_json(result: ToolResult) -> None:
    """React observation formatting: ``Observation: <result JSON>``."""
    text = ReActToolHandler([]).format_observation(result)
    assert text == "Observation: " + result.to_json()
    payload = json.loads(text.removeprefix("Observation: "))
    assert payload["ok"] is result.ok
    if result.ok:
        assert payload["data"] == result.data
    else:
        assert result.error is not None and payload["error"]["code"] == result.error.code


# ---------------------------------------------------------------------------- ReAct turn completion


@given(st.none() | action_replies(), plain_text, st.data())
def test_final_answer_ends_the_turn(
    before: tuple[str, str, str, dict[str, Any], str] | None, answer: str, data: st.DataObject
) -> None:
    """React turn completion: a Final Answer ends the turn, no tool call follows."""
    prefix = before[0] + "\n" if before else ""
    names = [ToolSchema(before[1])] if before else []
    handler = ReActToolHandler(names)
    step = handler.parse(f"{prefix}{data.draw(label('Final Answer'))} {answer}")
    assert handler.is_final(step)
    assert step.final_answer == answer.strip() and step.action is None and step.error is None
    with pytest.raises(ValueError):
        handler.to_tool_call(step, "id")


# --------------------------------------------------------------------------- tokens


class _Provider(BaseProvider):
    name = "prop"

    def __init__(self, *, tokenizer: bool, count: object = 1, context: int | None = None) -> None:
        self.capabilities = ProviderCapabilities(token_counting=tokenizer)
        self._count, self._context = count, context
        self.seen: list[ProviderRequest] = []

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        raise AssertionError("never sent")

    def count_tokens(self, request: ProviderRequest) -> int:
        self.seen.append(request)
        return self._count

    def context_length(self, model: str) -> int | None:
        return self._context


requests_ = st.builds(
    lambda msgs, system, tools: ProviderRequest("m", msgs, system_prompt=system, tools=tools),
    st.lists(
        st.builds(Message.user, st.text(max_size=50))
        | st.builds(Message.system, st.text(max_size=50))
        | st.builds(
            lambda t, calls: Message.assistant(t, calls),
            st.text(max_size=30),
            st.lists(
                st.builds(ToolCall.from_arguments, st.text(max_size=5), tool_names, json_object),
                max_size=2,
            ),
        ),
        max_size=5,
    ),
    st.none() | st.text(max_size=80),
    st.none()
    | st.lists(st.builds(ToolSchema, tool_names, st.none() | st.text(max_size=20)), max_size=3),
)


@given(requests_, st.booleans(), st.integers(1, 10**6))
def test_count_is_a_positive_integer(request: ProviderRequest, tokenizer: bool, n: int) -> None:
    """Token count estimation: every request gets a positive integer count."""
    tokens, exact = TokenCounter(_Provider(tokenizer=tokenizer, count=n)).count(request)
    assert isinstance(tokens, int) and not isinstance(tokens, bool) and tokens > 0
    assert exact is tokenizer


@given(requests_, st.integers(1, 10**7))
def test_provider_tokenizer_is_used(request: ProviderRequest, n: int) -> None:
    """Provider tokenizer usage: the provider's count, for the very request."""
    provider = _Provider(tokenizer=True, count=n)
    assert TokenCounter(provider).count(request) == (n, True)
    assert len(provider.seen) == 1 and provider.seen[0] is request


@given(requests_, st.integers(-(10**6), 0) | st.sampled_from([True, False, 2.0, "5", None]))
def test_an_unusable_provider_count_falls_back_to_the_estimate(
    request: ProviderRequest, answer: object
) -> None:
    """A tokenizer answer that is not a positive int cannot become the (positive) count."""
    tokens, exact = TokenCounter(_Provider(tokenizer=True, count=answer)).count(request)
    assert exact is False and tokens == max(1, approx_token_count(request))


@given(st.text(max_size=500))
def test_fallback_is_ceil_chars_over_4(text: str) -> None:
    """Fallback token estimation: ceil(len(text) / 4)."""
    assert estimate_tokens(text) == math.ceil(len(text) / 4)
    request = ProviderRequest("m", [Message.user(text)])
    counted = TokenCounter(_Provider(tokenizer=False)).count(request)
    assert counted == (max(1, math.ceil(len(text) / 4)), False)


@given(st.integers(1, 10**7), st.data())
def test_warning_from_90_percent(limit: int, data: st.DataObject) -> None:
    """Token limit warning: 90 % to 100 % of the window warns, below does not."""
    tokens = data.draw(st.integers(math.ceil(limit * 0.9), limit))
    check = TokenCounter(_Provider(tokenizer=True, count=tokens, context=limit)).check(
        ProviderRequest("m", [])
    )
    assert check.warning and not check.exceeded and check.limit == limit
    if math.ceil(limit * 0.9) > 1:  # a window of 1 token has no positive count below 90 %
        below = data.draw(st.integers(1, math.ceil(limit * 0.9) - 1))
        assert (
            not TokenCounter(_Provider(tokenizer=True, count=below, context=limit))
            .check(ProviderRequest("m", []))
            .warning
        )


@given(st.integers(1, 10**7), st.integers(1, 10**7))
def test_over_the_limit_is_exceeded(limit: int, extra: int) -> None:
    """Token limit enforcement: more tokens than the window is ``exceeded``."""
    counter = TokenCounter(_Provider(tokenizer=False), context_limits={"m": limit})
    request = ProviderRequest("m", [Message.user("x" * (4 * (limit + extra)))])
    check = counter.check(request)
    assert check.tokens == limit + extra and check.exceeded and check.warning


# -------------------------------------------------------------------- tool execution error handling


_EXCEPTIONS = [ValueError, RuntimeError, KeyError, ZeroDivisionError, OSError, TypeError, Exception]


@given(st.sampled_from(_EXCEPTIONS), st.text(max_size=40))
def test_tool_errors_become_results(exc_type: type[Exception], message: str) -> None:
    """Tool execution error handling: the error is in the result; tools go on."""

    def failing(x: int) -> None:
        raise exc_type(message)

    def fine(x: int) -> int:
        return x + 1

    registry = ToolRegistry([failing, fine])
    result = registry.execute(ToolCall.from_arguments("1", "failing", {"x": 1}))
    assert not result.ok and result.error is not None
    assert result.error.code == "TOOL_EXECUTION_FAILED"
    assert result.error.message == f"{exc_type.__name__}: {exc_type(message)}"
    payload = json.loads(result.to_json())
    assert payload["ok"] is False and payload["error"]["code"] == "TOOL_EXECUTION_FAILED"
    assert registry.execute(ToolCall.from_arguments("2", "fine", {"x": 1})).data == 2


def _registry() -> ToolRegistry:
    def add(a: int, b: int = 0) -> int:
        return a + b

    def explode(text: str) -> None:
        raise RuntimeError(text)

    def weird() -> object:
        return object()

    return ToolRegistry([add, explode, weird, tool(lambda **kw: kw, name="anything")])


_CODES = {
    "TOOL_NOT_FOUND",
    "TOOL_INVALID_ARGUMENTS",
    "TOOL_EXECUTION_FAILED",
    "TOOL_RESULT_INVALID",
}


@given(
    st.sampled_from(["add", "explode", "weird", "anything"]) | st.text(max_size=10),
    json_object | st.text(max_size=30),
)
def test_execute_never_raises(name: str, args: dict[str, Any] | str) -> None:
    """Any call — unknown tool, any arguments — gives a result, never an error."""
    result = _registry().execute(ToolCall.from_arguments("id", name, args))
    assert isinstance(result, ToolResult)
    payload = json.loads(result.to_json())
    if not result.ok:
        assert result.error is not None and result.error.code in _CODES
        assert payload["error"]["code"] == result.error.code


# --------------------------------------------------------------------------- tool schema conversion


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


def _leaf() -> st.SearchStrategy[tuple[Any, st.SearchStrategy[Any], st.SearchStrategy[Any]]]:
    """(annotation, strategy of valid JSON values, strategy of wrongly typed values)."""
    finite = st.floats(allow_nan=False, allow_infinity=False)
    return st.sampled_from(
        [
            (str, st.text(max_size=10), st.integers() | st.booleans()),
            (
                int,
                st.integers(),
                st.text(max_size=5) | st.booleans() | finite.filter(lambda f: not f.is_integer()),
            ),
            (float, finite | st.integers(), st.text(max_size=5) | st.booleans()),
            (bool, st.booleans(), st.integers() | st.text(max_size=5)),
            (
                Literal["a", "b"],
                st.sampled_from(["a", "b"]),
                st.text(max_size=3).filter(lambda s: s not in ("a", "b")),
            ),
            (Color, st.sampled_from(["red", "green"]), st.sampled_from(["blue", "RED", ""])),
        ]
    )


def _extend(
    inner: st.SearchStrategy[tuple[Any, st.SearchStrategy[Any], st.SearchStrategy[Any]]],
) -> st.SearchStrategy[tuple[Any, st.SearchStrategy[Any], st.SearchStrategy[Any]]]:
    return st.one_of(
        inner.map(
            lambda t: (list[t[0]], st.lists(t[1], max_size=3), st.text(max_size=3) | st.integers())
        ),  # type: ignore[valid-type,name-defined]
        inner.map(
            lambda t: (
                dict[str, t[0]],
                st.dictionaries(st.text(max_size=4), t[1], max_size=3),
                st.lists(st.integers(), max_size=2),
            )
        ),  # type: ignore[valid-type,name-defined]
        inner.map(lambda t: (t[0] | None, st.none() | t[1], t[2])),
    )


annotated = st.recursive(_leaf(), _extend, max_leaves=3)


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def _tool_for(annotation: Any) -> Tool:
    def probe(value):  # type: ignore[no-untyped-def]
        return value

    probe.__annotations__ = {"value": annotation}
    return tool(probe)


@given(annotated, st.data())
def test_schema_accepts_its_type(
    case: tuple[Any, st.SearchStrategy[Any], st.SearchStrategy[Any]], data: st.DataObject
) -> None:
    """Tool schema conversion: values of the annotated type pass and come back."""
    annotation, valid, _ = case
    t = _tool_for(annotation)
    registry = ToolRegistry([t])
    assert registry.schemas() == [ToolSchema("probe", None, t.parameters)]
    value = data.draw(valid)
    assert validate_arguments({"value": value}, t.parameters) == []
    result = registry.execute(ToolCall.from_arguments("1", "probe", {"value": value}))
    assert result.ok, result
    assert result.data == _as_json(value)


@given(annotated, st.data())
def test_schema_rejects_other_types(
    case: tuple[Any, st.SearchStrategy[Any], st.SearchStrategy[Any]], data: st.DataObject
) -> None:
    """A value of another JSON type is TOOL_INVALID_ARGUMENTS, the tool not run."""
    annotation, _, wrong = case
    value = data.draw(wrong)
    assume(value is not None)
    result = ToolRegistry([_tool_for(annotation)]).execute(
        ToolCall.from_arguments("1", "probe", {"value": value})
    )
    assert result.error is not None and result.error.code == "TOOL_INVALID_ARGUMENTS"
