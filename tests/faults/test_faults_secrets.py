"""Group 7: an API key canary never leaks.

The canary is given to every HTTP provider through the constructor and through the
environment, then each provider meets a range of faults whose error bodies *echo the key back*
(as proxies and some servers do). The key must not appear in any event, exception text or
details, ``repr`` of any object, any log record at DEBUG (every logger, urllib3's included), or
any request sent to a different host after a redirect. (Config file and CLI: see
``test_faults_cli_secrets.py``.)
"""

from __future__ import annotations

import pickle
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.fault_server import (
    CANARY,
    NDJSON,
    SSE,
    Wire,
    chunks,
    oa_chunk,
    ollama_lines,
    openai_events,
    redirect,
    refused_url,
    reset_without_answer,
    sse_data,
    status,
)
from support.log_records import Records, captured_records
from support.transport_support import Script, serve, silent

from ollm_lite.errors import OllmError
from ollm_lite.http.policy import Timeouts
from ollm_lite.types import Message, ProviderRequest

ENV = {"ndjson": "OLLAMA_API_KEY", "sse": "OPENAI_COMPATIBLE_API_KEY"}


def req(**kw: object) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)  # type: ignore[arg-type]


@pytest.fixture
def records() -> Iterator[Records]:
    with captured_records() as handler:
        yield handler


def echo_error(wire: Wire) -> dict[str, Any]:
    text = f"invalid request from key {CANARY} (Authorization: Bearer {CANARY})"
    if wire.name == "ndjson":
        return {"error": text}
    return {"error": {"message": text, "type": CANARY, "param": CANARY, "code": CANARY}}


def midstream_echo(wire: Wire) -> Script:
    """Text, then an error object mid-stream that quotes the key."""
    if wire.name == "ndjson":
        parts = ollama_lines(["ok"], done=False)
        parts.append(f'{{"error":"upstream rejected key {CANARY}"}}\n'.encode())
    else:
        parts = [sse_data(oa_chunk({"content": "ok"}))]
        parts.append(sse_data({"error": {"message": f"upstream rejected key {CANARY}"}}))
    return chunks(parts, content_type=wire.content_type)


def scenarios(wire: Wire) -> dict[str, Script]:
    good = ollama_lines(["fine"]) if wire.name == "ndjson" else openai_events(["fine"])
    return {
        "/ok" + wire.path: chunks(good, content_type=wire.content_type),
        "/e400" + wire.path: status(400, echo_error(wire)),
        "/e401" + wire.path: status(401, echo_error(wire)),
        "/e429" + wire.path: status(429, echo_error(wire), headers={"Retry-After": "0"}),
        "/e500" + wire.path: status(
            500, f"Internal error for key {CANARY}", content_type="text/plain"
        ),
        "/mid" + wire.path: midstream_echo(wire),
        "/reset" + wire.path: reset_without_answer,
        "/silent" + wire.path: silent,
    }


PREFIXES = ("/ok", "/e400", "/e401", "/e429", "/e500", "/reset", "/silent")


def exercise(provider_for: Callable[[str], Any], base: str, wire: Wire) -> list[str]:
    """Run every scenario through ``chat_stream`` and ``chat``; return every text produced."""
    seen: list[str] = []
    for prefix in PREFIXES:
        provider = provider_for(base + prefix)
        seen.append(repr(provider))
        events = list(provider.chat_stream(req(timeout=0.5)))
        seen += [repr(e) for e in events]
        try:
            provider.chat(req(timeout=0.5))
        except OllmError as exc:
            seen += [str(exc), repr(exc), repr(exc.details), repr(exc.to_info())]
            seen.append(repr(pickle.loads(pickle.dumps(exc)).__dict__))
        else:
            seen.append("ok")
        seen.append(repr(provider.health()))
        provider.close()
    return seen


@pytest.mark.parametrize("source", ["constructor", "env"])
def test_canary_never_leaks(
    wire: Wire,
    source: str,
    records: Records,
    monkeypatch: pytest.MonkeyPatch,
    no_leaks: Callable[..., None],
) -> None:
    """Key by constructor or environment; every failure mode; no trace of the key."""
    if source == "env":
        monkeypatch.setenv(ENV[wire.name], CANARY)

    def provider_for(url: str) -> Any:
        kw = {"api_key": CANARY} if source == "constructor" else {}
        return wire.provider(url, timeout=Timeouts(connect=1.0, idle=0.3), retries=1, **kw)

    with serve(scenarios(wire)) as server:
        texts = exercise(provider_for, server.url, wire)
        auth = [r.headers for r in server.requests]
    with refused_url() as url:
        provider = wire.provider(
            url, retries=0, api_key=CANARY if source == "constructor" else None
        )
        texts += [repr(e) for e in provider.chat_stream(req())]
        try:
            provider.chat(req())
        except OllmError as exc:
            texts += [str(exc), repr(exc), repr(exc.details)]
        texts.append(repr(provider.health()))
        provider.close()
    # The key did go where it belongs: the auth header of its own server.
    assert any(CANARY in " ".join(h.values()) for h in auth)
    leaks = [t for t in texts + records.texts if CANARY in t]
    assert leaks == [], leaks[:3]
    assert len(records.texts) > 10  # DEBUG logging was really on
    no_leaks()


