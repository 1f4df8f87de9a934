"""Images for a model the server says cannot read them: ``UnsupportedOperation``, nothing sent.

llama.cpp's ``GET /props`` gives ``modalities.vision`` (llama.cpp tools/server README, "GET
/props"); Ollama's ``POST /api/show`` lists ``capabilities`` (``"vision"`` among them for a
model that reads images; Ollama API docs, "Show Model Information"). Where the server does not
say, the request goes out (and the answer limit ends it).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import responses

import ollm_lite
from ollm_lite import ErrorEvent, UnsupportedOperation

RSPS_STRICT = False
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 8
LLAMA = "http://llama.test:8080"
OLLAMA = "http://ollama.test:11434"
_CHUNK = {
    "id": "c1",
    "object": "chat.completion.chunk",
    "choices": [{"index": 0, "delta": {"content": "a cat"}, "finish_reason": "stop"}],
}
#: A streamed answer (OpenAI's chat completions stream: ``data:`` lines, then ``[DONE]``).
ANSWER = f"data: {json.dumps(_CHUNK)}\n\ndata: [DONE]\n\n"


def _props(vision: bool | None) -> dict[str, Any]:
    props: dict[str, Any] = {"default_generation_settings": {"n_ctx": 4096}, "total_slots": 1}
    if vision is not None:
        props["modalities"] = {"vision": vision}
    return props


def _chats(rsps: responses.RequestsMock, path: str) -> int:
    return sum(call.request.url.endswith(path) for call in rsps.calls)


def test_llamacpp_without_vision_refuses_an_image_before_sending(
    rsps: responses.RequestsMock,
) -> None:
    rsps.add(responses.GET, LLAMA + "/props", json=_props(False))
    rsps.add(
        responses.POST,
        LLAMA + "/v1/chat/completions",
        body=ANSWER,
        content_type="text/event-stream",
    )
    llm = ollm_lite.connect("llamacpp", host=LLAMA, model="smollm2-135m")
    with pytest.raises(UnsupportedOperation) as caught:
        llm.ask("What is in this picture?", images=[PNG])
    assert caught.value.code == "UNSUPPORTED_OPERATION"
    assert "smollm2-135m" in caught.value.message and "images" in caught.value.message
    assert _chats(rsps, "/v1/chat/completions") == 0
    assert llm.ask("And without a picture?") == "a cat"  # text still goes


@pytest.mark.parametrize("vision", [True, None], ids=["vision", "unknown"])
def test_llamacpp_with_vision_or_unknown_sends_the_image(
    rsps: responses.RequestsMock, vision: bool | None
) -> None:
    rsps.add(responses.GET, LLAMA + "/props", json=_props(vision))
    rsps.add(
        responses.POST,
        LLAMA + "/v1/chat/completions",
        body=ANSWER,
        content_type="text/event-stream",
    )
    llm = ollm_lite.connect("llamacpp", host=LLAMA, model="m")
    assert llm.ask("What is in this picture?", images=[PNG]) == "a cat"
    assert _chats(rsps, "/v1/chat/completions") == 1


def test_ollama_without_vision_refuses_an_image_before_sending(
    rsps: responses.RequestsMock,
) -> None:
    rsps.add(
        responses.POST,
        OLLAMA + "/api/show",
        json={"capabilities": ["completion", "tools"], "model_info": {}},
    )
    llm = ollm_lite.connect("local", host=OLLAMA, model="llama3.2")
    events = list(llm.events("What is in this picture?", images=[PNG]))
    assert isinstance(events[0], ErrorEvent)
    assert events[0].error.code == "UNSUPPORTED_OPERATION"
    with pytest.raises(UnsupportedOperation):
        llm.ask("What is in this picture?", images=[PNG])
    assert _chats(rsps, "/api/chat") == 0
