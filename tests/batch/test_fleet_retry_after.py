"""A fleet routes its members' retryable failures: a sick server's ``Retry-After`` rests that
server while the request goes to a healthy one at once; members built from the configuration
do not retry on their own; a fleet with no other server waits the ``Retry-After`` out itself,
within the call's deadline. Real loopback servers; time bounds only detect a hang."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest
from support.batch_support import read_output, write_prompts
from support.cli_support import run
from support.fault_server import openai_events, sequence, status
from support.transport_support import LoopbackServer, Request, respond, serve, stream_script

import ollm_lite
from ollm_lite.errors import HTTPStatusError
from ollm_lite.fleet import Fleet
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.types import Message, ProviderRequest

CHAT = "/v1/chat/completions"
SICK = {"error": {"message": "overloaded"}}


def _answer(client: socket.socket, req: Request) -> None:
    prompt = json.loads(req.body)["messages"][-1]["content"]
    message = {"role": "assistant", "content": f"ok: {prompt}"}
    body = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
    respond(client, 200, json.dumps(body).encode())


_answer.keep_alive = True  # type: ignore[attr-defined]


def _unavailable(seconds: int) -> dict[str, object]:
    return {CHAT: status(503, SICK, headers={"Retry-After": str(seconds)})}


def _chats(server: LoopbackServer) -> list[Request]:
    return [r for r in server.requests if r.path == CHAT]


def _member(url: str) -> OpenAICompatibleProvider:
    return OpenAICompatibleProvider(base_url=url, backend="generic", retries=0)


def _ask(text: str, timeout: float | None = None) -> ProviderRequest:
    return ProviderRequest(model="m", messages=[Message.user(text)], timeout=timeout)


def test_a_503_carries_its_retry_after() -> None:
    """A 503's ``Retry-After`` is on the error (``details["retry_after"]``), as a 429's is."""
    with serve(_unavailable(30)) as sick:
        member = _member(sick.url)
        with pytest.raises(HTTPStatusError) as caught:
            member.chat(_ask("hi"))
        member.close()
    assert caught.value.status == 503
    assert caught.value.details["retry_after"] == 30


def test_a_503_retry_after_rests_that_server_for_as_long() -> None:
    """The request moves to the healthy server at once; the sick one is kept out for the 30 s
    it asked for (not the fleet's own 1 s backoff), so later requests never reach it."""
    with serve(_unavailable(30)) as sick, serve({CHAT: _answer}) as good:
        fleet = Fleet([_member(sick.url), _member(good.url)], per_host=1)
        try:
            replies = [fleet.chat(_ask(f"q{i}")).content for i in range(3)]
            rested, other = fleet.status()
        finally:
            fleet.close()
    assert replies == ["ok: q0", "ok: q1", "ok: q2"]
    assert len(_chats(sick)) == 1
    assert 20 < rested.resting_for <= 30 and not rested.up
    assert other.up and other.served == 3


def test_members_built_from_the_configuration_fail_fast() -> None:
    """``connect(hosts=...)``: a member answering 503 is asked once per request, not three
    times (its own retries would cost the batch their backoff before the fleet moves on)."""
    streamed = stream_script(openai_events(["ok"]), keep_alive=True)
    with serve({CHAT: status(503, SICK)}) as sick, serve({CHAT: streamed}) as good:
        with ollm_lite.connect(
            "openai-compatible", hosts=[sick.url, good.url], model="m", per_host=1
        ) as llm:
            assert [llm.ask(f"q{i}") for i in range(2)] == ["ok", "ok"]
    assert len(_chats(sick)) <= 1


def test_batch_run_hosts_fail_fast_and_route_around_retry_after(tmp_path: Path) -> None:
    """``batch run --host A --host B`` with A answering 503 ``Retry-After: 30``: every line is
    answered by B and A is asked once (before: A's own retries waited out the 30 s twice)."""
    with serve(_unavailable(30)) as sick, serve({CHAT: _answer}) as good:
        inp = write_prompts(tmp_path / "in.jsonl", [f"p{i}" for i in range(4)])
        out = tmp_path / "out.jsonl"
        args = ["--provider", "openai-compatible", "--model", "m", "batch", "run", str(inp)]
        result = run(
            tmp_path, *args, "-o", str(out), "--per-host", "1", "--host", sick.url,
            "--host", good.url,
        )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert len(_chats(sick)) == 1
    assert all(line["error"] is None for line in read_output(out))


def test_a_fleet_of_one_waits_out_retry_after_itself() -> None:
    """With no other server, the fleet waits the ``Retry-After`` the server asked for before
    asking it again (not its own shorter backoff), then answers."""
    first: list[float] = []

    def sick(client: socket.socket, req: Request) -> None:
        first.append(time.monotonic())
        status(503, SICK, headers={"Retry-After": "2"})(client, req)

    def then_ok(client: socket.socket, req: Request) -> None:
        first.append(time.monotonic())
        _answer(client, req)

    with serve({CHAT: sequence(sick, then_ok)}) as only:
        fleet = Fleet([_member(only.url)], per_host=1)
        try:
            assert fleet.chat(_ask("hi")).content == "ok: hi"
        finally:
            fleet.close()
    assert len(first) == 2
    assert first[1] - first[0] >= 1.9  # a lower bound: a busy machine only makes it later


def test_a_fleet_of_one_gives_up_when_retry_after_ends_past_the_deadline() -> None:
    """A ``Retry-After`` longer than the call has left: the server's error at once (not a
    30 s wait), the server asked once."""
    with serve(_unavailable(30)) as only:
        with ollm_lite.connect("openai-compatible", hosts=[only.url], model="m", per_host=1) as llm:
            started = time.monotonic()
            with pytest.raises(HTTPStatusError) as caught:
                llm.ask("hi", timeout=2)
            seconds = time.monotonic() - started
    assert caught.value.details["retry_after"] == 30
    assert len(_chats(only)) == 1
    assert seconds < 25  # a hang detector: waiting out the 30 s would exceed it
