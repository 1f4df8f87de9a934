"""Status → exception mapping and the retry policy, request shapes with `responses`."""

from __future__ import annotations

import email.utils
import time

import pytest
import requests
import responses
from hypothesis import given, strategies as st

from ollm_lite.errors import (
    AuthenticationError,
    ConfigError,
    ConnectionFailed,
    HTTPStatusError,
    ModelNotFound,
    OllmError,
    RateLimited,
    RequestTimeout,
    error_from_code,
)
from ollm_lite.http.errors import error_for_status, parse_retry_after
from ollm_lite.http.policy import RetryPolicy, Timeouts
from ollm_lite.http.transport import Transport
from ollm_lite.http.urls import normalize_base_url

URL = "http://llm.test"


def make(retries: int = 0) -> Transport:
    return Transport(URL, provider="p", retry=RetryPolicy(retries=retries, backoff=0.001))


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (400, HTTPStatusError),
        (401, AuthenticationError),
        (403, AuthenticationError),
        (404, HTTPStatusError),
        (408, RequestTimeout),
        (413, HTTPStatusError),
        (429, RateLimited),
        (500, HTTPStatusError),
        (502, HTTPStatusError),
        (503, HTTPStatusError),
        (504, RequestTimeout),
    ],
)
@responses.activate
def test_status_maps_to_one_class(status: int, cls: type[OllmError]) -> None:
    """Each status ends in its class, carrying the server's own message."""
    responses.post(f"{URL}/x", status=status, json={"error": {"message": "server says no"}})
    with pytest.raises(cls) as info:
        make().request_json("POST", "/x", json_body={})
    assert type(info.value) is cls
    assert "server says no" in info.value.message
    assert info.value.details["status"] == status


@responses.activate
def test_retries_count_attempts_and_end_in_the_right_class() -> None:
    """Retryable statuses are tried 1 + retries times; the error says how many."""
    responses.get(
        f"{URL}/x",
        status=502,
        body="<html><title>502 Bad Gateway</title></html>",
        content_type="text/html",
    )
    with pytest.raises(HTTPStatusError) as info:
        make(retries=2).request_json("GET", "/x")
    assert info.value.details["attempts"] == 3
    assert len(responses.calls) == 3
    assert "502 Bad Gateway" in info.value.message and "<html" not in info.value.message


@responses.activate
def test_non_retryable_status_is_sent_once() -> None:
    """400/401/404 are final."""
    responses.get(f"{URL}/x", status=401, json={"error": "bad key"})
    with pytest.raises(AuthenticationError):
        make(retries=2).request_json("GET", "/x")
    assert len(responses.calls) == 1


@responses.activate
def test_insufficient_quota_is_not_retried() -> None:
    """OpenAI's insufficient_quota 429 is final, unlike rate_limit_exceeded."""
    responses.get(
        f"{URL}/x",
        status=429,
        json={
            "error": {
                "message": "quota",
                "type": "insufficient_quota",
                "code": "insufficient_quota",
            }
        },
    )
    with pytest.raises(RateLimited):
        make(retries=2).request_json("GET", "/x")
    assert len(responses.calls) == 1


@responses.activate
def test_connection_errors_are_retried_then_connection_failed() -> None:
    """A refused connection is retried, then reported as CONNECTION_FAILED."""
    responses.get(f"{URL}/x", body=requests.ConnectionError("Connection refused"))
    with pytest.raises(ConnectionFailed) as info:
        make(retries=1).request_json("GET", "/x")
    assert info.value.details["attempts"] == 2
    assert URL in info.value.message


@responses.activate
def test_not_found_as_model() -> None:
    """404 on a model route is MODEL_NOT_FOUND with the provider's hint."""
    responses.post(f"{URL}/api/chat", status=404, json={"error": "model 'x' not found"})
    hint = "Pull it: ollm-lite models pull {model}"
    transport = Transport(URL, provider="local", model_hint=hint)
    with pytest.raises(ModelNotFound) as info:
        transport.request_json("POST", "/api/chat", json_body={}, model="x", not_found="model")
    assert "ollm-lite models pull x" in info.value.message


