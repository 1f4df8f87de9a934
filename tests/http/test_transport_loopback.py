"""Transport behaviour against real loopback servers: cancellation, drops, drips, leaks."""

from __future__ import annotations

import base64
import logging
import socket
import threading
import time
from typing import Any

import pytest
from support.transport_support import (
    Request,
    chunked_head,
    respond,
    send_chunk,
    serve,
    silent,
    stream_script,
    wait_for_threads,
)

from ollm_lite.errors import (
    Cancelled,
    ConnectionFailed,
    OllmError,
    RateLimited,
    RequestTimeout,
)
from ollm_lite.http.policy import RetryPolicy, Timeouts
from ollm_lite.http.transport import Transport
from ollm_lite.providers import LocalProvider, OpenAICompatibleProvider, VllmProvider
from ollm_lite.streams import SSEDecoder

EVENTS = [b'data: {"i": %d}\n\n' % i for i in range(5)]


def make(url: str, **kw: object) -> Transport:
    kw.setdefault("retry", RetryPolicy(retries=0))
    return Transport(url, provider="test", **kw)  # type: ignore[arg-type]


def test_streams_each_http_chunk_as_it_arrives() -> None:
    """Chunks come out one per HTTP chunk, in order, and the connection is reused afterwards."""
    with serve({"/s": stream_script(EVENTS, keep_alive=True)}) as server:
        transport = make(server.url)
        for _ in range(2):
            with transport.open_stream("POST", "/s", json_body={"a": 1}) as resp:
                assert list(resp.iter_chunks()) == EVENTS
        assert len(server._clients) == 1, "the warm connection was not reused"
        assert server.requests[0].headers["content-type"] == "application/json"
        transport.close()


def test_decoded_items_come_as_one_list_per_http_chunk() -> None:
    """iter_batches hands over what the decoder made of each HTTP chunk as one list (chunks
    that make nothing give none), and iter_decoded gives the same items one by one."""
    two_in_one = EVENTS[0] + EVENTS[1]
    halves = [EVENTS[2][:5], EVENTS[2][5:]]  # the first half makes no event
    chunks = [two_in_one, b": keep-alive\n", *halves, EVENTS[3]]
    with serve({"/s": stream_script(chunks, keep_alive=True)}) as server:
        transport = make(server.url)
        with transport.open_stream("POST", "/s") as resp:
            batches = [[e.data for e in batch] for batch in resp.iter_batches(SSEDecoder())]
        assert batches == [['{"i": 0}', '{"i": 1}'], ['{"i": 2}'], ['{"i": 3}']]
        with transport.open_stream("POST", "/s") as resp:
            flat = [e.data for e in resp.iter_decoded(SSEDecoder())]
        assert flat == [item for batch in batches for item in batch]
        transport.close()


class _BrokenDecoder:
    """A decoder with a bug of its own on its second chunk."""

    def __init__(self, error: Exception) -> None:
        self.error = error
        self.fed = 0

    def feed(self, chunk: bytes) -> list[bytes]:
        self.fed += 1
        if self.fed == 2:
            raise self.error
        return [chunk]

    def flush(self) -> list[bytes]:
        return []


@pytest.mark.parametrize("error", [ValueError("bug"), AttributeError("bug"), OSError("bug")])
def test_a_decoders_own_failure_is_not_read_as_a_cut_off_body(error: Exception) -> None:
    """Reading and decoding share one loop; a decoder that raises what a broken connection
    raises too (ValueError, AttributeError, OSError) surfaces as itself, not as a quiet end."""
    with serve({"/s": stream_script(EVENTS, keep_alive=True)}) as server:
        transport = make(server.url)
        decoder = _BrokenDecoder(error)
        got: list[bytes] = []
        with transport.open_stream("POST", "/s") as resp:
            with pytest.raises(type(error)) as raised:
                for batch in resp.iter_batches(decoder):
                    got.extend(batch)
        assert raised.value is error
        assert got == EVENTS[:1]
        transport.close()


