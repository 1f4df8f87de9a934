"""The script API's signatures, as editors, ``help()`` and ``inspect.signature`` show them.

The README fixes them: every parameter after ``prompt`` is keyword-only, ``events`` takes
exactly ``run``'s parameters, a ``Session`` has the client's calls, and ``ollm_lite.ask`` /
``ollm_lite.stream`` are ``Client.ask`` / ``Client.stream`` without ``self``. ``events`` gets
``run``'s parameters from one declaration (``same_parameters_as``); these tests check that
what a reader sees is what a call does.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator

import pytest

import ollm_lite
from ollm_lite import ChatFinishEvent, ScriptedProvider, Session, TextEvent
from ollm_lite.client import Client
from ollm_lite.client._calls import same_parameters_as

KEYWORD_ONLY = inspect.Parameter.KEYWORD_ONLY
VAR_KEYWORD = inspect.Parameter.VAR_KEYWORD

EXPECTED = {
    "ask": ["system", "model", "schema", "images", "cancel"],
    "stream": ["system", "model", "images", "cancel"],
    "run": ["tools", "system", "model", "max_turns", "tool_mode", "images", "cancel"],
    "events": ["tools", "system", "model", "max_turns", "tool_mode", "images", "cancel"],
}


def _shape(function: object) -> list[tuple[str, object, object]]:
    parameters = inspect.signature(function).parameters.values()  # type: ignore[arg-type]
    return [(p.name, p.kind, p.default) for p in parameters]


@pytest.mark.parametrize("cls", [Client, Session])
@pytest.mark.parametrize("name", EXPECTED)
def test_every_call_has_prompt_then_keyword_only_parameters_with_none_defaults(
    cls: type, name: str
) -> None:
    params = list(inspect.signature(getattr(cls, name)).parameters.values())
    assert [p.name for p in params[:2]] == ["self", "prompt"]
    assert params[1].default is inspect.Parameter.empty
    middle, last = params[2:-1], params[-1]
    assert [p.name for p in middle] == EXPECTED[name]
    assert all(p.kind is KEYWORD_ONLY for p in middle)
    assert {p.name: p.default for p in middle} == {
        n: "auto" if n == "tool_mode" else None for n in EXPECTED[name]
    }
    assert (last.name, last.kind) == ("options", VAR_KEYWORD)


def test_events_takes_exactly_runs_parameters_and_says_what_it_returns() -> None:
    assert _shape(Client.events) == _shape(Client.run)
    assert inspect.signature(Client.events).return_annotation == "Iterator[ChatEvent]"
    hints = typing.get_type_hints(Client.events)
    assert hints["return"] == Iterator[ollm_lite.ChatEvent]
    assert hints["prompt"] == typing.get_type_hints(Client.run)["prompt"]
    assert Client.events.__name__ == "events"
    assert "never raises" in (Client.events.__doc__ or "")


@pytest.mark.parametrize("name", ["ask", "stream"])
def test_module_shortcuts_are_the_client_calls_without_self(name: str) -> None:
    shortcut = getattr(ollm_lite, name)
    assert _shape(shortcut) == _shape(getattr(Client, name))[1:]
    assert shortcut.__doc__ == getattr(Client, name).__doc__


def test_events_binds_its_arguments_as_python_would() -> None:
    llm = ollm_lite.connect(ScriptedProvider(["hi"]), model="m")
    with pytest.raises(TypeError):
        llm.events()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        llm.events("a", "b")  # type: ignore[misc]
    with pytest.raises(TypeError):
        llm.events("a", prompt="b")  # type: ignore[misc]
    events = list(llm.events(prompt="say hi", max_turns=1, tool_mode="native"))
    assert [e.value for e in events if isinstance(e, TextEvent)] == ["hi"]
    assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "complete"


def test_same_parameters_as_fills_in_defaults_and_keeps_extra_keywords_together() -> None:
    def template(a: int, *, b: str = "x", **rest: int) -> None:
        """The template."""

    @same_parameters_as(template)
    def copy(**arguments: object) -> dict[str, object]:
        """The copy."""
        return arguments

    assert copy(1) == {"a": 1, "b": "x", "rest": {}}
    assert copy(a=2, b="y", c=3) == {"a": 2, "b": "y", "rest": {"c": 3}}
    assert _shape(copy) == _shape(template)
    assert inspect.signature(copy).return_annotation == "dict[str, object]"
    assert (copy.__name__, copy.__doc__) == ("copy", "The copy.")
    with pytest.raises(TypeError):
        copy(1, 2)  # type: ignore[call-arg]


def test_a_wrong_call_to_events_names_events_as_python_would() -> None:
    llm = ollm_lite.connect(ScriptedProvider(["hi"]), model="m")
    with pytest.raises(TypeError, match=r"^events\(\) missing a required argument: 'prompt'"):
        llm.events()  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"^events\(\) too many positional arguments"):
        llm.session().events("a", "b")  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"^events\(\) multiple values for argument 'prompt'"):
        llm.events("a", prompt="b")  # type: ignore[misc]
