"""Every value handed to the library as configuration of a connection is a secret.

Besides API keys (``test_faults_secrets.py``): the value of every header the caller supplies
per call (``headers=``) and URL user-info. A server echoing them in an error answer must not
make them appear in any event, exception (its chain included), ``repr`` or log record; a
redirect to another host (another host name or port) must not carry them there, while a
redirect within the host keeps them (docs/reliability.md, "Secrets and redirects").
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from support.fault_server import Wire, chunks, ollama_lines, openai_events, redirect
from support.log_records import Records, captured_records
from support.transport_support import Request, respond, serve

import ollm_lite
from ollm_lite.errors import OllmError
from ollm_lite.http.urls import leaves_origin
from ollm_lite.types import Message, ProviderRequest

TOKEN = "tenant-CANARY-51c0ffee"
"""A per-call header value that must never appear anywhere but in requests to its own host."""


@pytest.fixture
def records() -> Iterator[Records]:
    with captured_records() as handler:
        yield handler


def echo_headers(code: int) -> Callable[[socket.socket, Request], None]:
    """An error answer quoting every header of the request, as some proxies do."""

    def script(client: socket.socket, req: Request) -> None:
        said = f"rejected request with headers {json.dumps(req.headers)}"
        body = {"error": {"message": said, "type": said, "code": said}}
        respond(client, code, json.dumps(body).encode())

    return script


def chain(exc: BaseException | None) -> list[str]:
    """The text of an exception and of everything it is chained to."""
    texts: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts += [str(exc), repr(exc), repr(vars(exc)) if hasattr(exc, "__dict__") else ""]
        exc = exc.__cause__ or exc.__context__
    return texts


def req(**kw: Any) -> ProviderRequest:
    return ProviderRequest("m", [Message.user("hi")], **kw)


@pytest.mark.parametrize("code", [400, 401, 500])
def test_per_call_header_values_are_masked_in_errors(
    wire: Wire, code: int, records: Records
) -> None:
    """A server echoing the request's headers in an error answer: the per-call header's
    value is in no event, exception, chain, ``repr`` or log record."""
    headers = {"X-Tenant-Token": TOKEN, "Private-Token": f"pt-{TOKEN}"}
    with serve({wire.path: echo_headers(code)}) as server:
        provider = wire.provider(server.url)
        events = list(provider.chat_stream(req(headers=headers)))
        with pytest.raises(OllmError) as info:
            provider.chat(req(headers=headers))
        provider.close()
        sent = [r.headers for r in server.requests]
    assert all(h.get("x-tenant-token") == TOKEN for h in sent)  # it did go to its server
    assert events[-1].type == "error" and "rejected request" in events[-1].error.message
    texts = [repr(events), repr(events[-1].exception), *chain(events[-1].exception)]
    texts += [*chain(info.value), repr(info.value.to_info()), *records.texts]
    assert [t for t in texts if TOKEN in t] == []


def test_per_call_header_values_are_masked_through_the_script_api(
    wire: Wire, records: Records
) -> None:
    """``ask(..., headers=...)``: the raised error, its chain and the logs hold no value."""
    with serve({wire.path: echo_headers(400)}) as server:
        name = "ollama" if wire.name == "ndjson" else "openai-compatible"
        with ollm_lite.connect(name, host=server.url, model="m") as llm:
            with pytest.raises(OllmError) as info:
                llm.ask("hi", headers={"X-Tenant-Token": TOKEN})
            events = list(llm.events("hi", headers={"X-Tenant-Token": TOKEN}))
    texts = [*chain(info.value), repr(events), *records.texts]
    texts += [t for e in events for t in chain(getattr(e, "exception", None))]
    assert [t for t in texts if TOKEN in t] == []


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("elsewhere", ["host", "port"])
def test_per_call_headers_do_not_follow_a_redirect_to_another_host(
    wire: Wire, code: int, elsewhere: str, records: Records
) -> None:
    """A redirect to another host name or another port: none of the caller's header values,
    nor its API key or URL credentials, reach it; the answer still arrives."""
    good = ollama_lines(["moved"]) if wire.name == "ndjson" else openai_events(["moved"])
    headers = {"X-Tenant-Token": TOKEN, "Private-Token": f"pt-{TOKEN}", "Cookie": f"c={TOKEN}"}
    with serve({wire.path: chunks(good, content_type=wire.content_type)}) as other:
        target = other.url + wire.path
        if elsewhere == "host":
            target = target.replace("127.0.0.1", "localhost")
        with serve({wire.path: redirect(target, code)}) as first:
            url = first.url.replace("http://", f"http://user:pw-{TOKEN}@")
            provider = wire.provider(url, api_key=f"key-{TOKEN}")
            events = list(provider.chat_stream(req(headers=headers)))
            provider.close()
            assert all(TOKEN in repr(r.headers) for r in first.requests)
        received = other.requests
    assert received, "the redirect was not followed"
    for request in received:
        assert TOKEN not in repr(request.headers)
        assert "authorization" not in {k.lower() for k in request.headers}  # nor basic auth
        assert TOKEN.encode() not in request.body
    if code in (307, 308):  # method and body kept: the answer streams as usual
        assert "".join(e.value for e in events if e.type == "text") == "moved"
    assert [t for t in records.texts if TOKEN in t] == []


def test_a_redirect_within_the_host_keeps_the_headers(wire: Wire) -> None:
    """The same host and port, another path: the caller's headers go along."""
    good = ollama_lines(["here"]) if wire.name == "ndjson" else openai_events(["here"])
    scripts = {
        wire.path: redirect("/moved" + wire.path, 307),
        "/moved" + wire.path: chunks(good, content_type=wire.content_type),
    }
    with serve(scripts) as server:
        provider = wire.provider(server.url)
        events = list(provider.chat_stream(req(headers={"X-Tenant-Token": TOKEN})))
        provider.close()
        moved = [r for r in server.requests if r.path.startswith("/moved")]
    assert "".join(e.value for e in events if e.type == "text") == "here"
    assert moved and all(r.headers.get("x-tenant-token") == TOKEN for r in moved)


