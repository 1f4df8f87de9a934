"""The exception tree: stable codes, pickling, ErrorInfo round trips."""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import pytest

from ollm_lite import ChatClient, LocalProvider, OpenAICompatibleProvider, ScriptedProvider, errors
from ollm_lite.errors import (
    AuthenticationError,
    BadResponse,
    BudgetExceeded,
    Cancelled,
    ConfigError,
    ConnectionFailed,
    HTTPStatusError,
    ModelNotFound,
    OllmError,
    ProviderNotFound,
    RateLimited,
    RequestTimeout,
    TokenLimitExceeded,
    UnsupportedOperation,
    error_from_code,
)

CODES = {
    ConnectionFailed: "CONNECTION_FAILED",
    AuthenticationError: "LLM_AUTH_FAILED",
    RateLimited: "LLM_RATE_LIMITED",
    RequestTimeout: "LLM_TIMEOUT",
    HTTPStatusError: "LLM_HTTP_ERROR",
    BadResponse: "LLM_BAD_RESPONSE",
    UnsupportedOperation: "UNSUPPORTED_OPERATION",
    TokenLimitExceeded: "TOKEN_LIMIT_EXCEEDED",
    BudgetExceeded: "LLM_BUDGET_EXCEEDED",
    Cancelled: "CANCELLED",
    ConfigError: "CONFIG_INVALID",
    ProviderNotFound: "PROVIDER_NOT_FOUND",
    ModelNotFound: "MODEL_NOT_FOUND",
}


@pytest.mark.parametrize(("cls", "code"), CODES.items())
def test_every_class_has_its_stable_code(cls: type[OllmError], code: str) -> None:
    """Each class carries the code the README's Error codes table fixes, as a class attribute."""
    assert cls.code == code
    assert issubclass(cls, OllmError)
    assert cls("x").code == code


def test_every_public_exception_is_listed() -> None:
    """No exception class in the module is missing from the code table."""
    public = {
        obj
        for name in errors.__all__
        if isinstance(obj := getattr(errors, name), type) and issubclass(obj, OllmError)
    }
    assert public - {OllmError} == set(CODES)


@pytest.mark.parametrize("cls", list(CODES))
def test_pickling_keeps_every_attribute(cls: type[OllmError]) -> None:
    """Exceptions survive pickle with message, details, provider, model and extras."""
    kwargs: dict[str, object] = {"details": {"a": 1}, "provider": "p", "model": "m"}
    if issubclass(cls, HTTPStatusError):
        kwargs["status"] = 418
    if cls is RateLimited:
        kwargs["retry_after"] = 2.5
    if cls is ConnectionFailed:
        kwargs["url"] = "http://127.0.0.1:1"
    err = cls("something failed", **kwargs)  # type: ignore[arg-type]
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert (back.message, back.details, back.provider, back.model) == (
        "something failed",
        {"a": 1},
        "p",
        "m",
    )
    assert str(back) == "something failed"
    for attr in ("status", "retry_after", "url"):
        assert getattr(back, attr, None) == getattr(err, attr, None)


def test_builtin_bases_match_meaning() -> None:
    """Config errors are ValueErrors, unknown providers KeyErrors (a KeyError, as for a missing
    mapping key), unsupported ops NotImplementedErrors."""
    assert issubclass(ConfigError, ValueError)
    assert issubclass(ProviderNotFound, KeyError)
    missing = ProviderNotFound("no provider named 'x'")
    assert str(missing) == "no provider named 'x'"  # not KeyError's quoted repr
    assert issubclass(UnsupportedOperation, NotImplementedError)
    assert issubclass(RateLimited, HTTPStatusError)
    assert issubclass(ModelNotFound, HTTPStatusError)
    assert issubclass(AuthenticationError, HTTPStatusError)


def test_to_info_and_back() -> None:
    """An error streamed as ErrorInfo can be raised again as the same class."""
    err = RateLimited("slow down", retry_after=3.0, status=429, provider="vllm", model="m")
    err.details["status"] = 429
    err.details["retry_after"] = 3.0
    info = err.to_info()
    assert info.code == "LLM_RATE_LIMITED"
    assert info.details is not None and info.details["provider"] == "vllm"
    again = error_from_code(info)
    assert isinstance(again, RateLimited)
    assert again.retry_after == 3.0 and again.status == 429 and again.model == "m"


def test_unknown_code_keeps_its_code() -> None:
    """A code the library does not know still comes back as an OllmError with that code."""
    from ollm_lite.types import ErrorInfo

    again = error_from_code(ErrorInfo("tool broke", "TOOL_EXECUTION_FAILED"))
    assert type(again) is OllmError and again.code == "TOOL_EXECUTION_FAILED"


@pytest.mark.parametrize("value", [0, -2, True, "3", 1.5])
def test_positive_integer_arguments_are_refused_in_one_wording_everywhere(value: Any) -> None:
    url = "http://127.0.0.1:9"
    attempts: dict[str, Callable[[], object]] = {
        "max_turns": lambda: ChatClient(ScriptedProvider(["hi"]), max_turns=value),
        "max_parallel_tools": lambda: ChatClient(
            ScriptedProvider(["hi"]), max_parallel_tools=value
        ),
        "embed_batch_size": lambda: OpenAICompatibleProvider(base_url=url, embed_batch_size=value),
        "num_ctx": lambda: LocalProvider(base_url=url, num_ctx=value),
    }
    for name, attempt in attempts.items():
        with pytest.raises(ConfigError) as info:
            attempt()
        assert info.value.message == f"{name} must be a positive integer, got {value!r}"