@pytest.mark.parametrize("where", ["before_headers", "mid_stream"])
def test_cancel_interrupts_a_silent_server(where: str) -> None:
    """Setting the event interrupts a read blocked on a server that sends nothing at all."""
    script = silent if where == "before_headers" else stream_script(EVENTS[:2], then="hang")
    baseline = threading.active_count()
    with serve({"/s": script}) as server:
        transport = make(server.url)
        cancel = threading.Event()
        got: list[bytes] = []
        timer = threading.Timer(0.2, cancel.set)
        timer.start()
        started = time.monotonic()
        with pytest.raises(Cancelled) as info:
            with transport.open_stream("POST", "/s", json_body={}, cancel=cancel) as resp:
                got.extend(resp.iter_chunks())
        elapsed = time.monotonic() - started - 0.2
        assert info.value.code == "CANCELLED"
        assert elapsed < 1.0, f"cancellation took {elapsed:.3f} s"
        assert got == (EVENTS[:2] if where == "mid_stream" else [])
        timer.join()
        transport.close()
    assert wait_for_threads(baseline) == baseline


def test_cancel_already_set_sends_nothing() -> None:
    """A cancel set before the call means no request reaches the server."""
    with serve({"/s": stream_script(EVENTS)}) as server:
        cancel = threading.Event()
        cancel.set()
        with pytest.raises(Cancelled):
            make(server.url).open_stream("POST", "/s", json_body={}, cancel=cancel)
        time.sleep(0.05)
        assert server.requests == []


def test_total_deadline_on_a_hanging_stream() -> None:
    """The total deadline ends a stream that keeps the connection open without finishing."""
    with serve({"/s": stream_script(EVENTS[:1], then="hang")}) as server:
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            with make(server.url).open_stream("POST", "/s", json_body={}, timeout=0.3) as resp:
                list(resp.iter_chunks())
        assert time.monotonic() - started < 2.0
        assert "deadline" in info.value.message


def test_idle_timeout_counts_content_not_keepalive_comments() -> None:
    """Pings every 20 ms do not keep a stream alive past the idle limit."""

    def pinging(client: socket.socket, req: Request) -> None:
        chunked_head(client)
        send_chunk(client, b'data: {"x": 1}\n\n')
        while not req.stop.wait(0.02):
            send_chunk(client, b": ping\n\n")

    with serve({"/s": pinging}) as server:
        transport = make(server.url, timeouts=Timeouts(connect=1, idle=0.3))
        items = []
        started = time.monotonic()
        with pytest.raises(RequestTimeout) as info:
            with transport.open_stream("POST", "/s", json_body={}) as resp:
                items.extend(resp.iter_decoded(SSEDecoder()))
        assert len(items) == 1
        assert 0.25 < time.monotonic() - started < 3.0
        assert info.value.details["idle_timeout"] == 0.3


def test_slow_drip_of_content_is_not_a_timeout() -> None:
    """Content arriving more often than the idle limit keeps the stream going."""
    drip = stream_script(EVENTS, delay=0.1)
    with serve({"/s": drip}) as server:
        transport = make(server.url, timeouts=Timeouts(connect=1, idle=0.5))
        with transport.open_stream("POST", "/s", json_body={}) as resp:
            assert len(list(resp.iter_decoded(SSEDecoder()))) == 5


def test_reset_mid_stream_keeps_what_arrived() -> None:
    """A reset after some content raises ConnectionFailed after the delivered chunks."""
    with serve({"/s": stream_script(EVENTS[:2], then="reset")}) as server:
        got: list[bytes] = []
        with pytest.raises(ConnectionFailed):
            with make(server.url).open_stream("POST", "/s", json_body={}) as resp:
                got.extend(resp.iter_chunks())
        assert got == EVENTS[:2]


def test_clean_close_mid_stream_is_a_short_stream() -> None:
    """A clean close that breaks chunked framing ends the iteration; the caller judges it."""
    with serve({"/s": stream_script(EVENTS[:2], then="close")}) as server:
        with make(server.url).open_stream("POST", "/s", json_body={}) as resp:
            assert list(resp.iter_chunks()) == EVENTS[:2]


