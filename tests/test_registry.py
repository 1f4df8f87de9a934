"""ProviderRegistry and default_registry: names, aliases, presets, defaults, laziness."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, strategies as st

from ollm_lite.config import load_config
from ollm_lite.errors import ConfigError, ProviderNotFound
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.registry import ProviderRegistry, default_registry

NAMES = st.lists(
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz-", min_size=1, max_size=10), max_size=8
)


@given(NAMES)
def test_register_then_get_returns_the_same_instance(names: list[str]) -> None:
    """Provider registration and retrieval: Provider Registration and Retrieval."""
    registry = ProviderRegistry()
    adapters = {name: ScriptedProvider(name=name) for name in names}
    for adapter in adapters.values():
        registry.register(adapter)
    for name, adapter in adapters.items():
        assert registry.get(name) is adapter


@given(NAMES.filter(bool), st.data())
def test_default_resolution(names: list[str], data: st.DataObject) -> None:
    """The default is what get_default() and get() without a name return."""
    registry = ProviderRegistry()
    for name in names:
        registry.register(ScriptedProvider(name=name))
    chosen = data.draw(st.sampled_from(names))
    registry.set_default(chosen)
    assert registry.get_default() is registry.get(chosen)
    assert registry.get() is registry.get(chosen)


@given(NAMES)
def test_list_is_complete_without_duplicates(names: list[str]) -> None:
    """Provider listing: list() returns exactly the registered names, once each."""
    registry = ProviderRegistry()
    for name in names:
        registry.register(ScriptedProvider(name=name))
        registry.register(ScriptedProvider(name=name))  # re-registering replaces
    if names:
        registry.alias("an-alias-name", names[0])
    assert sorted(registry.list()) == sorted(set(names))


def test_aliases_resolve_first_and_unknown_names() -> None:
    registry = ProviderRegistry()
    local = ScriptedProvider(name="local")
    registry.register(local, aliases=["ollama"])
    assert registry.resolve("ollama") == "local"
    assert registry.get("ollama") is local
    assert registry.get("missing") is None
    assert registry.get() is None  # no default yet
    with pytest.raises(ProviderNotFound) as info:
        registry.set_default("missing")
    assert info.value.code == "PROVIDER_NOT_FOUND"
    with pytest.raises(ProviderNotFound):
        registry.get_default()
    with pytest.raises(ProviderNotFound):
        registry.alias("x", "missing")


def test_default_registry_names_aliases_and_default() -> None:
    registry = default_registry()
    assert sorted(registry.list()) == ["anthropic", "gemini", "local", "openai-compatible", "vllm"]
    assert registry.resolve("ollama") == "local"
    assert registry.resolve("claude") == "anthropic"
    for preset in ("lmstudio", "localai", "kobold", "llamacpp"):
        assert registry.resolve(preset) == "openai-compatible"
    assert registry.default_name == "local"


def test_default_registry_builds_nothing_until_asked() -> None:
    code = (
        "import sys\n"
        "from ollm_lite.registry import default_registry\n"
        "r = default_registry()\n"
        "assert 'requests' not in sys.modules, 'requests imported too early'\n"
        "p = r.get('ollama')\n"
        "assert p.name == 'local' and 'requests' in sys.modules\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_default_registry_uses_config() -> None:
    from ollm_lite.config import Config, ProviderConfig

    config = Config(
        provider="ollama",
        providers={"local": ProviderConfig(base_url="http://gpu-box:11434")},
    )
    registry = default_registry(config)
    assert registry.default_name == "local"
    provider = registry.get_default()
    assert "gpu-box:11434" in repr(provider)


def test_a_preset_set_as_default_stays_that_preset() -> None:
    from ollm_lite.config import Config

    registry = default_registry(Config(provider="lmstudio"))
    assert registry.default_name == "openai-compatible"
    default = registry.get()
    assert default is registry.get("lmstudio")
    assert default.backend.name == "lmstudio"  # type: ignore[union-attr]


def test_default_registry_without_config_reads_what_the_cli_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One rule for every entry point: $OLLM_PROVIDER and the config file, as load_config."""
    monkeypatch.setenv("OLLM_PROVIDER", "llamacpp")
    monkeypatch.setenv("OPENAI_COMPATIBLE_HOST", "http://127.0.0.1:9")
    registry = default_registry()
    assert registry.default_name == load_config().provider == "openai-compatible"
    adapter: Any = registry.get_default()
    assert (adapter.backend.name, adapter.base_url) == ("llamacpp", "http://127.0.0.1:9")
    monkeypatch.delenv("OLLM_PROVIDER")
    monkeypatch.delenv("OPENAI_COMPATIBLE_HOST")
    file = tmp_path / "config.toml"
    file.write_text('provider = "vllm"\n[providers.vllm]\nbase_url = "http://gpu:8000"\n')
    monkeypatch.setenv("OLLM_CONFIG", str(file))
    registry = default_registry()
    assert registry.default_name == "vllm"
    assert registry.get_default().base_url == "http://gpu:8000"  # type: ignore[attr-defined]


def test_default_registry_without_config_reports_a_bad_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration file that cannot be read is a ConfigError, as for the command line."""
    file = tmp_path / "config.toml"
    file.write_text("provider = [unclosed\n")
    monkeypatch.setenv("OLLM_CONFIG", str(file))
    with pytest.raises(ConfigError) as info:
        default_registry()
    assert info.value.code == "CONFIG_INVALID"


def test_default_registry_with_nothing_configured_is_ollama() -> None:
    """No file, no variables (the suite's conftest sees to that): Ollama, as before."""
    assert default_registry().default_name == "local"
