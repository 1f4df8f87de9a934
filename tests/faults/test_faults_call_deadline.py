"""Every request a call makes is inside the call's deadline (``timeout`` is the deadline of the
whole call: docs/reliability.md, "Deadline coverage").

A call makes requests before its chat: model discovery (``/api/tags``, ``/v1/models``), model
metadata (Ollama ``/api/show`` and ``/api/ps``, llama.cpp ``/props``), token counting (vLLM and
llama.cpp ``/tokenize``, llama.cpp ``input_tokens``), and during it, MCP tool calls. A loopback
server goes silent on one of them; the call must still end at its deadline with
``LLM_TIMEOUT`` (not at the 120 s idle limit). Time bounds here only detect a hang.
"""

from __future__ import annotations

import contextlib
import json
import socket
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from support.fault_server import ollama_lines, openai_events, sequence
from support.transport_support import LoopbackServer, Request, respond, serve, silent, stream_script

import ollm_lite
from ollm_lite import McpServer
from ollm_lite.errors import OllmError
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.types import FinishEvent, ToolCall, ToolCallEvent

#: The call's deadline: long enough for every answering route on a busy machine.
DEADLINE = 1.0
#: Far above the deadline and far below the 120 s idle limit: only a hang exceeds it.
HANG = 30.0

Script = Callable[[socket.socket, Request], None]


def _json(obj: Any) -> Script:
    body = json.dumps(obj).encode()

    def script(client: socket.socket, req: Request) -> None:
        respond(client, 200, body)

    return script


def _ollama_chat(client: socket.socket, req: Request) -> None:
    stream_script(ollama_lines(["ok"]))(client, req)


def _openai_chat(client: socket.socket, req: Request) -> None:
    stream_script(openai_events(["ok"]))(client, req)


#: Each backend's routes, answering as its server does (enough for the library to use them).
ROUTES: dict[str, dict[tuple[str, str], Script]] = {
    "local": {
        ("GET", "/api/tags"): _json({"models": [{"name": "m"}]}),
        ("POST", "/api/show"): _json(
            {"capabilities": ["completion"], "model_info": {"llama.context_length": 8192}}
        ),
        ("GET", "/api/ps"): _json({"models": []}),
        ("POST", "/api/chat"): _ollama_chat,
    },
    "vllm": {
        ("GET", "/v1/models"): _json({"data": [{"id": "m", "max_model_len": 8192}]}),
        ("POST", "/tokenize"): _json({"count": 3, "max_model_len": 8192, "tokens": [1, 2, 3]}),
        ("POST", "/v1/chat/completions"): _openai_chat,
    },
    "llamacpp": {
        ("GET", "/v1/models"): _json({"data": [{"id": "m"}]}),
        ("GET", "/props"): _json(
            {"total_slots": 1, "default_generation_settings": {"n_ctx": 8192}}
        ),
        ("POST", "/v1/chat/completions/input_tokens"): _json({"input_tokens": 3}),
        ("POST", "/tokenize"): _json({"tokens": [1, 2, 3]}),
        ("POST", "/v1/chat/completions"): _openai_chat,
    },
}


def _mcp(silent_method: str) -> Script:
    """A streamable HTTP MCP endpoint that never answers ``silent_method``."""

    def script(client: socket.socket, req: Request) -> None:
        if req.method != "POST":
            respond(client, 405, b"")
            return
        message = req.json
        method = message.get("method")
        if method == silent_method:
            silent(client, req)
            return
        if "id" not in message:  # a notification
            respond(client, 202, b"")
            return
        result: dict[str, Any] = {}
        if method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "web", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            result = {"content": [{"type": "text", "text": "echoed"}]}
        body = {"jsonrpc": "2.0", "id": message["id"], "result": result}
        respond(client, 200, json.dumps(body).encode())

    return script


def _provider_call(backend: str, model: str | None, how: str, url: str) -> str:
    if backend == "llamacpp-fleet":  # two members on one server: a fleet asks /props first
        hosts = [url, f"{url}/"]
        llm = ollm_lite.connect("llamacpp", hosts=hosts, model=model)
    else:
        llm = ollm_lite.connect(backend, host=url, model=model)
    with llm:
        if how == "stream":
            return "".join(llm.stream("hi", timeout=DEADLINE))
        return llm.ask("hi", timeout=DEADLINE)


def _outcome(run: Callable[[], object]) -> tuple[str, float]:
    """The code a call ended with (``"ok"`` when it answered) and the seconds it took."""
    started = time.monotonic()
    try:
        run()
    except OllmError as exc:
        return exc.code, time.monotonic() - started
    return "ok", time.monotonic() - started