def test_close_delimited_and_content_length_bodies() -> None:
    """Bodies without chunked framing stream too, as data arrives."""

    def close_delimited(client: socket.socket, req: Request) -> None:
        client.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n\r\n")
        for event in EVENTS:
            client.sendall(event)
            time.sleep(0.01)
        client.shutdown(socket.SHUT_RDWR)

    def with_length(client: socket.socket, req: Request) -> None:
        respond(client, 200, b"".join(EVENTS), content_type="text/event-stream")

    with serve({"/a": close_delimited, "/b": with_length}) as server:
        transport = make(server.url)
        for path in ("/a", "/b"):
            with transport.open_stream("POST", path, json_body={}) as resp:
                events = list(resp.iter_decoded(SSEDecoder()))
            assert [e.data for e in events] == [f'{{"i": {i}}}' for i in range(5)]


def test_breaking_out_releases_the_connection() -> None:
    """Leaving a stream early closes its socket at once: the server sees every close."""
    closed: list[bool] = []

    def one_chunk_then_wait_for_close(client: socket.socket, req: Request) -> None:
        chunked_head(client)
        send_chunk(client, EVENTS[0])
        client.settimeout(5)
        try:
            closed.append(client.recv(1) == b"")
        except OSError:
            closed.append(False)

    with serve({"/s": one_chunk_then_wait_for_close}) as server:
        transport = make(server.url)
        for _ in range(20):
            with transport.open_stream("POST", "/s", json_body={}) as resp:
                for _chunk in resp.iter_chunks():
                    break
        deadline = time.monotonic() + 10
        while len(closed) < 20 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert closed == [True] * 20
        transport.close()


def test_stopping_at_the_last_event_still_reuses_the_connection() -> None:
    """Providers stop at their terminal event; close() finishes the body so the socket is kept."""
    with serve({"/s": stream_script(EVENTS, keep_alive=True)}) as server:
        transport = make(server.url)
        for _ in range(5):
            with transport.open_stream("POST", "/s", json_body={}) as resp:
                got = []
                for chunk in resp.iter_chunks():
                    got.append(chunk)
                    if chunk == EVENTS[-1]:
                        break  # the chunked terminator is still unread
            assert got == EVENTS
        assert len(server._clients) == 1, "each stream opened its own connection"
        transport.close()


def test_leaving_a_server_that_keeps_sending_closes_its_connection() -> None:
    """A body still arriving is not drained to the end: the connection is dropped instead."""
    closed: list[bool] = []

    def endless(client: socket.socket, req: Request) -> None:
        chunked_head(client)
        try:
            while not req.stop.is_set():
                send_chunk(client, b"data: " + b"x" * 1000 + b"\n\n")
                time.sleep(0.001)
        except OSError:
            closed.append(True)

    endless.keep_alive = True  # type: ignore[attr-defined]
    with serve({"/s": endless}) as server:
        transport = make(server.url)
        for _ in range(3):
            with transport.open_stream("POST", "/s", json_body={}) as resp:
                for _chunk in resp.iter_chunks():
                    break
        deadline = time.monotonic() + 10
        while len(closed) < 3 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert closed == [True] * 3
        assert len(server._clients) == 3
        transport.close()


@pytest.mark.parametrize("how", ["close", "reset"])
def test_pooled_connection_closed_by_the_server_is_sent_again(how: str) -> None:
    """A server that closes a kept-alive connection instead of reading the next request
    (idle timeout, or one answer per connection without ``Connection: close``): the request
    goes out again on a new connection, even with retries off, and the stream is whole."""
    served: dict[socket.socket, int] = {}

    def one_answer_per_connection(client: socket.socket, req: Request) -> None:
        served[client] = served.get(client, 0) + 1
        if served[client] == 1:
            stream_script(EVENTS)(client, req)
            return
        if how == "reset":
            linger_zero = b"\x01\x00\x00\x00\x00\x00\x00\x00"
            client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger_zero)
        client.close()
        raise OSError("closed")

    one_answer_per_connection.keep_alive = True  # type: ignore[attr-defined]
    with serve({"/s": one_answer_per_connection}) as server:
        transport = make(server.url)  # retries=0
        for _ in range(3):
            with transport.open_stream("POST", "/s", json_body={}) as resp:
                assert list(resp.iter_chunks()) == EVENTS
        assert len(server.requests) == 5  # 3 answered + 2 that met a closed connection
        transport.close()


