"""The fleet against real loopback HTTP servers: routing, limits, ejection, Retry-After,
and no replay once an answer started streaming."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.batch_support import client_for, read_output, write_prompts
from support.fault_server import refused_url, status
from support.transport_support import (
    LoopbackServer,
    Request,
    Script,
    chunked_head,
    respond,
    send_chunk,
    serve,
    silent,
)

from ollm_lite.batch import run_batch
from ollm_lite.errors import Cancelled, ConfigError, ConnectionFailed
from ollm_lite.fleet import Fleet
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import ErrorEvent, FinishEvent, Message, ProviderRequest, TextEvent

CHAT = "/v1/chat/completions"


def answer(text: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
        }
    ).encode()


def chat_script(name: str, gate: threading.Event | None = None) -> Script:
    """Answers ``<name>: <prompt>``, after ``gate`` when given."""

    def script(client: socket.socket, req: Request) -> None:
        if gate is not None:
            while not gate.wait(0.01):
                if req.stop.is_set():
                    return
        prompt = json.loads(req.body)["messages"][-1]["content"]
        respond(client, 200, answer(f"{name}: {prompt}"))

    script.keep_alive = True  # type: ignore[attr-defined]
    return script


def provider(url: str, backend: str = "generic") -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(base_url=url, backend=backend, retries=0, timeout=30)


def ask(text: str) -> ProviderRequest:
    return ProviderRequest(model="m", messages=[Message.user(text)])


def chats(server: LoopbackServer) -> list[Request]:
    return [r for r in server.requests if r.path == CHAT]


@pytest.fixture
def fleet_closer() -> Iterator[list[Fleet]]:
    made: list[Fleet] = []
    yield made
    for fleet in made:
        fleet.close()


def test_requests_go_to_the_endpoint_with_fewest_in_flight(fleet_closer: list[Fleet]) -> None:
    """Four held requests over two endpoints of limit 2: two each; a fifth waits for a slot."""
    gate = threading.Event()
    with serve({CHAT: chat_script("a", gate)}) as a, serve({CHAT: chat_script("b", gate)}) as b:
        fleet = Fleet([provider(a.url), provider(b.url)], per_host=2)
        fleet_closer.append(fleet)
        results: list[str] = []
        threads = [
            threading.Thread(
                target=lambda i=i: results.append(fleet.chat(ask(f"q{i}")).content or "")
            )
            for i in range(5)
        ]
        for t in threads:
            t.start()
        _wait(lambda: len(chats(a)) + len(chats(b)) >= 4)
        assert (len(chats(a)), len(chats(b))) == (2, 2)
        assert sum(s.in_flight for s in fleet.status()) == 4
        assert fleet.capacity == 4
        assert fleet.list_models() == []  # metadata does not queue behind full slots
        gate.set()
        for t in threads:
            t.join(30)
        assert len(results) == 5
        assert len(chats(a)) + len(chats(b)) == 5


def test_a_refused_endpoint_is_ejected_and_its_request_moves(fleet_closer: list[Fleet]) -> None:
    with serve({CHAT: chat_script("b")}) as b:
        with refused_url() as dead:
            fleet = Fleet([provider(dead), provider(b.url)], per_host=1)
            fleet_closer.append(fleet)
            replies = [fleet.chat(ask(f"q{i}")).content for i in range(3)]
            assert replies == ["b: q0", "b: q1", "b: q2"]
            down, up = fleet.status()
            assert not down.up and down.failures == 1 and down.resting_for > 0
            assert up.up and up.served == 3
            assert fleet.health_note() == "hosts 1/2 up"


def test_a_5xx_endpoint_is_ejected_and_the_request_answered_elsewhere(
    fleet_closer: list[Fleet], caplog: pytest.LogCaptureFixture
) -> None:
    broken = {CHAT: status(503, {"error": {"message": "loading model"}})}
    with serve(broken) as a, serve({CHAT: chat_script("b")}) as b:
        fleet = Fleet([provider(a.url), provider(b.url)], per_host=1)
        fleet_closer.append(fleet)
        with caplog.at_level("WARNING", logger="ollm_lite.fleet"):
            assert fleet.chat(ask("hello")).content == "b: hello"
            assert fleet.chat(ask("again")).content == "b: again"
        assert len(chats(a)) == 1  # resting: not asked a second time
        assert any("ejected" in r.getMessage() and a.url in r.getMessage() for r in caplog.records)


def test_retry_after_rests_only_that_endpoint(fleet_closer: list[Fleet]) -> None:
    limited = {
        CHAT: status(429, {"error": {"message": "slow down"}}, headers={"Retry-After": "40"})
    }
    with serve(limited) as a, serve({CHAT: chat_script("b")}) as b:
        fleet = Fleet([provider(a.url), provider(b.url)], per_host=1)
        fleet_closer.append(fleet)
        assert [fleet.chat(ask(f"q{i}")).content for i in range(3)] == ["b: q0", "b: q1", "b: q2"]
        rested, other = fleet.status()
        assert 30 < rested.resting_for <= 40 and rested.failures == 0
        assert other.up
        assert len(chats(a)) == 1


def test_an_answer_that_started_streaming_is_never_replayed(fleet_closer: list[Fleet]) -> None:
    """A stream cut after its first words ends with an error; the other endpoint never sees it."""

    def cut(client: socket.socket, req: Request) -> None:
        chunked_head(client)
        delta = {"choices": [{"index": 0, "delta": {"content": "partial "}}]}
        send_chunk(client, b"data: " + json.dumps(delta).encode() + b"\n\n")
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        client.close()

    with serve({CHAT: cut}) as a, serve({CHAT: chat_script("b")}) as b:
        fleet = Fleet([provider(a.url), provider(b.url)], per_host=1)
        fleet_closer.append(fleet)
        events = list(fleet.chat_stream(ask("hi")))
        assert isinstance(events[0], TextEvent) and events[0].value == "partial "
        assert isinstance(events[-1], ErrorEvent)
        assert chats(b) == []


def test_a_stream_that_fails_before_any_event_moves(fleet_closer: list[Fleet]) -> None:
    with serve({CHAT: status(500, {"error": {"message": "oops"}})}) as a:
        with serve({CHAT: _sse_script("b")}) as b:
            fleet = Fleet([provider(a.url), provider(b.url)], per_host=1)
            fleet_closer.append(fleet)
            events = list(fleet.chat_stream(ask("hi")))
            assert [e.value for e in events if isinstance(e, TextEvent)] == ["b says hi"]
            assert isinstance(events[-1], FinishEvent)


def _sse_script(name: str) -> Script:
    def script(client: socket.socket, req: Request) -> None:
        chunked_head(client)
        delta = {"choices": [{"index": 0, "delta": {"content": f"{name} says hi"}}]}
        done = {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        for obj in (delta, done):
            send_chunk(client, b"data: " + json.dumps(obj).encode() + b"\n\n")
        send_chunk(client, b"data: [DONE]\n\n")
        client.sendall(b"0\r\n\r\n")

    return script


def test_per_host_defaults_to_llamacpp_total_slots(fleet_closer: list[Fleet]) -> None:
    props = {"total_slots": 3, "default_generation_settings": {"n_ctx": 4096}}
    with serve({"/props": status(200, props), CHAT: chat_script("a")}) as a:
        with serve({CHAT: chat_script("b")}) as b:
            fleet = Fleet([provider(a.url, "llamacpp"), provider(b.url, "llamacpp")])
            fleet_closer.append(fleet)
            assert fleet.capacity == 3 + 4
            assert [s.limit for s in fleet.status()] == [3, 4]


def test_every_endpoint_down_raises_the_connection_error(fleet_closer: list[Fleet]) -> None:
    with refused_url() as dead:
        fleet = Fleet([provider(dead)], per_host=1, backoff=0.05)
        fleet_closer.append(fleet)
        with pytest.raises(ConnectionFailed):
            fleet.chat(ask("x"))
        assert fleet.status()[0].failures == fleet.max_attempts


def test_a_fleet_is_one_kind_of_provider() -> None:
    with pytest.raises(ConfigError, match="one kind"):
        Fleet([provider("http://127.0.0.1:1"), LocalProvider(base_url="http://127.0.0.1:2")])
    with pytest.raises(ConfigError):
        Fleet([])
    with pytest.raises(ConfigError):
        Fleet([provider("http://127.0.0.1:1")], per_host=0)


def test_a_batch_over_a_fleet_uses_every_endpoint(
    tmp_path: Path, fleet_closer: list[Fleet]
) -> None:
    with serve({CHAT: chat_script("a")}) as a, serve({CHAT: chat_script("b")}) as b:
        with refused_url() as dead:
            fleet = Fleet([provider(a.url), provider(dead), provider(b.url)], per_host=2)
            fleet_closer.append(fleet)
            inp = write_prompts(tmp_path / "in.jsonl", [f"p{i}" for i in range(30)])
            summary = run_batch(inp, tmp_path / "out.jsonl", client=client_for(fleet))
            assert summary.done == 30 and summary.failed == 0
            assert chats(a) and chats(b)
            assert len(read_output(tmp_path / "out.jsonl")) == 30


def _wait(condition: object, timeout: float = 30.0) -> None:
    import time

    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_the_chat_runtime_runs_over_a_fleet(fleet_closer: list[Fleet]) -> None:
    """A fleet is a provider like any other: plain chats fail over too."""
    from ollm_lite.chat import ChatClient
    from ollm_lite.types import ChatFinishEvent

    with serve({CHAT: _sse_script("b")}) as b, refused_url() as dead:
        fleet = Fleet([provider(dead), provider(b.url)], per_host=1)
        fleet_closer.append(fleet)
        events = list(ChatClient(fleet, model="m").chat("hello"))
        text = "".join(e.value for e in events if isinstance(e, TextEvent))
        assert text == "b says hi"
        assert isinstance(events[-1], ChatFinishEvent) and events[-1].reason == "complete"


def test_a_metadata_call_passes_the_callers_cancel_to_the_member(
    fleet_closer: list[Fleet],
) -> None:
    """The fleet hands ``cancel=`` on to the member's request: setting it ends a call that the
    server never answers (the member's 30 s timeout is far away)."""
    cancel = threading.Event()

    def silent_then_cancel(client: socket.socket, req: Request) -> None:
        cancel.set()  # set only once the request is on the server: a busy machine cannot race it
        silent(client, req)

    with serve({"/v1/models": silent_then_cancel}) as server:
        fleet = Fleet([provider(server.url)], per_host=1)
        fleet_closer.append(fleet)
        with pytest.raises(Cancelled):
            fleet.list_models(cancel=cancel)
        assert [r.path for r in server.requests] == ["/v1/models"]
