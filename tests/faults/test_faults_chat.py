"""Group 5 (tool calls) and the chat-runtime cases of groups 4 and 6, over real providers.

A ``ChatClient`` drives a real ``LocalProvider`` (NDJSON) or ``OpenAICompatibleProvider`` (SSE)
against a loopback server that answers each model turn in sequence. Every bad tool call —
unknown name, arguments that are not JSON or have the wrong types, a 5 MB argument, a tool that
raises, never returns or returns something JSON cannot hold, duplicate ids, a ReAct action for
a tool that was not offered — must come back to the model as a tool result (checked in the
next request the server receives), and the loop must go on or stop by its guards.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from support.fault_server import (
    NDJSON,
    SSE,
    Wire,
    chunks,
    oa_chunk,
    ollama_done,
    ollama_lines,
    openai_events,
    repeat_forever,
    sequence,
    sse_data,
)
from support.transport_support import LoopbackServer, Script, serve

from ollm_lite.chat import ChatClient
from ollm_lite.http.policy import Timeouts
from ollm_lite.tools import ToolRegistry, tool

Call = tuple[str, str, Any]
"""(id, name, arguments): a dict, or a str sent raw (SSE) / as a JSON string (NDJSON)."""


# --------------------------------------------------------------------------- model turns


def text_turn(wire: Wire, text: str) -> Script:
    parts = ollama_lines([text]) if wire.name == "ndjson" else openai_events([text])
    return chunks(parts, content_type=wire.content_type)


def tool_turn(wire: Wire, calls: Sequence[Call], text: str = "") -> Script:
    """One model turn making ``calls`` (Ollama: all in one line; OpenAI: fragments)."""
    if wire.name == "ndjson":
        wire_calls = [
            {"id": cid, "function": {"name": name, "arguments": args}} for cid, name, args in calls
        ]
        message = {"role": "assistant", "content": text, "tool_calls": wire_calls}
        line = json.dumps({"model": "m", "message": message, "done": False}).encode() + b"\n"
        return chunks([line, ollama_done()], content_type=wire.content_type)
    parts = [sse_data(oa_chunk({"role": "assistant", "content": text or None}))]
    for index, (cid, name, args) in enumerate(calls):
        raw = args if isinstance(args, str) else json.dumps(args)
        head = {"index": index, "id": cid, "type": "function"}
        parts.append(sse_data(oa_chunk({"tool_calls": [{**head, "function": {"name": name}}]})))
        for i in range(0, len(raw), 65536):
            frag = {"index": index, "function": {"arguments": raw[i : i + 65536]}}
            parts.append(sse_data(oa_chunk({"tool_calls": [frag]})))
    parts += [sse_data(oa_chunk({}, "tool_calls")), b"data: [DONE]\n\n"]
    return chunks(parts, content_type=wire.content_type)


def sent_messages(server: LoopbackServer, wire: Wire, index: int) -> list[dict[str, Any]]:
    """The ``messages`` of the ``index``-th chat request the server received."""
    bodies = [json.loads(r.body) for r in server.requests if r.path == wire.path]
    messages: list[dict[str, Any]] = bodies[index]["messages"]
    return messages


def tool_messages(server: LoopbackServer, wire: Wire, index: int) -> list[dict[str, Any]]:
    """The tool results sent back in request ``index``, content decoded."""
    out = []
    for m in sent_messages(server, wire, index):
        if m["role"] == "tool":
            out.append({**m, "content": json.loads(m["content"])})
    return out


def run_chat(
    wire: Wire,
    turns: Sequence[Script],
    tools: Sequence[Any],
    *,
    cancel: threading.Event | None = None,
    tool_timeout: float | None = None,
    tool_mode: str = "native",
    max_turns: int = 6,
) -> tuple[list[Any], LoopbackServer]:
    """Chat once through ``wire``'s provider; return the events and the (closed) server."""
    with serve({wire.path: sequence(*turns)}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=5.0))
        client = ChatClient(
            provider,
            tools=ToolRegistry(list(tools)),
            model="m",
            max_turns=max_turns,
            tool_timeout=tool_timeout,
            context_limits={"m": 100_000_000},
        )
        events = list(
            client.chat("go", cancel=cancel, tool_mode=tool_mode)  # type: ignore[arg-type]
        )
        provider.close()
    return events, server


