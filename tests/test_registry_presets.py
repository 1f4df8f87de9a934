"""default_registry: backend presets and their settings, lazy building, errors of factories."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest

from ollm_lite.chat import ChatClient
from ollm_lite.config import Config, ProviderConfig
from ollm_lite.errors import ConfigError, ProviderNotFound
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.registry import OPENAI_COMPATIBLE_PRESETS, ProviderRegistry, default_registry
from ollm_lite.types import ChatFinishEvent, ErrorEvent


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OPENAI_COMPATIBLE_HOST", "OPENAI_COMPATIBLE_API_KEY", "OLLAMA_HOST", "VLLM_HOST"):
        monkeypatch.delenv(var, raising=False)


def test_every_preset_is_its_own_instance_with_its_backend() -> None:
    registry = default_registry()
    generic: Any = registry.get("openai-compatible")
    assert generic.backend.name == "generic"
    seen = {id(generic)}
    for preset in OPENAI_COMPATIBLE_PRESETS:
        provider: Any = registry.get(preset)
        assert provider.backend.name == preset
        assert registry.get(preset) is provider  # built once
        seen.add(id(provider))
    assert len(seen) == len(OPENAI_COMPATIBLE_PRESETS) + 1
    assert "lmstudio" not in registry.list()  # presets are aliases, not providers


def test_presets_take_the_openai_compatible_section_unless_they_have_their_own() -> None:
    config = Config(
        providers={
            "openai-compatible": ProviderConfig(
                base_url="http://shared-box:8080/v1", backend="llamacpp"
            ),
            "kobold": ProviderConfig(base_url="http://kobold-box:5001"),
        }
    )
    registry = default_registry(config)
    generic: Any = registry.get("openai-compatible")
    lmstudio: Any = registry.get("lmstudio")
    kobold: Any = registry.get("kobold")
    assert generic.backend.name == "llamacpp"  # the section's backend picks the preset
    assert "shared-box:8080" in generic.base_url
    assert (lmstudio.backend.name, "shared-box:8080" in lmstudio.base_url) == ("lmstudio", True)
    assert (kobold.backend.name, "kobold-box:5001" in kobold.base_url) == ("kobold", True)


def test_a_preset_without_settings_uses_its_backends_default_address() -> None:
    lmstudio: Any = default_registry().get("lmstudio")
    assert lmstudio.base_url.endswith(":1234")


def test_a_bad_setting_surfaces_on_get_and_as_an_error_event_in_chat() -> None:
    config = Config(providers={"vllm": ProviderConfig(base_url="ftp://nowhere")})
    registry = default_registry(config)
    with pytest.raises(ConfigError) as info:
        registry.get("vllm")
    assert info.value.code == "CONFIG_INVALID"
    events = list(ChatClient(registry, model="m").chat("hi", provider="vllm"))
    assert isinstance(events[0], ErrorEvent) and events[0].error.code == "CONFIG_INVALID"
    assert events[-1] == ChatFinishEvent("error")


def test_a_missing_gemini_module_is_provider_not_found(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ollm_lite.providers.gemini", None)  # type: ignore[arg-type]
    registry = default_registry()
    with pytest.raises(ProviderNotFound) as info:
        registry.get("gemini")
    assert info.value.code == "PROVIDER_NOT_FOUND"


def test_a_lazy_provider_is_built_once_under_concurrent_gets() -> None:
    built: list[ScriptedProvider] = []

    def factory() -> ScriptedProvider:
        provider = ScriptedProvider(name="slow")
        threading.Event().wait(0.02)
        built.append(provider)
        return provider

    registry = ProviderRegistry()
    registry.register_factory("slow", factory, aliases=["s"])
    got: list[object] = []
    threads = [
        threading.Thread(target=lambda i=i: got.append(registry.get("s" if i % 2 else "slow")))
        for i in range(16)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(built) == 1
    assert all(p is built[0] for p in got) and len(got) == 16


def test_registering_over_a_lazy_entry_replaces_it() -> None:
    registry = ProviderRegistry()
    registry.register_factory("x", lambda: ScriptedProvider(name="x"))
    real = ScriptedProvider(name="x")
    registry.register(real)
    assert registry.get("x") is real
    assert registry.list() == ["x"]


def test_the_configurations_other_spellings_resolve_and_share_instances() -> None:
    registry = default_registry()
    assert registry.resolve("google") == "gemini"
    assert registry.resolve("openai-compat") == "openai-compatible"
    assert registry.get("openai_compatible") is registry.get("openai-compatible")
    kobold: Any = registry.get("kobold")
    assert registry.get("koboldcpp") is kobold and kobold.backend.name == "kobold"
    llamacpp: Any = registry.get("llama.cpp")
    assert registry.get("llamacpp") is llamacpp and llamacpp.backend.name == "llamacpp"
    assert registry.get("claude") is registry.get("anthropic")
    assert sorted(registry.list()) == ["anthropic", "gemini", "local", "openai-compatible", "vllm"]


def test_a_spelling_set_as_default_fetches_its_preset() -> None:
    registry = default_registry(Config(provider="koboldcpp"))
    default: Any = registry.get()
    assert default is registry.get("kobold")
    assert default.backend.name == "kobold"


def test_a_loaded_config_selecting_a_preset_gives_that_backend(tmp_path: Any) -> None:
    from ollm_lite.config import load_config

    path = tmp_path / "ollm.toml"
    path.write_text(
        'provider = "lmstudio"\n[providers.lmstudio]\nbase_url = "http://studio:1234"\n'
    )
    config = load_config(path, env={})
    registry = default_registry(config)
    default: Any = registry.get()
    assert default.backend.name == "lmstudio"
    assert "studio:1234" in default.base_url
