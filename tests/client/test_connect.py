"""``connect()`` reads the configuration as the CLI does; clients close and reopen.

File, environment, then keyword arguments (the same precedence as ``ollm-lite`` flags); a
provider object is used as given; ``with connect() as llm`` closes the connections and a later
call opens new ones.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.ollama_support import final, lines, serve, stream

import ollm_lite
from ollm_lite import (
    Config,
    ConfigError,
    LocalProvider,
    OpenAICompatibleProvider,
    ProviderNotFound,
    ScriptedProvider,
    VllmProvider,
)
from ollm_lite.client import Client
from ollm_lite.fleet import Fleet


def write_config(folder: Path, text: str) -> Path:
    path = folder / "ollm" / "config.toml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def test_nothing_configured_is_ollama_on_its_default_port() -> None:
    llm = ollm_lite.connect()
    assert isinstance(llm, Client)
    assert isinstance(llm.provider, LocalProvider)
    assert llm.provider.base_url == "http://localhost:11434"
    assert llm.model is None


def test_the_config_file_is_read(isolated_config: Path) -> None:
    write_config(
        isolated_config,
        'provider = "vllm"\nmodel = "qwen"\n[providers.vllm]\nbase_url = "http://gpu:8000"\n',
    )
    llm = ollm_lite.connect()
    assert isinstance(llm.provider, VllmProvider)
    assert llm.provider.base_url == "http://gpu:8000"
    assert llm.model == "qwen"


def test_the_environment_beats_the_file(
    isolated_config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_config(isolated_config, 'model = "from-file"\n')
    monkeypatch.setenv("OLLM_MODEL", "from-env")
    monkeypatch.setenv("OLLAMA_HOST", "http://box:11434")
    llm = ollm_lite.connect()
    assert llm.model == "from-env"
    assert isinstance(llm.provider, LocalProvider)
    assert llm.provider.base_url == "http://box:11434"


def test_keywords_beat_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLM_PROVIDER", "local")
    monkeypatch.setenv("OLLM_MODEL", "env-model")
    llm = ollm_lite.connect("vllm", host="http://gpu:8000", model="qwen2.5-7b")
    assert isinstance(llm.provider, VllmProvider)
    assert llm.provider.base_url == "http://gpu:8000"
    assert llm.model == "qwen2.5-7b"


def test_a_backend_alias_selects_its_preset() -> None:
    llm = ollm_lite.connect("llamacpp", host="http://127.0.0.1:8080")
    assert isinstance(llm.provider, OpenAICompatibleProvider)
    assert llm.provider.backend.name == "llamacpp"


def test_an_explicit_config_path_and_a_config_object(tmp_path: Path) -> None:
    path = write_config(tmp_path, 'provider = "lmstudio"\nmodel = "m1"\n')
    by_path = ollm_lite.connect(config=path)
    assert isinstance(by_path.provider, OpenAICompatibleProvider)
    assert by_path.provider.backend.name == "lmstudio"
    config = Config(provider="local", model="m2")
    by_object = ollm_lite.connect(config=config, host="http://other:11434")
    assert isinstance(by_object.provider, LocalProvider)
    assert by_object.provider.base_url == "http://other:11434"
    assert by_object.model == "m2"
    assert config.providers == {}  # the caller's Config is not changed


def test_an_invalid_configuration_is_a_config_error(isolated_config: Path) -> None:
    write_config(isolated_config, '[providers.local]\nbase_url = "not a url"\n')
    with pytest.raises(ConfigError) as raised:
        ollm_lite.connect()
    assert "providers.local.base_url" in raised.value.message


def test_an_unknown_provider_name() -> None:
    with pytest.raises(ProviderNotFound) as raised:
        ollm_lite.connect("olama")
    assert raised.value.code == "PROVIDER_NOT_FOUND"


def test_a_provider_object_is_used_as_given() -> None:
    provider = ScriptedProvider(["hi"])
    llm = ollm_lite.connect(provider)
    assert llm.provider is provider
    assert llm.ask("x") == "hi"
    assert llm.model == "scripted"  # the provider's only model, asked on first use


def test_host_with_a_provider_object_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        ollm_lite.connect(ScriptedProvider(), host="http://x:1")
    with pytest.raises(ConfigError):
        ollm_lite.connect(42)  # type: ignore[arg-type]


def test_hosts_with_one_host_and_with_several() -> None:
    llm = ollm_lite.connect("vllm", hosts=["http://one:8000"])
    assert isinstance(llm.provider, VllmProvider)
    assert llm.provider.base_url == "http://one:8000"
    fleet = ollm_lite.connect("vllm", hosts=["http://one:8000", "http://two:8000"], per_host=2)
    assert isinstance(fleet.provider, Fleet)
    assert [type(p) for p in fleet.provider.providers] == [VllmProvider, VllmProvider]
    assert [s.url for s in fleet.provider.status()] == ["http://one:8000", "http://two:8000"]
    assert fleet.provider.capacity == 4


def answer() -> object:
    return stream(
        lines(
            [
                {"model": "m", "message": {"role": "assistant", "content": "hi"}, "done": False},
                final("m", 1),
            ]
        )
    )


def test_close_then_a_later_call_opens_a_new_connection() -> None:
    with serve({("POST", "/api/chat"): answer()}) as server:
        with ollm_lite.connect("ollama", host=server.url, model="m") as llm:
            assert llm.ask("a") == "hi"
            assert llm.ask("b") == "hi"
            pooled = len(server._clients)
        assert pooled == 1  # one pooled connection for both calls
        assert llm.ask("c") == "hi"  # after close: works, on a new connection
        assert len(server._clients) == 2
        llm.close()


def test_providers_are_context_managers() -> None:
    with ScriptedProvider(["x"]) as provider:
        assert provider.remaining == 1
    with LocalProvider(base_url="http://127.0.0.1:9") as local:
        assert local.base_url == "http://127.0.0.1:9"


def test_resolved_model_and_context_limits(isolated_config: Path) -> None:
    write_config(isolated_config, '[context_limits]\n"scripted" = 2048\n')
    llm = ollm_lite.connect(ScriptedProvider(["x"]))
    assert llm.model is None
    assert llm.resolved_model() == "scripted"
    assert llm.model == "scripted"
    assert llm.context_limits == {"scripted": 2048}


def test_the_configs_options_are_every_calls_defaults(isolated_config: Path) -> None:
    """``[options]`` applies to every call that sets none; ``connect(**options)`` and the call's
    own keywords win; without the table nothing is added; ``extra_body`` merges key by key."""
    write_config(
        isolated_config,
        "[options]\nmax_tokens = 512\ntemperature = 0.5\nthink = false\n"
        "[options.extra_body]\nmirostat = 1\n",
    )
    provider = ScriptedProvider(["a", "b", "c", "d"])
    llm = ollm_lite.connect(provider, model="m")
    llm.ask("one")
    llm.ask("two", max_tokens=7)
    assert [r.options.max_tokens for r in provider.requests] == [512, 7]
    assert provider.requests[0].options.temperature == 0.5
    assert provider.requests[0].options.extra_body == {"mirostat": 1}
    assert provider.requests[0].think is False
    ollm_lite.connect(provider, model="m", temperature=0.9, extra_body={"x": 2}).ask("three")
    last = provider.requests[-1].options
    assert (last.max_tokens, last.temperature, last.extra_body) == (
        512,
        0.9,
        {"mirostat": 1, "x": 2},
    )
    write_config(isolated_config, 'model = "m"\n')  # the line removed: no limit any more
    ollm_lite.connect(provider).ask("four")
    assert provider.requests[-1].options.max_tokens is None


def test_a_bad_options_table_is_a_config_error_at_connect(isolated_config: Path) -> None:
    write_config(isolated_config, "[options]\nmax_tokens = -1\n")
    with pytest.raises(ConfigError, match=r"options\.max_tokens"):
        ollm_lite.connect()
    with pytest.raises(ConfigError, match=r"options\.max_tokens"):
        ollm_lite.connect(ScriptedProvider(["x"]), model="m")  # no TypeError, no late failure
    write_config(isolated_config, "[options]\nkeep_alive = '5m'\n")
    with pytest.raises(ConfigError, match=r"options\.keep_alive: unknown key"):
        ollm_lite.connect(ScriptedProvider(["x"]), model="m")