@pytest.mark.parametrize(
    ("old", "new", "leaves"),
    [
        ("http://a:80/x", "http://a/y", False),
        ("http://a/x", "http://a:8080/x", True),
        ("http://a:1/x", "http://b:1/x", True),
        ("http://A/x", "http://a/y", False),
        ("https://a/x", "http://a/x", True),
        ("http://a/x", "https://a/x", False),
        ("http://a:8080/x", "https://a:8080/x", True),
        ("https://a/x", "https://a:443/y", False),
        ("http://127.0.0.1:5/x", "http://localhost:5/x", True),
    ],
)
def test_leaves_origin(old: str, new: str, leaves: bool) -> None:
    """requests' rule for dropping credentials: another host or port, or https to http."""
    assert leaves_origin(old, new) is leaves


@pytest.mark.parametrize("code", [None, 400, 403, 429])
def test_gemini_in_stream_error_echoing_a_call_header_is_masked(
    code: int | None, records: Records
) -> None:
    """Google's error object inside a 200 stream quoting the request's headers (mapped as
    the HTTP error it names): the per-call header's value does not show."""
    from ollm_lite.providers.gemini import GeminiProvider

    def script(client: socket.socket, req: Request) -> None:
        said = f"rejected {json.dumps(req.headers)}"
        error = {"message": said, "status": "INVALID_ARGUMENT"}
        if code is not None:
            error["code"] = code  # type: ignore[assignment]
        data = b"data: " + json.dumps({"error": error}).encode() + b"\r\n\r\n"
        chunks([data], content_type="text/event-stream")(client, req)

    path = "/v1beta/models/m:streamGenerateContent"
    with serve({path: script}) as server:
        provider = GeminiProvider(base_url=server.url, api_key="gm-key-0001", retries=0)
        events = list(provider.chat_stream(req(headers={"X-Tenant-Token": TOKEN})))
        provider.close()
        sent = server.requests
    assert sent and sent[0].headers.get("x-tenant-token") == TOKEN
    assert events[-1].type == "error" and "rejected" in events[-1].error.message
    texts = [repr(events), *chain(events[-1].exception), *records.texts]
    assert [t for t in texts if TOKEN in t] == []