def finish(events: list[Any]) -> str:
    ends = [e for e in events if e.type == "chat_finish"]
    assert len(ends) == 1 and ends[0] is events[-1], events[-3:]
    reason: str = ends[0].reason
    return reason


def results(events: list[Any]) -> list[Any]:
    return [e.result for e in events if e.type == "tool_call_result"]


# --------------------------------------------------------------------------- tools


@tool
def get_weather(city: str, days: int = 1) -> dict[str, Any]:
    """Weather for a city.

    Args:
        city: City name.
        days: How many days.
    """
    return {"city": city, "days": days, "sky": "clear"}


@tool
def measure(blob: str) -> int:
    """Length of a text.

    Args:
        blob: Any text.
    """
    return len(blob)


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("the weather station is on fire")


@tool
def opaque() -> object:
    """Returns something JSON cannot hold."""
    return {1, 2, 3}.__iter__()


RELEASE = threading.Event()


@tool
def stuck() -> str:
    """Never returns (until the test releases it)."""
    RELEASE.wait(30)
    return "late"


@tool
def slow(cancel: threading.Event) -> str:
    """Runs until cancelled."""
    cancel.wait(30)
    return "stopped"


TOOLS = [get_weather, measure, explode, opaque, stuck, slow]


# --------------------------------------------------------------------------- group 5


