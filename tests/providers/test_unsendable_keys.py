"""API keys that cannot be sent in an HTTP header are refused at once, and never shown.

A key read from a file with ``.read()`` keeps its trailing newline; ``requests`` refuses it (and
a leading blank) while preparing the request, ``http.client`` refuses a character outside
Latin-1. Such a key is a ``CONFIG_INVALID`` when the provider is created — nothing sent, no
retry — and appears in no message, exception chain, log record or CLI output. Keys read from
the environment or the config file have surrounding whitespace stripped.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
import responses
from hypothesis import given, settings, strategies as st
from responses import matchers

from ollm_lite.config import load_config, validate_config
from ollm_lite.errors import ConfigError
from ollm_lite.http.transport import Transport
from ollm_lite.providers.anthropic import AnthropicProvider
from ollm_lite.providers.base import BaseProvider
from ollm_lite.providers.gemini import GeminiProvider
from ollm_lite.providers.ollama import LocalProvider
from ollm_lite.providers.openai_compat import OpenAICompatibleProvider
from ollm_lite.providers.vllm import VllmProvider

URL = "http://keys.test:9"
SECRET = "sk-very-secret-0123456789"
BAD_KEYS = {
    "trailing-newline": SECRET + "\n",
    "leading-blank": " " + SECRET,
    "outside-latin-1": SECRET + "\u20ac",
    "inner-line-break": SECRET[:8] + "\r\n" + SECRET[8:],
}
MAKERS: dict[str, Callable[[str], BaseProvider]] = {
    "local": lambda key: LocalProvider(base_url=URL, api_key=key),
    "vllm": lambda key: VllmProvider(base_url=URL, api_key=key),
    "lmstudio": lambda key: OpenAICompatibleProvider(base_url=URL, backend="lmstudio", api_key=key),
    "gemini": lambda key: GeminiProvider(base_url=URL, api_key=key),
    "anthropic": lambda key: AnthropicProvider(base_url=URL, api_key=key),
}


def chain(exc: BaseException | None) -> Iterator[BaseException]:
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def leaks(text: str) -> bool:
    return SECRET[:12] in text or SECRET[-12:] in text


@pytest.fixture(autouse=True)
def _no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OLLAMA_API_KEY", "VLLM_API_KEY", "OPENAI_COMPATIBLE_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)


@pytest.mark.parametrize("key", BAD_KEYS.values(), ids=BAD_KEYS.keys())
@pytest.mark.parametrize("provider", MAKERS)
def test_an_unsendable_key_is_config_invalid_at_once_and_never_shown(
    provider: str, key: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as rsps:
        with pytest.raises(ConfigError) as info:
            MAKERS[provider](key)
        assert len(rsps.calls) == 0  # nothing sent, nothing retried
    assert info.value.code == "CONFIG_INVALID"
    assert "cannot be sent" in info.value.message
    for exc in chain(info.value):
        assert not leaks(str(exc)) and not leaks(repr(exc.args)), exc
    assert not leaks("".join(traceback.format_exception(info.value)))
    assert not any(leaks(r.getMessage()) for r in caplog.records)


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=30))
def test_the_transport_accepts_only_keys_requests_can_send(key: str) -> None:
    """A key the transport accepts goes through ``requests``' and ``http.client``'s checks."""
    try:
        Transport(URL, provider="p", headers={"X-API-Key": key}, secrets=[key])
    except ConfigError as exc:
        assert key not in exc.message or len(key) < 4
        return
    prepared = requests.Request("GET", URL, headers={"X-API-Key": key}).prepare()
    prepared.headers["X-API-Key"].encode("latin-1")  # what http.client does


@pytest.mark.parametrize(
    ("var", "make", "header", "sent"),
    [
        ("VLLM_API_KEY", lambda: VllmProvider(base_url=URL), "Authorization", f"Bearer {SECRET}"),
        (
            "OLLAMA_API_KEY",
            lambda: LocalProvider(base_url=URL),
            "Authorization",
            f"Bearer {SECRET}",
        ),
        (
            "OPENAI_COMPATIBLE_API_KEY",
            lambda: OpenAICompatibleProvider(base_url=URL, backend="lmstudio"),
            "X-API-Key",
            SECRET,
        ),
        ("GEMINI_API_KEY", lambda: GeminiProvider(base_url=URL), "x-goog-api-key", SECRET),
        ("ANTHROPIC_API_KEY", lambda: AnthropicProvider(base_url=URL), "x-api-key", SECRET),
    ],
)
def test_a_key_from_the_environment_is_stripped(
    monkeypatch: pytest.MonkeyPatch,
    var: str,
    make: Callable[[], BaseProvider],
    header: str,
    sent: str,
) -> None:
    monkeypatch.setenv(var, f"  {SECRET}\n")
    with responses.RequestsMock(assert_all_requests_are_fired=True) as rsps:
        rsps.add(
            responses.GET,
            url=re.compile(r"http://keys\.test:9/.*"),
            json={"models": [], "data": []},
            match=[matchers.header_matcher({header: sent})],
        )
        make().list_models()


def test_a_key_from_the_config_file_is_stripped(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[providers.vllm]\napi_key = "{SECRET}\\n"\n', encoding="utf-8")
    config = load_config(path, env={"OLLM_GEMINI_UNUSED": ""})
    assert config.provider_config("vllm").api_key == SECRET
    config = load_config(path, env={"VLLM_API_KEY": f"\t{SECRET}\r\n"})
    assert config.provider_config("vllm").api_key == SECRET


def test_validate_config_names_an_unsendable_key_without_quoting_it(tmp_path: Path) -> None:
    path = tmp_path / "config.toml"
    path.write_text(f'[providers.vllm]\napi_key = "{SECRET}\\u20ac"\n', encoding="utf-8")
    issues = validate_config(load_config(path, env={}))
    [issue] = [i for i in issues if i.path == "providers.vllm.api_key"]
    assert "cannot be sent" in issue.message and not leaks(issue.message)
