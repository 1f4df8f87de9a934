"""The Messages API request body (https://platform.claude.com/docs/en/api/messages): system,
merged turns, images, tools and ``tool_choice``, tool results with ``is_error``, options,
``think`` budgets, structured answers as a forced tool."""

from __future__ import annotations

import pytest

from ollm_lite.errors import ConfigError
from ollm_lite.providers._anthropic_wire import count_body, request_body
from ollm_lite.types import (
    GenerationOptions,
    ImagePart,
    Message,
    ProviderBlock,
    ProviderRequest,
    ToolCall,
    ToolResult,
    ToolSchema,
)

CALL = ToolCall.from_arguments("toolu_1", "get_weather", {"city": "Oslo"})
TOOLS = [
    ToolSchema(
        "get_weather",
        "Weather for a city.",
        {"type": "object", "properties": {"city": {"type": "string"}}},
    ),
    ToolSchema("now"),
]


def body(*messages: Message, **kw: object) -> dict[str, object]:
    return request_body(ProviderRequest("claude", list(messages), **kw), stream=False)  # type: ignore[arg-type]


def test_system_goes_top_level_and_same_role_turns_merge() -> None:
    b = body(
        Message.system("Rule two."),
        Message.user("a"),
        Message.user("b", images=[ImagePart("aGk=", "image/jpeg")]),
        Message.assistant("c"),
        system_prompt="Rule one.",
    )
    assert b["system"] == "Rule one.\n\nRule two."
    assert b["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "a"},
                {"type": "text", "text": "b"},
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/jpeg", "data": "aGk="},
                },
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "c"}]},
    ]
    assert (
        b["max_tokens"] == 4096
        and "stream" not in b
        and "tools" not in b
        and "tool_choice" not in b
    )


def test_tool_calls_and_results() -> None:
    failed = ToolResult(False)
    other = ToolCall.from_arguments("toolu_2", "now", {})
    thinking = ProviderBlock(
        "anthropic", {"type": "thinking", "thinking": "hm", "signature": "c2ln"}
    )
    b = body(
        Message.user("weather?"),
        Message("assistant", [], tool_calls=[CALL, other], provider_blocks=(thinking,)),
        Message.tool(ToolResult(True, {"t": 3}), CALL),
        Message.tool(failed, other),
    )
    assistant, results = b["messages"][1:]  # type: ignore[index,misc]
    assert assistant == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "hm", "signature": "c2ln"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Oslo"}},
            {"type": "tool_use", "id": "toolu_2", "name": "now", "input": {}},
        ],
    }
    assert results == {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": '{"ok": true, "data": {"t": 3}}',
            },
            {
                "type": "tool_result",
                "tool_use_id": "toolu_2",
                "content": failed.to_json(),
                "is_error": True,
            },
        ],
    }


@pytest.mark.parametrize(
    ("choice", "sent"),
    [
        ("auto", {"type": "auto"}),
        ("none", {"type": "none"}),
        ("required", {"type": "any"}),
        ({"name": "now"}, {"type": "tool", "name": "now"}),
    ],
)
def test_tools_and_tool_choice(choice: object, sent: dict[str, str]) -> None:
    b = body(Message.user("x"), tools=TOOLS, tool_choice=choice)
    assert b["tools"] == [
        {
            "name": "get_weather",
            "description": "Weather for a city.",
            "input_schema": TOOLS[0].parameters,
        },
        {"name": "now", "input_schema": {"type": "object", "properties": {}}},
    ]
    assert b["tool_choice"] == sent


def test_forcing_a_tool_that_is_not_offered_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        body(Message.user("x"), tools=TOOLS, tool_choice={"name": "nope"})


def test_options_the_api_has_and_has_not() -> None:
    opts = GenerationOptions(
        temperature=0.3,
        top_p=0.9,
        top_k=40,
        max_tokens=99,
        stop=["END"],
        seed=7,
        repeat_penalty=1.1,
        presence_penalty=0.5,
        frequency_penalty=0.5,
        extra_body={"metadata": {"user_id": "u1"}, "temperature": 0.1},
    )
    b = body(Message.user("x"), options=opts, keep_alive="5m")
    assert {k: v for k, v in b.items() if k not in ("model", "messages")} == {
        "max_tokens": 99,
        "stop_sequences": ["END"],
        "temperature": 0.1,
        "top_p": 0.9,
        "top_k": 40,
        "metadata": {"user_id": "u1"},
    }


@pytest.mark.parametrize(
    ("think", "budget"),
    [(True, 4096), ("medium", 4096), ("low", 1024), ("high", 16384), (2500, 2500)],
)
def test_think_budgets(think: object, budget: int) -> None:
    b = body(Message.user("x"), think=think)
    assert b["thinking"] == {"type": "enabled", "budget_tokens": budget}
    assert b["max_tokens"] == budget + 4096
    given = body(Message.user("x"), think=think, options=GenerationOptions(max_tokens=20000))
    assert given["max_tokens"] == 20000


def test_think_false_sends_nothing_and_a_bad_level_is_refused() -> None:
    assert "thinking" not in body(Message.user("x"), think=False)
    with pytest.raises(ConfigError):
        body(Message.user("x"), think="extreme")


def test_a_schema_is_a_forced_tool() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    b = body(Message.user("x"), response_format=schema)
    assert b["tools"] == [
        {"name": "json_answer", "description": b["tools"][0]["description"], "input_schema": schema}  # type: ignore[index]
    ]
    assert b["tool_choice"] == {"type": "tool", "name": "json_answer"}
    wrapped = body(Message.user("x"), response_format={"type": "array"})
    assert wrapped["tools"][0]["input_schema"]["properties"] == {"value": {"type": "array"}}  # type: ignore[index]


def test_count_body_has_no_sampling_options() -> None:
    b = count_body(
        ProviderRequest(
            "claude",
            [Message.user("x")],
            tools=TOOLS,
            think="low",
            options=GenerationOptions(max_tokens=5, stop=["x"]),
        )
    )
    assert set(b) == {"model", "messages", "tools", "tool_choice", "thinking"}