def test_unknown_tool_name(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A call to a tool that does not exist: TOOL_NOT_FOUND sent back; the loop goes on."""
    events, server = run_chat(
        wire,
        [tool_turn(wire, [("c1", "launch_missiles", {"target": "moon"})]), text_turn(wire, "ok")],
        TOOLS,
    )
    assert finish(events) == "complete"
    assert [r.error.code for r in results(events)] == ["TOOL_NOT_FOUND"]
    sent = tool_messages(server, wire, 1)
    assert len(sent) == 1 and sent[0]["content"]["error"]["code"] == "TOOL_NOT_FOUND"
    no_leaks()


def test_arguments_not_json(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Arguments that are not JSON: TOOL_INVALID_ARGUMENTS sent back; the loop goes on."""
    events, server = run_chat(
        wire,
        [tool_turn(wire, [("c1", "get_weather", "{city: Oslo,")]), text_turn(wire, "sorry")],
        TOOLS,
    )
    assert finish(events) == "complete"
    assert [r.error.code for r in results(events)] == ["TOOL_INVALID_ARGUMENTS"]
    assert tool_messages(server, wire, 1)[0]["content"]["ok"] is False
    no_leaks()


def test_arguments_of_the_wrong_type(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """JSON arguments of the wrong types or missing: TOOL_INVALID_ARGUMENTS for each."""
    calls: list[Call] = [
        ("c1", "get_weather", {"city": 42}),
        ("c2", "get_weather", {"days": "three"}),
        ("c3", "get_weather", ["Oslo"]),
    ]
    events, server = run_chat(wire, [tool_turn(wire, calls), text_turn(wire, "ok")], TOOLS)
    assert finish(events) == "complete"
    codes = [r.error.code for r in results(events)]
    assert codes == ["TOOL_INVALID_ARGUMENTS"] * 3
    assert len(tool_messages(server, wire, 1)) == 3
    no_leaks()


def test_five_megabyte_argument(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A 5 MB argument reaches the tool intact; its result goes back; the loop goes on."""
    blob = "ab" * (5 * 1024 * 1024 // 2)
    events, server = run_chat(
        wire, [tool_turn(wire, [("c1", "measure", {"blob": blob})]), text_turn(wire, "big")], TOOLS
    )
    assert finish(events) == "complete"
    (result,) = results(events)
    assert result.ok and result.data == len(blob)
    assert tool_messages(server, wire, 1)[0]["content"] == {"ok": True, "data": len(blob)}
    no_leaks()


def test_tool_that_raises(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A tool that raises: TOOL_EXECUTION_FAILED with its message, sent back."""
    events, server = run_chat(
        wire, [tool_turn(wire, [("c1", "explode", {})]), text_turn(wire, "oh no")], TOOLS
    )
    assert finish(events) == "complete"
    (result,) = results(events)
    assert result.error.code == "TOOL_EXECUTION_FAILED"
    assert "on fire" in result.error.message
    assert "on fire" in tool_messages(server, wire, 1)[0]["content"]["error"]["message"]
    no_leaks()


def test_tool_that_never_returns(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Past the per-tool timeout: TOOL_TIMEOUT sent back and the loop goes on at once."""
    RELEASE.clear()
    started = time.monotonic()
    try:
        events, server = run_chat(
            wire,
            [tool_turn(wire, [("c1", "stuck", {})]), text_turn(wire, "gave up")],
            TOOLS,
            tool_timeout=0.3,
        )
        elapsed = time.monotonic() - started
    finally:
        RELEASE.set()  # let the abandoned daemon thread finish before the leak check
    assert finish(events) == "complete"
    assert [r.error.code for r in results(events)] == ["TOOL_TIMEOUT"]
    assert tool_messages(server, wire, 1)[0]["content"]["error"]["code"] == "TOOL_TIMEOUT"
    assert elapsed < 3.0
    no_leaks()


def test_tool_result_not_json_serialisable(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A return value JSON cannot hold: an error result, and the request still goes out."""
    events, server = run_chat(
        wire, [tool_turn(wire, [("c1", "opaque", {})]), text_turn(wire, "hm")], TOOLS
    )
    assert finish(events) == "complete"
    (result,) = results(events)
    assert result.error.code == "TOOL_RESULT_INVALID"
    assert tool_messages(server, wire, 1)[0]["content"]["ok"] is False
    no_leaks()


def test_two_calls_with_the_same_id(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Duplicate ids: both calls run, and each result goes back under an id of its own
    matching its call."""
    calls: list[Call] = [
        ("dup", "get_weather", {"city": "Oslo"}),
        ("dup", "get_weather", {"city": "Rome"}),
    ]
    events, server = run_chat(wire, [tool_turn(wire, calls), text_turn(wire, "both")], TOOLS)
    assert finish(events) == "complete"
    assert [r.data["city"] for r in results(events)] == ["Oslo", "Rome"]
    messages = sent_messages(server, wire, 1)
    assistant = next(m for m in messages if m["role"] == "assistant" and m.get("tool_calls"))
    call_ids = [c.get("id") for c in assistant["tool_calls"]]
    tools_sent = [m for m in messages if m["role"] == "tool"]
    assert len(tools_sent) == 2
    if wire.name == "sse":  # OpenAI pairs results to calls by id: they must be unique
        assert len(set(call_ids)) == 2
        assert [m["tool_call_id"] for m in tools_sent] == call_ids
    assert [json.loads(m["content"])["data"]["city"] for m in tools_sent] == ["Oslo", "Rome"]
    no_leaks()


def test_same_failing_call_three_times_is_a_loop(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """The model repeating one failing call: ``loop_detected`` after the third failure."""
    bad = tool_turn(wire, [("c1", "explode", {})])
    events, server = run_chat(wire, [bad, bad, bad, text_turn(wire, "never")], TOOLS)
    assert finish(events) == "loop_detected"
    assert len([r for r in results(events) if not r.ok]) == 3
    assert len([r for r in server.requests if r.path == wire.path]) == 3
    no_leaks()


def test_max_turns_guard(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A model that calls tools forever (successfully) stops at ``max_turns``."""
    turn = tool_turn(wire, [("c1", "get_weather", {"city": "Oslo"})])
    events, server = run_chat(wire, [turn], TOOLS, max_turns=3)
    assert finish(events) == "max_turns"
    assert len([r for r in server.requests if r.path == wire.path]) == 3
    no_leaks()


def test_react_action_for_a_tool_not_offered(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """ReAct mode: ``Action:`` naming a tool that was not offered becomes an observation
    the model reads in the next request; then its final answer completes the chat."""
    first = 'Thought: I should look.\nAction: launch_missiles\nAction Input: {"target": 1}\n'
    events, server = run_chat(
        wire,
        [text_turn(wire, first), text_turn(wire, "Final Answer: I cannot do that.")],
        TOOLS,
        tool_mode="react",
    )
    assert finish(events) == "complete"
    assert [r.error.code for r in results(events)] == ["TOOL_NOT_FOUND"]
    followup = json.dumps(sent_messages(server, wire, 1))
    assert "launch_missiles" in followup and "TOOL_NOT_FOUND" in followup
    no_leaks()


# --------------------------------------------------------------------------- groups 4 and 6


def test_provider_error_mid_turn_ends_the_chat_once(
    wire: Wire, no_leaks: Callable[..., None]
) -> None:
    """A stream reset after some text: the text reaches the caller, one ErrorEvent, then
    ``ChatFinishEvent("error")`` — never a hang, never two finishes."""
    if wire.name == "ndjson":
        parts = ollama_lines(["partial"], done=False)
    else:
        parts = [sse_data(oa_chunk({"content": "partial"}))]
    broken = chunks(parts, then="reset", content_type=wire.content_type)
    events, _server = run_chat(wire, [broken], TOOLS)
    assert finish(events) == "error"
    assert "".join(e.value for e in events if e.type == "text") == "partial"
    assert len([e for e in events if e.type == "error"]) == 1
    no_leaks()


def test_cancel_during_tool_execution(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Cancel while a tool runs: the chat ends ``cancelled`` within 0.5 s; the tool got the
    event; no second request is sent."""
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    started = time.monotonic()
    events, server = run_chat(
        wire, [tool_turn(wire, [("c1", "slow", {})]), text_turn(wire, "no")], TOOLS, cancel=cancel
    )
    latency = time.monotonic() - started - 0.3
    timer.join()
    assert finish(events) == "cancelled"
    assert latency < 0.5
    assert len([r for r in server.requests if r.path == wire.path]) == 1
    no_leaks()


def test_cancel_during_stuck_tool_does_not_wait_for_it(
    wire: Wire, no_leaks: Callable[..., None]
) -> None:
    """A tool that ignores the event: the chat still ends ``cancelled`` promptly (the tool's
    daemon thread is abandoned, then released here before the leak check)."""
    RELEASE.clear()
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    started = time.monotonic()
    try:
        events, _server = run_chat(
            wire,
            [tool_turn(wire, [("c1", "stuck", {})]), text_turn(wire, "no")],
            TOOLS,
            cancel=cancel,
        )
        latency = time.monotonic() - started - 0.3
    finally:
        timer.join()
        RELEASE.set()
    assert finish(events) == "cancelled"
    assert latency < 0.5
    no_leaks()


def test_cancel_while_the_model_streams(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Cancel mid-stream through the runtime: ``cancelled``, partial text delivered."""
    if wire.name == "ndjson":
        line = ollama_lines(["x"], done=False)[0]
    else:
        line = sse_data(oa_chunk({"content": "x"}))
    endless = repeat_forever(line, every=0.01, content_type=wire.content_type)
    cancel = threading.Event()
    timer = threading.Timer(0.3, cancel.set)
    timer.start()
    started = time.monotonic()
    events, _server = run_chat(wire, [endless], TOOLS, cancel=cancel)
    latency = time.monotonic() - started - 0.3
    timer.join()
    assert finish(events) == "cancelled"
    assert "x" in "".join(e.value for e in events if e.type == "text")
    assert latency < 0.5
    no_leaks()


@pytest.mark.parametrize("w", [NDJSON, SSE], ids=["ndjson", "sse"])
def test_history_after_a_failed_turn_is_whole(w: Wire, no_leaks: Callable[..., None]) -> None:
    """A conversation whose second turn fails keeps only whole exchanges: the next send
    works and its request has no dangling tool call."""
    good = tool_turn(w, [("c1", "get_weather", {"city": "Oslo"})])
    if w.name == "ndjson":
        broken = chunks(ollama_lines(["half"], done=False), then="reset")
    else:
        broken = chunks([sse_data(oa_chunk({"content": "half"}))], then="reset")
    with serve({w.path: sequence(good, broken, text_turn(w, "fine"))}) as server:
        provider = w.provider(server.url)
        client = ChatClient(
            provider, tools=ToolRegistry(TOOLS), model="m", context_limits={"m": 100_000_000}
        )
        conv = client.conversation()
        first = list(conv.send("weather?"))
        second = list(conv.send("again"))
        provider.close()
        last = sent_messages(server, w, 2)
    assert finish(first) == "error" and finish(second) == "complete"
    calls = {
        c.get("id") for m in last if m["role"] == "assistant" for c in m.get("tool_calls") or ()
    }
    answered = {m.get("tool_call_id") for m in last if m["role"] == "tool"}
    if w.name == "sse":
        assert calls <= answered
    else:
        assert len([m for m in last if m["role"] == "tool"]) == len(calls)
    no_leaks()


# ------------------------------------------------------------------ groups 1-3 via the runtime


def test_runtime_connection_refused(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """A closed port through ``ChatClient``: one CONNECTION_FAILED ErrorEvent, then
    ``ChatFinishEvent("error")``; the chat never raises."""
    from support.fault_server import refused_url

    with refused_url() as url:
        provider = wire.provider(url)
        client = ChatClient(provider, model="m", context_limits={"m": 1000})
        events = list(client.chat("hi"))
        provider.close()
    assert finish(events) == "error"
    (error,) = [e for e in events if e.type == "error"]
    assert error.error.code == "CONNECTION_FAILED"
    no_leaks()


def test_runtime_idle_timeout_keeps_partial_text(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Text, then only keep-alives: the runtime reports LLM_TIMEOUT after the idle limit
    and the text already streamed reached the caller."""
    first = (
        ollama_lines(["Hel", "lo"], done=False)
        if wire.name == "ndjson"
        else [
            sse_data(oa_chunk({"content": "Hel"})),
            sse_data(oa_chunk({"content": "lo"})),
        ]
    )
    ping = b"\n" if wire.name == "ndjson" else b": ping\n\n"
    script = repeat_forever(ping, every=0.01, first=first, content_type=wire.content_type)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url, timeout=Timeouts(connect=1.0, idle=0.3))
        client = ChatClient(provider, model="m", context_limits={"m": 1000})
        started = time.monotonic()
        events = list(client.chat("hi"))
        elapsed = time.monotonic() - started
        provider.close()
    assert finish(events) == "error"
    assert "".join(e.value for e in events if e.type == "text") == "Hello"
    assert [e.error.code for e in events if e.type == "error"] == ["LLM_TIMEOUT"]
    assert elapsed < 2.0
    no_leaks()


@pytest.mark.parametrize(
    ("code", "expected"), [(401, "LLM_AUTH_FAILED"), (429, "LLM_RATE_LIMITED")]
)
def test_runtime_status_errors(
    wire: Wire, code: int, expected: str, no_leaks: Callable[..., None]
) -> None:
    """A status error surfaces through the runtime with its code, once."""
    from support.fault_server import status

    with serve({wire.path: status(code, {"error": "nope"})}) as server:
        provider = wire.provider(server.url)
        client = ChatClient(provider, model="m", context_limits={"m": 1000})
        events = list(client.chat("hi"))
        provider.close()
    assert finish(events) == "error"
    assert [e.error.code for e in events if e.type == "error"] == [expected]
    no_leaks()


def test_runtime_split_utf8_and_crlf(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Framing faults (CRLF and UTF-8 split across reads) are invisible through the runtime."""
    from support.fault_server import segments

    words = ["Grüße", " 東京", " 🎉", " a\u2028b"]
    parts = ollama_lines(words) if wire.name == "ndjson" else openai_events(words, eol=b"\r\n")
    body = b"".join(parts)
    cuts = [i for i, b in enumerate(body) if 0x80 <= b < 0xC0 or body[i - 1 : i + 1] == b"\r\n"]
    pieces, last = [], 0
    for cut in cuts:
        pieces.append(body[last:cut])
        last = cut
    pieces.append(body[last:])
    script = segments(pieces, framing="chunked", content_type=wire.content_type, gap=0.001)
    with serve({wire.path: script}) as server:
        provider = wire.provider(server.url)
        client = ChatClient(provider, model="m", context_limits={"m": 1000})
        events = list(client.chat("hi"))
        provider.close()
    assert finish(events) == "complete"
    assert "".join(e.value for e in events if e.type == "text") == "".join(words)
    no_leaks()


def test_runtime_cancel_during_connect(wire: Wire, no_leaks: Callable[..., None]) -> None:
    """Cancel while the TCP handshake hangs: the chat ends ``cancelled`` within 0.5 s."""
    from support.fault_server import unanswered_connect

    cancel = threading.Event()
    with unanswered_connect() as url:
        provider = wire.provider(url, timeout=Timeouts(connect=10.0, idle=30.0))
        client = ChatClient(provider, model="m", context_limits={"m": 1000})
        timer = threading.Timer(0.2, cancel.set)
        timer.start()
        started = time.monotonic()
        events = list(client.chat("hi", cancel=cancel))
        latency = time.monotonic() - started - 0.2
        timer.join()
        provider.close()
    assert finish(events) == "cancelled"
    assert latency < 0.5
    no_leaks()