@pytest.mark.parametrize(
    ("backend", "route"),
    [
        ("local", ("POST", "/api/show")),
        ("local", ("GET", "/api/tags")),
        ("vllm", ("POST", "/tokenize")),
        ("vllm", ("GET", "/v1/models")),
        ("llamacpp", ("GET", "/props")),
        ("llamacpp", ("GET", "/v1/models")),
        ("llamacpp", ("POST", "/v1/chat/completions/input_tokens")),
        ("llamacpp-fleet", ("GET", "/props")),
    ],
)
def test_a_look_up_before_the_chat_keeps_to_the_deadline(
    backend: str, route: tuple[str, str]
) -> None:
    """A server silent on a metadata, discovery or token-counting request: ``ask`` ends at
    its ``timeout`` with ``LLM_TIMEOUT``, and nothing is sent after the deadline."""
    routes = {**ROUTES[backend], route: silent}
    with serve(routes, keep_alive=True) as server:
        code, seconds = _outcome(lambda: _provider_call(backend, None, "ask", server.url))
        asked = [(r.method, r.path.split("?")[0]) for r in server.requests]
    assert route in asked, asked
    assert code == "LLM_TIMEOUT", code
    assert seconds < HANG
    assert asked[-1] == route  # the look-up was the last request: none after the deadline


@pytest.mark.parametrize(
    ("backend", "route"),
    [
        ("local", ("GET", "/api/tags")),
        ("local", ("POST", "/api/show")),
        ("vllm", ("GET", "/v1/models")),
        ("llamacpp", ("GET", "/props")),
        ("llamacpp", ("POST", "/v1/chat/completions")),
    ],
)
def test_a_call_past_its_deadline_names_the_timeout_it_was_given(
    backend: str, route: tuple[str, str]
) -> None:
    """Whichever request met the deadline, the error speaks of the call's ``timeout`` as the
    caller wrote it ("within its 1 s timeout"), not of the seconds that request had left."""
    with serve({**ROUTES[backend], route: silent}, keep_alive=True) as server:
        with pytest.raises(OllmError) as raised:
            _provider_call(backend, None, "ask", server.url)
    assert raised.value.code == "LLM_TIMEOUT"
    assert f"within its {DEADLINE:g} s timeout" in raised.value.message, raised.value.message
    assert raised.value.details == {"timeout": DEADLINE}


ROUTES["llamacpp-fleet"] = ROUTES["llamacpp"]
PROVIDER_CASES = [(backend, route) for backend, routes in ROUTES.items() for route in routes]


@contextlib.contextmanager
def _mcp_server(silent_method: str) -> Iterator[LoopbackServer]:
    with serve({("POST", "/mcp"): _mcp(silent_method), ("GET", "/mcp"): _mcp("")}) as server:
        yield server


def _mcp_call(silent_method: str) -> tuple[str, float]:
    """What a call that needs an MCP server ends with, the server silent on one method:
    start-up (``initialize``) within ``start_timeout``, ``tools/list`` within the server's
    ``timeout``, a tool call within the chat call's ``timeout``."""
    with _mcp_server(silent_method) as web:
        url = f"{web.url}/mcp"
        if silent_method == "initialize":
            return _outcome(lambda: McpServer.http(url, start_timeout=DEADLINE).close())
        if silent_method == "tools/list":

            def listing() -> None:
                with McpServer.http(url, timeout=DEADLINE) as server:
                    server.tools()

            return _outcome(listing)
        with McpServer.http(url, timeout=600) as server:
            call = ToolCall("c1", "echo", {}, "{}")
            model = ScriptedProvider([[ToolCallEvent(call), FinishEvent("tool")], "done"])
            with ollm_lite.connect(model, model="m") as llm:
                return _outcome(lambda: llm.run("go", tools=server.tools(), timeout=DEADLINE))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    case=st.one_of(
        st.tuples(
            st.sampled_from(PROVIDER_CASES),
            st.sampled_from([None, "m"]),
            st.sampled_from(["ask", "stream"]),
        ),
        st.sampled_from(["initialize", "tools/list", "tools/call"]),
    )
)
def test_every_request_of_a_call_is_inside_its_deadline(case: Any) -> None:
    """Whichever request the server goes silent on (discovery, metadata, token counting, the
    chat itself, MCP start-up, listing or a tool call), the call ends with ``LLM_TIMEOUT``
    when that request was made, and answers when it was not needed; never a hang."""
    if isinstance(case, str):
        code, seconds = _mcp_call(case)
        assert code == "LLM_TIMEOUT", (case, code)
        assert seconds < HANG
        return
    (backend, route), model, how = case
    with serve({**ROUTES[backend], route: silent}, keep_alive=True) as server:
        code, seconds = _outcome(lambda: _provider_call(backend, model, how, server.url))
        asked = [(r.method, r.path.split("?")[0]) for r in server.requests]
    assert seconds < HANG
    assert code == ("LLM_TIMEOUT" if route in asked else "ok"), (case, code, asked)


def test_a_look_up_cut_short_by_the_deadline_is_not_remembered() -> None:
    """``/api/show`` silent on the first call: that call times out, and the next call asks
    again (its window of 100 tokens then stops a long prompt) instead of keeping "unknown"
    and the default window for good."""
    small = _json({"capabilities": ["completion"], "model_info": {"llama.context_length": 100}})
    show = sequence(silent, small)
    with serve({**ROUTES["local"], ("POST", "/api/show"): show}, keep_alive=True) as server:
        with ollm_lite.connect("local", host=server.url, model="m") as llm:
            code, _ = _outcome(lambda: llm.ask("hi", timeout=DEADLINE))
            assert code == "LLM_TIMEOUT"
            code, _ = _outcome(lambda: llm.ask("word " * 400, timeout=HANG))
    assert code == "TOKEN_LIMIT_EXCEEDED"
