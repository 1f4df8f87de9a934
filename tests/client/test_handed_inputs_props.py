"""Whatever a caller hands the library as a message or a path, only ``OllmError`` comes back.

* Messages: a valid conversation of dicts (text and image parts, tool calls, a tool result)
  with any JSON value put at any position: ``ask`` answers or raises ``ConfigError``;
  ``events`` never raises and ends with one ``ChatFinishEvent``.
* Paths: any string (a NUL byte, a directory, a FIFO, a device, a socket, a missing folder, a
  name too long, a symlink loop, a file that cannot be read) given as an image, a session or
  conversation file to load or save, or a config file: the call succeeds or raises an
  ``OllmError`` at once — it never blocks and never reads without a limit.
"""

from __future__ import annotations

import base64
import copy
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st
from support.path_support import awkward_paths, outcome_within
from support.strategies import json_values

import ollm_lite
from ollm_lite import ChatFinishEvent, ConfigError, OllmError, ScriptedProvider
from ollm_lite.chat import ChatClient, Conversation
from ollm_lite.config import load_config

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()

CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "Be brief."},
    {
        "role": "user",
        "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ],
    },
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {"a": 1}}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "name": "f", "content": "done"},
    {"role": "user", "content": "And then?"},
]

#: Values that are no JSON, as a Python caller might still hand them over.
odd_values = st.sampled_from([float("nan"), b"bytes", {1, 2}, object(), ("a", "b"), 3.5])


def positions(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every position in a tree of dicts and lists, the root excluded."""
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += positions(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found += positions(value, (*prefix, index))
    return found


def replaced(tree: Any, where: tuple[Any, ...], value: Any) -> Any:
    tree = copy.deepcopy(tree)
    parent = tree
    for step in where[:-1]:
        parent = parent[step]
    parent[where[-1]] = value
    return tree


@settings(max_examples=400)
@given(st.data(), json_values | odd_values)
def test_any_value_anywhere_in_the_messages_is_answered_or_a_config_error(
    data: st.DataObject, value: Any
) -> None:
    where = data.draw(st.sampled_from(positions(CONVERSATION)), label="position")
    prompt = replaced(CONVERSATION, where, value)
    llm = ollm_lite.connect(ScriptedProvider(["ok", "ok"]), model="m")
    try:
        llm.ask(prompt)
    except ConfigError as exc:
        assert exc.code == "CONFIG_INVALID"
    events = list(llm.events(prompt))
    assert isinstance(events[-1], ChatFinishEvent)
    assert sum(isinstance(e, ChatFinishEvent) for e in events) == 1


# --------------------------------------------------------------------------- paths


@pytest.fixture(scope="module")
def folder() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as name:
        yield Path(name)


@pytest.fixture(scope="module")
def awkward(folder: Path) -> dict[str, str]:
    return awkward_paths(folder / "awkward")


#: A name inside the test's folder: any character but "/", never "." or "..".
names = st.text(st.characters(blacklist_characters="/"), min_size=1, max_size=40).filter(
    lambda name: name not in (".", "..")
)


def path_uses(path: str, folder: Path) -> dict[str, Callable[[], object]]:
    """Every call that takes a path of a file to read or write whole."""
    llm = ollm_lite.connect(ScriptedProvider(["ok"] * 4), model="m")
    chat = ChatClient(ScriptedProvider(), model="m")
    saved = folder / "saved.json"
    if not saved.exists():
        llm.session(system="s").save(saved)
    return {
        "image (ask)": lambda: llm.ask("look", images=[path]),
        "image (events)": lambda: _events_must_not_raise(llm, path),
        "load_session": lambda: ollm_lite.load_session(path, client=llm),
        "Session.save": lambda: llm.session().save(path),
        "Conversation.load": lambda: Conversation.load(path, chat),
        "Conversation.save": lambda: chat.conversation().save(path),
        "load_config": lambda: load_config(path, env={}),
        "connect(config=)": lambda: ollm_lite.connect(ScriptedProvider(), config=path),
    }


def _events_must_not_raise(llm: ollm_lite.Client, path: str) -> object:
    events = list(llm.events("look", images=[path]))
    assert isinstance(events[-1], ChatFinishEvent)
    return events


def check_every_use(path: str, folder: Path, fifos: list[str]) -> None:
    for use, call in path_uses(path, folder).items():
        outcome = outcome_within(call, fifos)
        if isinstance(outcome, BaseException):
            assert isinstance(outcome, OllmError), (use, path, outcome)


@settings(max_examples=60)
@given(names)
def test_any_name_as_a_path_succeeds_or_is_an_ollm_error(
    folder: Path, awkward: dict[str, str], name: str
) -> None:
    check_every_use(str(folder / "any" / name), folder, [awkward["fifo"]])
    check_every_use(str(folder / name), folder, [awkward["fifo"]])


def test_every_awkward_path_is_an_ollm_error_at_once(folder: Path, awkward: dict[str, str]) -> None:
    for name, path in awkward.items():
        for use, call in path_uses(path, folder).items():
            if use.endswith(".save") and not path.startswith(str(folder)):
                continue  # never risk replacing a device of the machine (the tests may run as root)
            if use.endswith(".save") and name == "symlink loop":
                continue  # saving replaces the link itself (os.replace): a success
            outcome = outcome_within(call, [awkward["fifo"]])
            if use == "image (events)":
                assert isinstance(outcome, list), (name, outcome)
                assert outcome[0].type == "error", name
            else:
                assert isinstance(outcome, OllmError), (name, use, outcome)
