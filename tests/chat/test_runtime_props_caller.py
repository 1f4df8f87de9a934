"""The caller's objects are read, never written: random prompts, images, options, histories,
scripted turns, tool lists and cancel events go through ``ChatClient.chat``, ``Conversation``,
``ToolRegistry`` and ``ScriptedProvider`` and come out deep-equal to a copy taken before, however
the chat ends (complete, tools, errors, a consumer that stops early)."""

from __future__ import annotations

import copy
import threading
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from support.strategies import json_of

from ollm_lite.chat import ChatClient, Conversation
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.tools import ToolRegistry, tool
from ollm_lite.types import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    GenerationOptions,
    ImagePart,
    Message,
    TextEvent,
    TextPart,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
)

CHAT_EXAMPLES = 300
REGISTRY_EXAMPLES = 400
SETTINGS = settings(
    max_examples=CHAT_EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@tool
def grow(items: Any, extra: Any = None) -> Any:
    """Changes its own arguments (allowed: they are the tool's copy) and returns them.

    Untyped on purpose: no annotation means no conversion, so the tool gets the argument
    values themselves, not converted copies.

    Args:
        items: Numbers.
        extra: More numbers.
    """
    if isinstance(items, list):
        items.append(len(items))
    if isinstance(extra, dict):
        extra["seen"] = 1
    return [items, extra]


@tool
def fail(reason: str = "") -> str:
    """Always fails.

    Args:
        reason: Why.
    """
    raise RuntimeError(reason)


json_scalars = st.none() | st.booleans() | st.integers(-5, 5) | st.text(max_size=5)
json_values = json_of(json_scalars, keys=st.text(max_size=4), max_leaves=6)
texts = st.text(max_size=12)
images = st.lists(
    st.builds(ImagePart, st.text("abcXYZ=", max_size=8), st.just("image/png")), max_size=2
)
tool_calls = st.one_of(
    st.builds(
        lambda items, extra: ToolCall.from_arguments("g", "grow", {"items": items, "extra": extra}),
        st.lists(st.integers(0, 9), max_size=3),
        st.none() | st.dictionaries(st.sampled_from("ab"), st.integers(0, 9), max_size=2),
    ),
    st.builds(lambda r: ToolCall.from_arguments("f", "fail", {"reason": r}), texts),
    st.builds(
        lambda name, args: ToolCall.from_arguments("x", name, args),
        st.sampled_from(["grow", "missing"]),
        st.dictionaries(st.text(max_size=4), json_values, max_size=3),
    ),
)
events = st.one_of(
    texts.map(TextEvent),
    texts.map(ThinkingEvent),
    tool_calls.map(ToolCallEvent),
)
terminals = st.one_of(
    st.just(FinishEvent("stop")),
    st.just(FinishEvent("tool")),
    st.just(FinishEvent("length")),
    st.builds(lambda m: ErrorEvent(ErrorInfo(m, "LLM_BAD_RESPONSE")), texts),
)
turns = st.lists(
    st.one_of(
        texts,
        st.builds(
            lambda body, end: [*body, *end],
            st.lists(events, max_size=4),
            st.lists(terminals, max_size=1),
        ),
    ),
    max_size=4,
)
options = st.builds(
    GenerationOptions,
    temperature=st.none() | st.floats(0, 2),
    stop=st.none() | st.lists(texts, max_size=3),
    extra_body=st.dictionaries(st.text(max_size=4), json_values, max_size=3),
)
messages = st.one_of(
    st.builds(Message.user, texts.filter(bool), images),
    st.builds(Message.assistant, texts, st.lists(tool_calls, max_size=2)),
    st.builds(lambda t: Message("system", [TextPart(t)]), texts),
)
prompts = st.one_of(texts.filter(bool), messages)


def consume(stream: Any, stop_after: int | None) -> list[Any]:
    """Read the chat, closing it early after ``stop_after`` events (``None``: to the end)."""
    seen: list[Any] = []
    try:
        for event in stream:
            seen.append(event)
            if stop_after is not None and len(seen) >= stop_after:
                break
    finally:
        stream.close()
    return seen


@SETTINGS
@given(
    prompts,
    images,
    options,
    turns,
    st.sampled_from(["auto", "native", "react"]),
    st.none() | st.integers(0, 6),
    st.booleans(),
)
def test_chat_leaves_every_caller_object_as_it_was(
    prompt: Any,
    image_list: list[ImagePart],
    option: GenerationOptions,
    script: list[Any],
    tool_mode: str,
    stop_after: int | None,
    registry_given: bool,
) -> None:
    tool_list = [grow, fail]
    tools: Any = ToolRegistry(tool_list) if registry_given else tool_list
    cancel = threading.Event()
    image_arg = image_list if isinstance(prompt, str) else []
    before = copy.deepcopy((prompt, image_arg, option, script, tool_list))
    provider = ScriptedProvider(script)
    client = ChatClient(provider, model="m", max_turns=3)
    stream = client.chat(
        prompt,
        tools=tools,
        options=option,
        cancel=cancel,
        tool_mode=tool_mode,
        images=image_arg,  # type: ignore[arg-type]
    )
    consume(stream, stop_after)
    assert (prompt, image_arg, option, script, tool_list) == before
    assert not cancel.is_set()
    if registry_given:
        assert tools.names() == ["grow", "fail"]


@SETTINGS
@given(st.lists(messages, max_size=4), prompts, turns, st.none() | st.integers(0, 6), options)
def test_conversation_leaves_the_given_history_and_arguments_as_they_were(
    history: list[Message],
    prompt: Any,
    script: list[Any],
    stop_after: int | None,
    option: GenerationOptions,
) -> None:
    before = copy.deepcopy((history, prompt, script, option))
    client = ChatClient(ScriptedProvider(script), tools=[grow, fail], model="m", max_turns=3)
    conversation = Conversation(client, system_prompt="s", history=history)
    cancel = threading.Event()
    consume(conversation.send(prompt, options=option, cancel=cancel), stop_after)
    conversation.run("again", options=option, cancel=cancel)
    assert (history, prompt, script, option) == before
    assert not cancel.is_set()


@settings(max_examples=REGISTRY_EXAMPLES, deadline=None)
@given(tool_calls, st.booleans())
def test_execute_leaves_the_call_and_the_cancel_event_as_they_were(
    call: ToolCall, set_cancel: bool
) -> None:
    cancel = threading.Event()
    if set_cancel:
        cancel.set()
    before = copy.deepcopy(call)
    registry = ToolRegistry([grow, fail])
    registry.execute(call, cancel)
    assert call == before
    assert cancel.is_set() is set_cancel
