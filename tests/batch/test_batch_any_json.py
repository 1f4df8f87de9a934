"""Any JSON as a batch line: a value of the wrong type anywhere in a body is refused by line
before any request (``BatchFileError``, the CLI's exit 2), never a foreign exception."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from support.batch_support import EchoBackend, chat_line, client_for, write_lines
from support.cli_support import assert_one_line_error, run
from support.strategies import json_of
from support.transport_support import serve

from ollm_lite.batch import BatchFileError, run_batch
from ollm_lite.batch._runner import load_jobs
from ollm_lite.batch._translate import ChatJob
from ollm_lite.errors import OllmError
from ollm_lite.providers import _gemini_wire, _ollama_wire, _openai_wire
from ollm_lite.providers.backends import OPENAI_COMPATIBLE_BACKENDS, backend_named

IMAGE = "data:image/png;base64,iVBORw0KGgo="

#: A body with every part the translation reads: messages with text and image parts and tool
#: calls, tools, tool_choice and response_format.
FULL_BODY: dict[str, Any] = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "Be brief."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in it?"},
                {"type": "image_url", "image_url": {"url": IMAGE}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "look", "arguments": '{"x": 1}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "a cat"},
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "look",
                "description": "Look closer.",
                "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}},
            },
        }
    ],
    "tool_choice": {"type": "function", "function": {"name": "look"}},
    "response_format": {"type": "json_schema", "json_schema": {"schema": {"type": "object"}}},
    "temperature": 0.5,
    "max_tokens": 9,
    "stop": ["END"],
}


def _positions(value: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``value`` (dict keys and list indexes)."""
    out = [path] if path else []
    if isinstance(value, dict):
        for key, item in value.items():
            out += _positions(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out += _positions(item, (*path, index))
    return out


POSITIONS = _positions(FULL_BODY)


def _replaced(body: dict[str, Any], path: tuple[Any, ...], new: Any) -> dict[str, Any]:
    out = copy.deepcopy(body)
    target: Any = out
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = new
    return out


json_values = json_of(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    max_leaves=6,
    dict_size=None,
)


BACKENDS = [backend_named(name) for name in OPENAI_COMPATIBLE_BACKENDS]


def _bodies(request: Any) -> list[Callable[[], Any]]:
    return [
        lambda: _ollama_wire.chat_body(request),
        lambda: _gemini_wire.request_body(request),
        *[functools.partial(_openai_wire.chat_body, request, backend) for backend in BACKENDS],
    ]


def _sendable_everywhere(job: ChatJob) -> None:
    """Every wire builds its body from the request, or refuses it with the library's error."""
    for build in _bodies(job.request):
        with contextlib.suppress(OllmError):
            json.dumps(build(), allow_nan=False)


def _line(custom_id: str, body: Any) -> dict[str, Any]:
    return {"custom_id": custom_id, "url": "/v1/chat/completions", "body": body}


def test_the_full_body_is_valid_and_sendable(tmp_path: Path) -> None:
    """The body the property breaks is itself accepted (so a refusal is the broken part's)."""
    inp = write_lines(tmp_path / "in.jsonl", [_line("a", FULL_BODY)])
    (job,) = load_jobs(str(inp), None)
    assert isinstance(job, ChatJob)
    _sendable_everywhere(job)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(POSITIONS), json_values)
def test_any_json_at_any_position_is_refused_by_line_or_sendable(
    path: tuple[Any, ...], value: Any
) -> None:
    """Any JSON value put at any position of a full chat body either makes a line that every
    wire can send, or a BatchFileError naming line 2, with nothing sent."""
    body = _replaced(FULL_BODY, path, value)
    lines = [chat_line("ok", "fine"), _line("x", body)]
    with tempfile.TemporaryDirectory() as tmp:
        inp = write_lines(Path(tmp) / "in.jsonl", lines)
        backend = EchoBackend()
        try:
            jobs = load_jobs(str(inp), None)
        except BatchFileError as exc:
            assert [p["line"] for p in exc.details["problems"]] == [2]
            with pytest.raises(BatchFileError):
                run_batch(inp, Path(tmp) / "out.jsonl", client=client_for(backend))
            assert backend.prompts == []
            assert not (Path(tmp) / "out.jsonl").exists()
            return
        for job in jobs:
            if isinstance(job, ChatJob):
                _sendable_everywhere(job)


WRONG_TYPES = [
    ("messages", 1, "content", 1, "image_url"),
    ("messages", 1, "content", 1, "image_url", "url"),
    ("messages", 2, "tool_calls"),
    ("messages", 2, "tool_calls", 0, "function"),
    ("response_format", "json_schema"),
    ("tool_choice", "function"),
]


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (WRONG_TYPES[0], "x"),
        (WRONG_TYPES[1], 5),
        (WRONG_TYPES[2], 5),
        (WRONG_TYPES[3], "x"),
        (WRONG_TYPES[4], "x"),
        (WRONG_TYPES[5], "x"),
    ],
)
def test_message_parts_of_the_wrong_type_are_refused_by_line(
    tmp_path: Path, path: tuple[Any, ...], value: Any
) -> None:
    """image_url "x", image_url.url 5, tool_calls 5, a tool call's function "x",
    response_format.json_schema "x", tool_choice.function "x": a BatchFileError naming the
    line, before any request."""
    body = _replaced(FULL_BODY, path, value)
    inp = write_lines(tmp_path / "in.jsonl", [chat_line("ok", "fine"), _line("x", body)])
    backend = EchoBackend()
    with pytest.raises(BatchFileError, match="line 2") as info:
        run_batch(inp, tmp_path / "out.jsonl", client=client_for(backend))
    assert [p["line"] for p in info.value.details["problems"]] == [2]
    assert backend.prompts == []


def test_the_cli_exits_2_on_a_message_part_of_the_wrong_type(tmp_path: Path) -> None:
    """``batch run`` refuses the file (exit 2, one error line naming the line), sends nothing."""
    body = _replaced(FULL_BODY, ("messages", 2, "tool_calls", 0, "function"), "x")
    inp = write_lines(tmp_path / "in.jsonl", [_line("x", body)])
    with serve({}) as srv:
        args = ["--provider", "openai-compatible", "--model", "m", "batch", "run", str(inp)]
        result = run(tmp_path, *args, "-o", str(tmp_path / "out.jsonl"), "--host", srv.url)
        assert srv.requests == []
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result.stderr, "CONFIG_INVALID")
    assert "line 1" in result.stderr and "tool_calls[0]" in result.stderr