def test_google_error_shapes() -> None:
    """Gemini's error JSON: API_KEY_INVALID on 400, RESOURCE_EXHAUSTED with retryDelay."""
    bad_key = (
        b'{"error": {"code": 400, "message": "API key not valid.", "status": "INVALID_ARGUMENT",'
        b' "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo",'
        b' "reason": "API_KEY_INVALID"}]}}'
    )
    err = error_for_status(400, bad_key, {}, provider="gemini", url=URL)
    assert isinstance(err, AuthenticationError)
    exhausted = (
        b'[{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED",'
        b' "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo",'
        b' "retryDelay": "47s"}]}}]'
    )
    err = error_for_status(429, exhausted, {}, provider="gemini", url=URL)
    assert isinstance(err, RateLimited) and err.retry_after == 47.0
    missing = b'{"error": {"code": 404, "message": "no model", "status": "NOT_FOUND"}}'
    err = error_for_status(404, missing, {}, provider="gemini", url=URL, model="gemini-x")
    assert isinstance(err, ModelNotFound)
    assert err.details["status"] == 404 and err.details["server_status"] == "NOT_FOUND"
    unavailable = b'{"error": {"code": 503, "message": "busy", "status": "UNAVAILABLE"}}'
    err = error_for_status(503, unavailable, {}, provider="gemini", url=URL)
    assert isinstance(err, HTTPStatusError) and err.status == 503
    assert err.details["status"] == 503 and err.details["server_status"] == "UNAVAILABLE"
    rebuilt = error_from_code(err.to_info())
    assert isinstance(rebuilt, HTTPStatusError) and rebuilt.status == 503


def test_fastapi_detail_message() -> None:
    """llama-cpp-python's FastAPI errors carry `detail`."""
    body = b'{"detail": [{"loc": ["body", "messages"], "msg": "field required"}]}'
    err = error_for_status(422, body, {}, provider="p", url=URL)
    assert "field required" in err.message


@given(st.binary(max_size=2000), st.sampled_from([400, 401, 404, 429, 500, 503]))
def test_any_error_body_maps_without_raising(body: bytes, status: int) -> None:
    """Arbitrary bytes as an error body still give a library error with bounded text."""
    err = error_for_status(status, body, {"content-type": "text/html"}, provider="p", url=URL)
    assert isinstance(err, OllmError)
    assert len(err.message) < 1500


def test_retry_after_forms() -> None:
    """Seconds, HTTP dates and retry-after-ms parse; negatives and garbage do not."""
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert parse_retry_after({"retry-after": "5"}) == 5.0
    assert parse_retry_after({"retry-after-ms": "1500"}) == 1.5
    assert 28 <= (parse_retry_after({"retry-after": date}, now=now) or 0) <= 31
    for garbage in ("-1", "soon", "", "1e9x", "Thu, 99 Foo 2026"):
        assert parse_retry_after({"retry-after": garbage}) is None
    assert parse_retry_after({"retry-after-ms": "-5"}) is None


def test_backoff_grows_and_is_capped() -> None:
    """Backoff doubles from 0.5 s with jitter and never exceeds 8 s."""
    policy = RetryPolicy()
    assert 0.3 <= policy.delay(0, None) <= 0.7
    assert 0.7 <= policy.delay(1, None) <= 1.3
    assert all(policy.delay(n, None) <= 8.0 for n in range(10))
    assert policy.delay(3, 2.0) == 2.0


@pytest.mark.parametrize(
    ("given_url", "expected"),
    [
        ("localhost:11434", "http://localhost:11434"),
        (":11434", "http://127.0.0.1:11434"),
        ("http://h:8000/v1/", "http://h:8000"),
        ("https://h/v1", "https://h"),
        ("http://h:8000/api/", "http://h:8000/api"),
    ],
)
def test_normalize_base_url(given_url: str, expected: str) -> None:
    """Scheme added where missing; trailing slash and /v1 dropped where asked."""
    assert normalize_base_url(given_url, strip_suffix="/v1") == expected


@pytest.mark.parametrize(
    "bad",
    [
        "ftp://h",
        "http://",
        "http://h:99999",
        "://x",
        "http:/localhost:11434",
        "http//localhost:11434",
        "htp:/bad",
        "HTTPS:/h",
    ],
)
def test_bad_base_url_is_config_error(bad: str) -> None:
    """Malformed URLs are CONFIG_INVALID; a mistyped ``://`` is not read as a host ``http``."""
    with pytest.raises(ConfigError):
        normalize_base_url(bad)


@pytest.mark.parametrize(
    "bad", ["http:/user:canary-pw@h", "ftp://user:canary-pw@h", "http://user:canary-pw@h:99999"]
)
def test_bad_base_url_error_hides_the_password(bad: str) -> None:
    with pytest.raises(ConfigError) as caught:
        normalize_base_url(bad)
    assert "canary-pw" not in str(caught.value) and "***@" in str(caught.value)


def test_timeouts_of() -> None:
    """A number sets the idle limit and caps connect."""
    assert Timeouts.of(30) == Timeouts(connect=5.0, idle=30.0)
    assert Timeouts.of(2) == Timeouts(connect=2.0, idle=2.0)
    assert Timeouts.of(None) == Timeouts()
    with pytest.raises(ConfigError):
        Timeouts.of(-1)
