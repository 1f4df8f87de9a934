"""Group 7, continued: the key canary given through a config file (literal and ``${VAR}``).

The file's key must reach the right server's auth header and nowhere else: not ``repr`` of the
config or of any provider built from it, not ``redacted()``, not ``validate_config`` issues,
not the errors of a malformed file, not any event or log record of a failing chat.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from support.fault_server import CANARY, OLLAMA_CHAT, OPENAI_CHAT, status
from support.log_records import Records, captured_records
from support.transport_support import serve

from ollm_lite.config import load_config, redacted, validate_config
from ollm_lite.errors import ConfigError, OllmError
from ollm_lite.registry import default_registry
from ollm_lite.types import Message, ProviderRequest


@pytest.fixture
def records() -> Iterator[Records]:
    with captured_records() as handler:
        yield handler


def echo(message: str) -> dict[str, Any]:
    return {"error": {"message": f"{message}: key {CANARY} rejected", "code": CANARY}}


def write(tmp_path: Path, url: str, key: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
provider = "vllm"
model = "m"
[providers.local]
base_url = "{url}"
api_key = "{key}"
[providers.vllm]
base_url = "{url}"
api_key = "{key}"
timeout = 2
[providers.openai-compatible]
base_url = "{url}"
api_key = "{key}"
backend = "lmstudio"
[providers.gemini]
api_key = "{key}"
"""
    )
    return path


@pytest.mark.parametrize("form", ["literal", "env-var", "env-default"])
def test_config_file_key_never_leaks(
    tmp_path: Path, form: str, records: Records, no_leaks: Callable[..., None]
) -> None:
    """The key from the file (as a literal, ``${VAR}`` or ``${VAR:-default}``) is sent to
    its server and appears in nothing the library shows or logs."""
    key = {"literal": CANARY, "env-var": "${MY_KEY}", "env-default": f"${{UNSET_KEY:-{CANARY}}}"}
    env = {"MY_KEY": CANARY}
    scripts = {
        OLLAMA_CHAT: status(401, echo("ollama")),
        OPENAI_CHAT: status(403, echo("openai")),
    }
    texts: list[str] = []
    with serve(scripts) as server:
        config = load_config(write(tmp_path, server.url, key[form]), env=env)
        assert config.provider_config("vllm").api_key == CANARY
        texts += [repr(config), repr(redacted(config)), repr(config.providers)]
        texts += [str(i) for i in validate_config(config)]
        registry = default_registry(config)
        for name in ("local", "vllm", "openai-compatible", "lmstudio"):
            provider: Any = registry.get(name)
            texts.append(repr(provider))
            request = ProviderRequest("m", [Message.user("hi")])
            texts += [repr(e) for e in provider.chat_stream(request)]
            try:
                provider.chat(request)
            except OllmError as exc:
                texts += [str(exc), repr(exc), repr(exc.details)]
            provider.close()
        if importlib.util.find_spec("ollm_lite.providers.gemini") is not None:
            texts.append(repr(registry.get("gemini")))
        sent = [" ".join(r.headers.values()) for r in server.requests]
    assert sent and all(CANARY in s for s in sent)  # the key was really used
    leaks = [t for t in texts + records.texts if CANARY in t]
    assert leaks == [], leaks[:3]
    no_leaks()


def test_bad_values_beside_the_key_are_reported_without_it(tmp_path: Path) -> None:
    """``validate_config`` names the bad fields of a section holding the key, never the key."""
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
provider = "vllm"
[providers.vllm]
base_url = "ftp://gpu-box"
api_key = "{CANARY}"
timeout = "soon"
api_kee = "x"
[providers.openai-compatible]
backend = "lmstudioo"
api_key = "{CANARY}"
"""
    )
    config = load_config(path, env={})
    issues = validate_config(config)
    assert len(issues) >= 4
    texts = [str(i) for i in issues] + [repr(config), repr(redacted(config))]
    assert [t for t in texts if CANARY in t] == []


def test_key_pasted_into_other_fields_is_not_echoed(tmp_path: Path) -> None:
    """The key misplaced into other fields is still a secret: no issue or repr shows it."""
    path = tmp_path / "config.toml"
    path.write_text(
        f"""
provider = "vllm"
[providers.vllm]
base_url = "ftp://{CANARY}@host"
api_key = "{CANARY}"
timeout = "{CANARY}"
api_kee = "{CANARY}"
[providers.openai-compatible]
backend = "{CANARY}"
api_key = {{ secret = "{CANARY}" }}
"""
    )
    config = load_config(path, env={})
    issues = validate_config(config)
    assert len(issues) >= 3
    texts = [str(i) for i in issues] + [repr(config), repr(redacted(config))]
    assert [t for t in texts if CANARY in t] == []


@pytest.mark.parametrize(
    "body",
    [
        f'[providers.vllm]\napi_key = "{CANARY}\n',  # unterminated string
        f'[providers.vllm]\napi_key = "{CANARY}" garbage\n',
        f'[providers.vllm]\napi_key = "{CANARY}"\napi_key = "{CANARY}"\n',  # duplicate key
        '[providers.vllm]\napi_key = "${NOT_SET_ANYWHERE}"\n',
    ],
    ids=["unterminated", "trailing-garbage", "duplicate", "unset-var"],
)
def test_unreadable_config_errors_do_not_quote_the_key(tmp_path: Path, body: str) -> None:
    """``ConfigError`` for a malformed file says where, never what the key was."""
    path = tmp_path / "config.toml"
    path.write_text(body)
    with pytest.raises(ConfigError) as info:
        load_config(path, env={})
    texts = [str(info.value), repr(info.value), repr(info.value.details)]
    cause = info.value.__cause__
    if cause is not None:
        texts.append(str(cause))
    assert [t for t in texts if CANARY in t] == []