def test_connection_closed_without_answer_on_a_new_connection_is_not_resent() -> None:
    """Only a *pooled* connection is sent again: on a fresh one, a close without an answer
    is the server's doing and the retry policy (here: none) decides."""

    def close_at_once(client: socket.socket, req: Request) -> None:
        client.close()
        raise OSError("closed")

    with serve({"/s": close_at_once}) as server:
        transport = make(server.url)
        with pytest.raises(ConnectionFailed):
            transport.open_stream("POST", "/s", json_body={})
        assert len(server.requests) == 1
        transport.close()


def test_retry_after_then_success_counts_no_replay() -> None:
    """A 503 with Retry-After is retried; the final answer is the second one."""
    calls = []

    def flaky(client: socket.socket, req: Request) -> None:
        calls.append(1)
        if len(calls) == 1:
            respond(client, 503, b'{"error":"busy"}', headers={"Retry-After": "0"})
        else:
            respond(client, 200, b'{"ok": true}')

    with serve({"/j": flaky}) as server:
        transport = Transport(server.url, provider="t", retry=RetryPolicy(retries=2, backoff=0.01))
        assert transport.request_json("GET", "/j") == {"ok": True}
        assert len(calls) == 2


def test_huge_retry_after_is_not_waited_for() -> None:
    """Retry-After beyond 60 s raises RateLimited at once with the server's wait."""

    def limited(client: socket.socket, req: Request) -> None:
        respond(client, 429, b'{"error":{"message":"slow"}}', headers={"Retry-After": "3600"})

    with serve({"/j": limited}) as server:
        transport = Transport(server.url, provider="t", retry=RetryPolicy(retries=2))
        started = time.monotonic()
        with pytest.raises(RateLimited) as info:
            transport.request_json("GET", "/j")
        assert time.monotonic() - started < 1.0
        assert info.value.retry_after == 3600
        assert info.value.details["attempts"] == 1
        assert len(server.requests) == 1


def test_cancel_during_retry_backoff() -> None:
    """Cancellation interrupts the wait between tries."""

    def busy(client: socket.socket, req: Request) -> None:
        respond(client, 503, b"{}", headers={"Retry-After": "30"})

    with serve({"/j": busy}) as server:
        transport = Transport(
            server.url, provider="t", retry=RetryPolicy(retries=2, max_retry_after=60)
        )
        cancel = threading.Event()
        threading.Timer(0.2, cancel.set).start()
        started = time.monotonic()
        with pytest.raises(Cancelled):
            transport.request_json("GET", "/j", cancel=cancel)
        assert time.monotonic() - started < 1.5