def test_midstream_error_echo_is_redacted(
    wire: Wire, records: Records, no_leaks: Callable[..., None]
) -> None:
    """An error object mid-stream that quotes the key: the ErrorEvent does not."""
    with serve({wire.path: midstream_echo(wire)}) as server:
        provider = wire.provider(server.url, api_key=CANARY)
        events = list(provider.chat_stream(req()))
        try:
            provider.chat(req())
            texts = []
        except OllmError as exc:
            texts = [str(exc), repr(exc.details)]
        provider.close()
    assert events[-1].type == "error"
    assert "upstream rejected key" in events[-1].error.message
    leaks = [t for t in [repr(events), *texts, *records.texts] if CANARY in t]
    assert leaks == [], leaks[:3]
    no_leaks()


def test_pull_error_echo_is_redacted(records: Records, no_leaks: Callable[..., None]) -> None:
    """A pull whose error line quotes the key raises an error that does not."""
    lines = [
        b'{"status":"pulling manifest"}\n',
        b'{"error":"registry rejected %s"}\n' % CANARY.encode(),
    ]
    with serve({"/api/pull": chunks(lines)}) as server:
        provider = NDJSON.provider(server.url, api_key=CANARY)
        with pytest.raises(OllmError) as info:
            provider.pull_model("llama3.2")
        provider.close()
    assert "registry rejected" in info.value.message
    texts = [str(info.value), repr(info.value.details), *records.texts]
    assert [t for t in texts if CANARY in t] == []
    no_leaks()


@pytest.mark.parametrize("backend", ["generic", "lmstudio", "llamacpp", "localai", "kobold"])
def test_canary_in_every_backend_preset(
    backend: str, records: Records, no_leaks: Callable[..., None]
) -> None:
    """Each OpenAI-compatible preset carries the key in its own headers, leaks it nowhere."""

    def provider_for(url: str) -> Any:
        return SSE.provider(url, api_key=CANARY, backend=backend, timeout=Timeouts(1.0, 0.3))

    with serve(scenarios(SSE)) as server:
        texts = exercise(provider_for, server.url, SSE)
    leaks = [t for t in texts + records.texts if CANARY in t]
    assert leaks == [], leaks[:3]
    no_leaks()


def test_canary_with_vllm(records: Records, monkeypatch: pytest.MonkeyPatch) -> None:
    """``VllmProvider`` with the key from ``VLLM_API_KEY``."""
    from ollm_lite.providers.vllm import VllmProvider

    monkeypatch.setenv("VLLM_API_KEY", CANARY)

    def provider_for(url: str) -> Any:
        return VllmProvider(base_url=url, timeout=Timeouts(1.0, 0.3), retries=0)

    with serve(scenarios(SSE)) as server:
        texts = exercise(provider_for, server.url, SSE)
    leaks = [t for t in texts + records.texts if CANARY in t]
    assert leaks == [], leaks[:3]


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_redirect_to_another_host_drops_the_key(
    wire: Wire, code: int, records: Records, no_leaks: Callable[..., None]
) -> None:
    """A redirect to a different host: that host receives no header carrying the key (nor
    anything else the key is in), while the answer still arrives."""
    good = ollama_lines(["moved"]) if wire.name == "ndjson" else openai_events(["moved"])
    with serve({wire.path: chunks(good, content_type=wire.content_type)}) as other:
        target = other.url.replace("127.0.0.1", "localhost") + wire.path
        with serve({wire.path: redirect(target, code)}) as first:
            provider = wire.provider(first.url, api_key=CANARY)
            events = list(provider.chat_stream(req()))
            provider.close()
            assert any(CANARY in " ".join(r.headers.values()) for r in first.requests)
        received = other.requests
    assert received, "the redirect was not followed"
    for request in received:
        assert CANARY not in repr(request.headers)
        assert CANARY.encode() not in request.body
    if code in (307, 308):  # method and body kept: the answer streams as usual
        assert "".join(e.value for e in events if e.type == "text") == "moved"
    assert not [t for t in records.texts if CANARY in t]
    no_leaks()


def test_cancelled_and_timed_out_requests_do_not_log_the_key(
    wire: Wire, records: Records, no_leaks: Callable[..., None]
) -> None:
    """Cancellation and deadline paths log nothing secret either."""
    with serve({wire.path: silent}) as server:
        provider = wire.provider(server.url, api_key=CANARY, timeout=Timeouts(1.0, 5.0))
        cancel = threading.Event()
        timer = threading.Timer(0.1, cancel.set)
        timer.start()
        events = list(provider.chat_stream(req(cancel=cancel)))
        timer.join()
        events += list(provider.chat_stream(req(timeout=0.2)))
        provider.close()
    assert [e.type for e in events] == ["finish", "error"]
    assert not [t for t in [*records.texts, repr(events)] if CANARY in t]
    no_leaks()
