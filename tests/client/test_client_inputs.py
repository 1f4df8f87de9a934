"""Inputs as people hold them: prompts, images and tools, converted without changing them."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from support.client_support import client

from ollm_lite import ConfigError, ImagePart, Message, ToolSchema, tool

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0" + b"\x00" * 16


def test_a_list_of_dicts_is_the_conversation() -> None:
    llm, provider = client("Paris")
    llm.ask(
        [
            {"role": "system", "content": "Answer in one word."},
            {"role": "user", "content": "Capital of France?"},
        ]
    )
    sent = provider.requests[0].messages
    assert [(m.role, m.text) for m in sent] == [
        ("system", "Answer in one word."),
        ("user", "Capital of France?"),
    ]


def test_openai_shaped_assistant_and_tool_messages_are_read() -> None:
    llm, provider = client("done")
    llm.ask(
        [
            {"role": "user", "content": "add"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c9",
                        "type": "function",
                        "function": {"name": "add", "arguments": '{"a": 1}'},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "c9", "name": "add", "content": "3"},
        ]
    )
    sent = provider.requests[0].messages
    assert sent[1].tool_calls[0].args == {"a": 1}
    assert sent[2].tool_call_id == "c9"


def test_message_objects_are_copied() -> None:
    original = Message.user("hi")
    llm, provider = client("x")
    llm.ask([original], images=[PNG])
    assert original.parts == Message.user("hi").parts
    assert provider.requests[0].messages[0] is not original


@pytest.mark.parametrize(
    "bad",
    [
        "",
        [],
        [{"role": "wizard", "content": "x"}],
        [{"role": "user", "content": 5}],
        [42],
        b"bytes",
        3.5,
    ],
)
def test_a_bad_prompt_is_a_config_error(bad: object) -> None:
    llm, provider = client("x")
    with pytest.raises(ConfigError):
        llm.ask(bad)  # type: ignore[arg-type]
    assert provider.requests == []


def test_images_as_path_bytes_and_image_part(tmp_path: Path) -> None:
    photo = tmp_path / "cat.jpg"
    photo.write_bytes(JPEG)
    part = ImagePart(base64.b64encode(b"GIF89a....").decode(), "image/gif")
    llm, provider = client("a cat")
    llm.ask("What is this?", images=[str(photo), photo, PNG, part])
    images = provider.requests[0].messages[0].images
    assert [i.mime_type for i in images] == ["image/jpeg", "image/jpeg", "image/png", "image/gif"]
    assert base64.b64decode(images[0].data) == JPEG
    assert images[3] is part


def test_an_image_data_url_is_accepted() -> None:
    url = "data:image/webp;base64," + base64.b64encode(b"RIFF0000WEBPVP8 ").decode()
    llm, provider = client("ok")
    llm.ask("look", images=[url])
    assert provider.requests[0].messages[0].images[0].mime_type == "image/webp"


@pytest.mark.parametrize(
    "bad", ["/no/such/file.png", "https://example.com/cat.png", 42, b"", "data:image/png,xyz"]
)
def test_a_bad_image_is_a_config_error(bad: object) -> None:
    llm, provider = client("x")
    with pytest.raises(ConfigError):
        llm.ask("look", images=[bad])
    assert provider.requests == []


def test_images_need_a_user_message_last() -> None:
    llm, _ = client("x")
    with pytest.raises(ConfigError, match="images"):
        llm.ask(
            [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}], images=[PNG]
        )


def test_tools_of_every_shape_are_offered() -> None:
    @tool
    def decorated(city: str) -> str:
        """Decorated."""
        return city

    def plain(n: int) -> int:
        """Plain."""
        return n

    as_dict = {"type": "function", "function": {"name": "remote", "parameters": {"type": "object"}}}
    schema = ToolSchema("other", "Other.", {"type": "object"})
    llm, provider = client("x")
    llm.run("hi", tools=[decorated, plain, as_dict, schema])
    assert provider.requests[0].tools is not None
    names = [t.name for t in provider.requests[0].tools]
    assert names == ["decorated", "plain", "remote", "other"]


@pytest.mark.parametrize(
    "bad",
    [
        [42],
        [{"type": "function", "function": {"description": "no name"}}],
        [{"type": "function", "function": {"name": "x", "parameters": "nope"}}],
        "add",
    ],
)
def test_a_bad_tool_is_a_config_error(bad: object) -> None:
    llm, provider = client("x")
    with pytest.raises(ConfigError):
        llm.run("hi", tools=bad)
    assert provider.requests == []


def test_two_tools_with_one_name_are_a_config_error() -> None:
    def lookup(q: str) -> str:
        return q

    same = {"type": "function", "function": {"name": "lookup"}}
    llm, _ = client("x")
    with pytest.raises(ConfigError, match="lookup"):
        llm.run("hi", tools=[lookup, same])