def test_refused_port_names_the_url_and_hint() -> None:
    """Connection refused → CONNECTION_FAILED naming the URL and how to start the server."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    transport = Transport(
        f"http://127.0.0.1:{port}",
        provider="local",
        retry=RetryPolicy(retries=1, backoff=0.01),
        start_hint="Start it with `ollama serve`.",
    )
    with pytest.raises(ConnectionFailed) as info:
        transport.request_json("GET", "/api/version")
    assert f"127.0.0.1:{port}" in info.value.message
    assert "ollama serve" in info.value.message
    assert info.value.details["attempts"] == 2


def test_redirect_to_another_host_drops_custom_auth_headers() -> None:
    """x-api-key / x-goog-api-key / Authorization never follow a redirect off the host."""
    with serve({"/target": lambda c, r: respond(c, 200, b"{}")}) as other:
        target = other.url.replace("127.0.0.1", "localhost") + "/target"

        def redirect(client: socket.socket, req: Request) -> None:
            respond(client, 307, b"", headers={"Location": target})

        with serve({"/r": redirect}) as server:
            transport = Transport(
                server.url,
                provider="t",
                headers={"x-goog-api-key": "canary-key-1", "Authorization": "Bearer canary-key-2"},
                secrets=["canary-key-1", "canary-key-2"],
            )
            assert transport.request_json("GET", "/r") == {}
        seen = other.requests[0].headers
        assert "x-goog-api-key" not in seen and "authorization" not in seen


def test_secret_never_in_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    """A body echoing the key is never echoed back, and DEBUG logs never carry it."""
    canary = "sk-canary-0123456789"

    def echo(client: socket.socket, req: Request) -> None:
        body = (
            b'{"error": {"message": "invalid key sk-canary-0123456789", "request": {"headers": '
            + req.headers.get("authorization", "").encode()
            + b"}}}"
        )
        respond(client, 400, body)

    caplog.set_level(logging.DEBUG)
    with serve({"/e": echo}) as server:
        transport = Transport(
            server.url,
            provider="t",
            headers={"Authorization": f"Bearer {canary}"},
            secrets=[canary],
        )
        with pytest.raises(Exception) as info:
            transport.request_json("POST", "/e", json_body={"x": 1})
    err = info.value
    assert canary not in str(err) and canary not in repr(err)
    assert canary not in repr(getattr(err, "details", {}))
    assert canary not in repr(transport)
    assert all(canary not in r.getMessage() for r in caplog.records)


# --------------------------------------------------------------------------- credentials in the URL


@pytest.mark.parametrize(
    "make",
    [
        lambda url: LocalProvider(base_url=url),
        lambda url: VllmProvider(base_url=url),
        lambda url: OpenAICompatibleProvider(base_url=url),
    ],
    ids=["local", "vllm", "openai-compatible"],
)
def test_credentials_in_the_base_url_become_basic_auth_and_stay_out_of_text(make: Any) -> None:
    """``http://user:pw@host`` authenticates like curl does, and the password is never shown."""
    password = "pw-canary-9876"

    def answer(client: socket.socket, req: Request) -> None:
        respond(client, 500, f'{{"error": "echo {req.headers.get("authorization")}"}}'.encode())

    with serve({"/api/tags": answer, "/v1/models": answer}) as server:
        url = server.url.replace("http://", f"http://bob:{password}@")
        provider = make(url)
        assert provider.base_url == server.url
        assert password not in repr(provider)
        with pytest.raises(OllmError) as info:
            provider.list_models()
        token = base64.b64encode(f"bob:{password}".encode()).decode()
        assert server.requests[0].headers["authorization"] == f"Basic {token}"
        text = f"{info.value} {info.value!r} {info.value.details!r}"
        assert password not in text and token not in text
        provider.close()
    with pytest.raises(ConnectionFailed) as refused:
        make(url).list_models()
    assert password not in f"{refused.value} {refused.value.details!r}"


def test_credentials_outside_latin_1_are_sent_as_utf_8() -> None:
    """``http://böb:пароль@host`` (percent-encoded in the URL) authenticates with the UTF-8
    bytes, as curl sends them."""
    with serve({"/v1/models": lambda c, r: respond(c, 200, b'{"data": []}')}) as server:
        url = server.url.replace("http://", "http://b%C3%B6b:%D0%BF%D0%B0%D1%80%D0%BE%D0%BB%D1%8C@")
        provider = VllmProvider(base_url=url)
        assert provider.list_models() == []
        token = base64.b64encode("böb:пароль".encode()).decode()
        assert server.requests[0].headers["authorization"] == f"Basic {token}"
        provider.close()


def test_an_api_key_wins_over_credentials_in_the_url() -> None:
    with serve({"/v1/models": lambda c, r: respond(c, 200, b'{"data": []}')}) as server:
        provider = VllmProvider(
            base_url=server.url.replace("http://", "http://bob:pw-xyz1@"), api_key="key-abcd"
        )
        assert provider.list_models() == []
        assert server.requests[0].headers["authorization"] == "Bearer key-abcd"
        provider.close()


def test_an_unknown_request_option_is_a_type_error_before_anything_is_sent() -> None:
    """A misspelt keyword fails as a wrong call signature would, and nothing is sent."""
    with serve({"/s": stream_script(EVENTS)}) as server:
        transport = make(server.url)
        with pytest.raises(TypeError, match="json_bdy"):
            transport.open_stream("POST", "/s", json_bdy={})  # type: ignore[call-arg]
        with pytest.raises(TypeError, match="modle"):
            transport.request_json("GET", "/s", modle="m")  # type: ignore[call-arg]
        assert server.requests == []
        transport.close()
