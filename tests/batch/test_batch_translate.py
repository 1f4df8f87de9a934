"""Batch bodies to provider requests, and answers back to OpenAI objects, per wire."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
from support.batch_support import chat_line, client_for, read_output, write_lines
from support.transport_support import Request, respond, serve

from ollm_lite.batch import run_batch
from ollm_lite.batch._format import BatchInput
from ollm_lite.batch._translate import BodyProblem, ChatJob, EmbedJob, chat_completion, job_for
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.types import ChatResult, ToolCall, Usage


def _job(body: dict[str, object], url: str = "/v1/chat/completions") -> ChatJob | EmbedJob:
    return job_for(BatchInput("id", url, body, 1), None)  # type: ignore[arg-type]


def test_the_chat_body_maps_onto_a_provider_request() -> None:
    job = _job(
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": "Be brief."},
                {"role": "user", "content": [{"type": "text", "text": "Hi"}]},
            ],
            "temperature": 0.2,
            "max_completion_tokens": 9,
            "stop": "END",
            "seed": 7,
            "tools": [
                {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
            ],
            "tool_choice": {"type": "function", "function": {"name": "f"}},
            "response_format": {
                "type": "json_schema",
                "json_schema": {"schema": {"type": "object"}},
            },
            "logprobs": True,
            "user": "dropped",
            "stream": False,
        }
    )
    assert isinstance(job, ChatJob)
    request = job.request
    assert [m.role for m in request.messages] == ["system", "user"]
    assert request.messages[1].text == "Hi"
    assert request.options.temperature == 0.2
    assert request.options.max_tokens == 9
    assert request.options.stop == ["END"]
    assert request.options.seed == 7
    assert request.tools is not None and request.tools[0].name == "f"
    assert request.tool_choice == {"name": "f"}
    assert request.response_format == {"type": "object"}
    assert request.options.extra_body == {"logprobs": True}


@pytest.mark.parametrize(
    "body",
    [
        {"model": "m", "messages": "hi"},
        {"model": "m", "messages": [{"role": "wizard", "content": "x"}]},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "n": 2},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": "hot"},
        {"model": "m", "messages": [{"role": "user", "content": "x"}], "response_format": {}},
        {"model": 3, "messages": [{"role": "user", "content": "x"}]},
    ],
)
def test_bodies_that_cannot_be_sent_are_problems(body: dict[str, object]) -> None:
    with pytest.raises(BodyProblem):
        _job(body)


def test_embeddings_bodies() -> None:
    job = _job({"model": "e", "input": "one"}, "/v1/embeddings")
    assert isinstance(job, EmbedJob) and job.texts == ["one"]
    with pytest.raises(BodyProblem):
        _job({"model": "e", "input": [1, 2]}, "/v1/embeddings")
    with pytest.raises(BodyProblem):
        _job({"model": "e", "input": "x", "dimensions": 3}, "/v1/embeddings")


def test_a_tool_call_answer_is_an_openai_message_with_tool_calls() -> None:
    result = ChatResult(
        content=None,
        finish_reason="tool_calls",
        tool_calls=[ToolCall("call_1", "f", {"a": 1}, '{"a": 1}')],
        usage=Usage(1, 2, 3),
        thinking="hmm",
    )
    body = chat_completion(result, "m")
    message = body["choices"][0]["message"]
    assert message["tool_calls"] == [
        {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}
    ]
    assert message["content"] is None and message["reasoning_content"] == "hmm"
    assert body["choices"][0]["finish_reason"] == "tool_calls"


def test_an_ollama_answer_becomes_a_chat_completion(tmp_path: Path) -> None:
    """The Ollama wire (/api/chat) goes out, an OpenAI chat.completion comes back."""

    def chat(client: socket.socket, req: Request) -> None:
        sent = json.loads(req.body)
        text = sent["messages"][-1]["content"]
        answer = {
            "model": "llama3.2",
            "message": {"role": "assistant", "content": f"ollama says {text}"},
            "done": True,
            "done_reason": "stop",
            "prompt_eval_count": 4,
            "eval_count": 3,
        }
        respond(
            client, 200, json.dumps(answer).encode() + b"\n", content_type="application/x-ndjson"
        )

    with serve({"/api/chat": chat}) as srv:
        provider = LocalProvider(base_url=srv.url, retries=0)
        inp = write_lines(tmp_path / "in.jsonl", [chat_line("a", "hello", model="llama3.2")])
        summary = run_batch(inp, tmp_path / "out.jsonl", client=client_for(provider))
        provider.close()
        assert summary.done == 1
        assert srv.requests[0].path == "/api/chat"
    (line,) = read_output(tmp_path / "out.jsonl")
    body = line["response"]["body"]
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"]["content"] == "ollama says hello"
    assert body["usage"] == {"prompt_tokens": 4, "completion_tokens": 3, "total_tokens": 7}
