"""Every secret the library is handed stays out of everything it writes (docs/reliability.md,
"Secrets and redirects").

A property over the secret itself (any sendable text of at least 4 characters), where it is
handed over (an API key, the password of the URL's user-info, a header given with the call or
as a default of the client), how the server answers (an error status or an in-stream error
that echoes every request header and the decoded basic credentials, or a redirect to
another host) and the surface that reports it (a provider's events and exceptions, the
script API's ``ask``/``events``/``map``, a fleet, a batch run's output file and progress, the
command line's output).
Whatever the draw: the secret is in no event, exception (chain included), ``repr``, log
record at DEBUG, batch output line, progress line or CLI line, and never reaches the other
host.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import socket
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from support.fault_server import NDJSON, SSE, Wire, chunks, ollama_lines, openai_events
from support.log_records import Records, captured_records
from support.transport_support import LoopbackServer, Request, respond

import ollm_lite
from ollm_lite.cli import main
from ollm_lite.errors import OllmError
from ollm_lite.types import Message, ProviderRequest

#: Every secret holds a ``~`` (a character no message, URL or header of the library holds by
#: itself), so that a short one cannot be found in ordinary text by chance.
_ALPHABET = string.ascii_letters + string.digits + "-_.+/=!$%&*~"
secrets = st.builds(
    lambda head, tail: f"{head}~{tail}",
    st.text(string.ascii_letters + string.digits, min_size=1, max_size=12),
    st.text(_ALPHABET, min_size=2, max_size=30),
)

BEHAVIOURS = ("e400", "e401", "e404", "e429", "e500", "mid", "redirect")
SOURCES = ("api_key", "userinfo", "call_header", "client_header")
SURFACES = ("chat_stream", "chat", "ask", "events", "map", "fleet", "batch", "cli")


def _echo(req: Request) -> str:
    """What the echoing server quotes: every header, basic credentials decoded."""
    said = json.dumps(req.headers)
    auth = req.headers.get("authorization", "")
    if auth.startswith("Basic "):
        said += " credentials " + base64.b64decode(auth[6:]).decode("utf-8", "replace")
    return f"rejected {said}"


def _script(other: LoopbackServer) -> Any:
    """One server for every behaviour: the first path segment names it."""

    def script(client: socket.socket, req: Request) -> None:
        behaviour = req.path.split("/")[1]
        wire = NDJSON if req.path.endswith(NDJSON.path) else SSE
        said = _echo(req)
        if behaviour == "redirect":
            target = other.url.replace("127.0.0.1", "localhost") + wire.path
            respond(client, 307, b"", headers={"Location": target})
        elif behaviour == "mid":
            if wire is NDJSON:
                parts = [*ollama_lines(["ok"], done=False), json.dumps({"error": said}).encode()]
            else:
                parts = [b"data: " + json.dumps({"error": {"message": said}}).encode() + b"\n\n"]
            chunks(parts, content_type=wire.content_type)(client, req)
        else:
            code = int(behaviour[1:])
            body = {"error": {"message": said, "type": said, "code": said}}
            headers = {"Retry-After": "0"} if code == 429 else None
            respond(client, code, json.dumps(body).encode(), headers=headers)

    return script


def _other_script(client: socket.socket, req: Request) -> None:
    wire = NDJSON if req.path.endswith(NDJSON.path) else SSE
    good = ollama_lines(["moved"]) if wire is NDJSON else openai_events(["moved"])
    chunks(good, content_type=wire.content_type)(client, req)


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[LoopbackServer, LoopbackServer]]:
    other = LoopbackServer(fallback=_other_script)
    first = LoopbackServer(fallback=_script(other))
    try:
        yield first, other
    finally:
        first.close()
        other.close()


@pytest.fixture(scope="module")
def records() -> Iterator[Records]:
    with captured_records() as handler:
        yield handler


def _chain(exc: BaseException | None) -> list[str]:
    texts: list[str] = []
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        texts += [str(exc), repr(exc), repr(getattr(exc, "__dict__", ""))]
        if isinstance(exc, OllmError):
            texts.append(repr(exc.to_info()))
        exc = exc.__cause__ or exc.__context__
    return texts


def _event_texts(events: list[Any]) -> list[str]:
    return [repr(events), *(t for e in events for t in _chain(getattr(e, "exception", None)))]


def _run_surface(
    surface: str, wire: Wire, url: str, secret: str, source: str, tmp: Path
) -> list[str]:
    """Every text the surface produced."""
    api_key = secret if source == "api_key" else None
    call_headers = {"X-Handed-Secret": secret} if source == "call_header" else {}
    defaults: dict[str, Any] = {"headers": {"X-Handed-Secret": secret}}
    defaults = defaults if source == "client_header" else {}
    texts: list[str] = []
    if surface in ("chat_stream", "chat"):
        headers = {**call_headers, **defaults.get("headers", {})}
        provider = wire.provider(url, api_key=api_key)
        texts.append(repr(provider))
        request = ProviderRequest("m", [Message.user("hi")], headers=headers)
        try:
            if surface == "chat_stream":
                texts += _event_texts(list(provider.chat_stream(request)))
            else:
                texts.append(repr(provider.chat(request)))
        except OllmError as exc:
            texts += _chain(exc)
        finally:
            provider.close()
        return texts
    name = "ollama" if wire is NDJSON else "openai-compatible"
    if surface == "cli":
        return _cli(name, url, api_key)
    hosts = {"hosts": [url]} if surface == "fleet" else {"host": url}
    with ollm_lite.connect(name, model="m", api_key=api_key, **hosts, **defaults) as llm:
        texts.append(repr(llm))
        if surface in ("ask", "fleet"):
            try:
                texts.append(llm.ask("hi", headers=call_headers, timeout=20))
            except OllmError as exc:
                texts += _chain(exc)
        elif surface == "events":
            texts += _event_texts(list(llm.events("hi", headers=call_headers, timeout=20)))
        elif surface == "map":
            replies = llm.map(["hi", "ho"], headers=call_headers, timeout=20)
            texts += [repr(r) for r in replies]
            texts += [t for r in replies for t in _chain(r.error)]
        else:
            texts += _batch(llm, tmp)
    return texts


def _cli(name: str, url: str, api_key: str | None) -> list[str]:
    """``ollm-lite chat`` in this process: what it printed, and its exit code."""
    out, err = io.StringIO(), io.StringIO()
    flags = ["--provider", name, "--host", url, "--model", "m"]
    flags += ["--api-key", api_key] if api_key else []
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([*flags, "chat", "hi"])
    return [out.getvalue(), err.getvalue(), str(code)]


def _batch(llm: Any, tmp: Path) -> list[str]:
    source, output = tmp / "in.jsonl", tmp / "out.jsonl"
    output.unlink(missing_ok=True)
    line = {"method": "POST", "url": "/v1/chat/completions"}
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    source.write_text(
        "".join(json.dumps({"custom_id": f"r{i}", **line, "body": body}) + "\n" for i in (1, 2))
    )
    seen: list[str] = []
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        summary = ollm_lite.run_batch(source, output, client=llm, progress=True)
    ollm_lite.run_batch(source, output, client=llm, progress=lambda s: seen.append(repr(s)))
    return [output.read_text(), err.getvalue(), repr(summary), *seen]


@settings(
    max_examples=50,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    secret=secrets,
    source=st.sampled_from(SOURCES),
    behaviour=st.sampled_from(BEHAVIOURS),
    wire=st.sampled_from([NDJSON, SSE]),
    surface=st.sampled_from(SURFACES),
)
def test_a_handed_secret_never_leaks(
    servers: tuple[LoopbackServer, LoopbackServer],
    records: Records,
    tmp_path: Path,
    secret: str,
    source: str,
    behaviour: str,
    wire: Wire,
    surface: str,
) -> None:
    """Any secret, handed over any way, echoed or redirected, through any surface: it
    reaches its own server and nothing else."""
    first, other = servers
    if surface == "batch" and behaviour == "mid":
        behaviour = "e400"  # a batch line's answer is not streamed
    if surface in ("batch", "cli") and source.endswith("header"):
        source = "api_key"  # neither takes headers: the key is what they are handed
    before_first, before_other, before_logs = len(first.requests), len(other.requests), 0
    before_logs = len(records.texts)
    base = first.url + "/" + behaviour
    if source == "userinfo":
        base = base.replace("http://", f"http://user:{quote(secret, safe='')}@")
    texts = _run_surface(surface, wire, base, secret, source, tmp_path)
    sent = first.requests[before_first:]
    assert sent, "nothing reached the server"
    if source != "userinfo":  # the basic token is base64: its clear text is never sent
        assert any(secret in repr(r.headers) for r in sent)
    for request in other.requests[before_other:]:
        assert secret not in repr(request.headers) and "authorization" not in request.headers
    leaks = [t for t in texts + records.texts[before_logs:] if secret in t]
    assert leaks == [], leaks[:2]


# --------------------------------------------------------------------------- MCP sign-in secrets

OAUTH_SOURCES = ("client_secret", "access_token", "code")


@pytest.mark.parametrize("source", OAUTH_SOURCES)
@settings(
    max_examples=5, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(secret=secrets)
def test_mcp_sign_in_secrets_stay_out_of_everything(
    source: str, secret: str, tmp_path_factory: pytest.TempPathFactory, records: Records
) -> None:
    """A client secret, an issued access token, an authorization code and the PKCE verifier
    are in no exception (chain included), ``repr``, tool result or log record, even from an
    authorization server and an MCP server that quote every header and form field back."""
    import os
    import urllib.request

    from support.oauth_server import OAuthServer, OAuthWorld

    from ollm_lite import McpAuth, McpServer

    world = OAuthWorld(echo_secrets=True)
    if source == "client_secret":
        world.client_id, world.client_secret = "cron", secret + "-other"  # refused
        world.auth_methods = ["client_secret_basic"]
        auth = McpAuth.client_credentials("cron", secret)
    else:
        if source == "access_token":
            world.fixed_token, world.reject_tokens = secret, True
        else:
            world.fixed_code, world.refuse_code = secret, True
        # The "browser" is urllib, which logs nothing: its records would be the caller's own.
        auth = McpAuth.login(open_url=lambda url: urllib.request.urlopen(url, timeout=10).close())
    data = tmp_path_factory.mktemp("data")
    texts: list[str] = [repr(auth)]
    saved = os.environ.get("XDG_DATA_HOME")
    os.environ["XDG_DATA_HOME"] = str(data)
    before_logs = len(records.texts)
    try:
        with OAuthServer(world) as server:
            try:
                with McpServer.http(server.url, auth=auth) as mcp:
                    texts.append(repr(mcp))
            except OllmError as exc:
                texts += _chain(exc)
    finally:
        if saved is None:
            os.environ.pop("XDG_DATA_HOME", None)
        else:
            os.environ["XDG_DATA_HOME"] = saved
    verifiers = [s.form["code_verifier"] for s in world.seen if "code_verifier" in s.form]
    basic = base64.b64encode(f"cron:{secret}".encode()).decode()
    texts += records.texts[before_logs:]
    joined = "\n".join(texts)
    for value in (secret, quote(secret, safe=""), basic, *verifiers):
        assert value not in joined
