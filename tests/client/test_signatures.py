"""The script API's signatures, as editors, ``help()`` and ``inspect.signature`` show them.

The README fixes them: every parameter after ``prompt`` is keyword-only, ``events`` takes
exactly ``run``'s parameters, a ``Session`` has the client's calls, and ``ollm_lite.ask`` /
``ollm_lite.stream`` are ``Client.ask`` / ``Client.stream`` without ``self``. ``events`` spells
``run``'s parameters out in its own ``def``; these tests check that what a reader sees in the
source is what ``inspect.signature`` shows and what a call does.
"""

from __future__ import annotations

import ast
import inspect
import typing
from collections.abc import Iterator

import pytest

import ollm_lite
from ollm_lite import ChatFinishEvent, ScriptedProvider, Session, TextEvent
from ollm_lite.client import Client, _calls

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


def _source_shape(method: str) -> list[tuple[str, object, object, object]]:
    """The parameters as ``ScriptCalls``' source spells them: name, kind, default, annotation."""
    tree = ast.parse(inspect.getsource(_calls))
    (cls,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ScriptCalls"]
    (fn,) = [n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method]
    a, empty = fn.args, inspect.Parameter.empty
    assert not (a.posonlyargs or a.defaults or a.vararg) and a.kwarg is not None
    keyword = [empty if d is None else ast.literal_eval(d) for d in a.kw_defaults]
    params = [
        *((p, inspect.Parameter.POSITIONAL_OR_KEYWORD, empty) for p in a.args),
        *((p, KEYWORD_ONLY, d) for p, d in zip(a.kwonlyargs, keyword, strict=True)),
        (a.kwarg, VAR_KEYWORD, empty),
    ]
    return [
        (p.arg, kind, default, empty if p.annotation is None else ast.unparse(p.annotation))
        for p, kind, default in params
    ]


@pytest.mark.parametrize("cls", [Client, Session])
def test_the_source_of_events_spells_the_signature_a_reader_sees_at_runtime(cls: type) -> None:
    runtime = [
        (p.name, p.kind, p.default, p.annotation)
        for p in inspect.signature(cls.events).parameters.values()
    ]
    assert _source_shape("events") == runtime
    assert _source_shape("events") == _source_shape("run")


def test_a_wrong_call_to_events_names_events_as_python_would() -> None:
    llm = ollm_lite.connect(ScriptedProvider(["hi"]), model="m")
    with pytest.raises(
        TypeError, match=r"\bevents\(\) missing 1 required positional argument: 'prompt'"
    ):
        llm.events()  # type: ignore[call-arg]
    with pytest.raises(
        TypeError, match=r"\bevents\(\) takes 2 positional arguments but 3 were given"
    ):
        llm.session().events("a", "b")  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"\bevents\(\) got multiple values for argument 'prompt'"):
        llm.events("a", prompt="b")  # type: ignore[misc]
    with pytest.raises(TypeError, match=r"\bevents\(\) got an unexpected keyword argument 'nope'"):
        llm.events("a", nope=1)  # type: ignore[call-arg]
