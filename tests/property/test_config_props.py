"""Configuration properties: the precedence matrix and ``${VAR}`` expansion round trips."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given, settings, strategies as st

from ollm_lite.config import PROVIDERS, expand_vars, load_config, validate_config

LAYERS = ("default", "file", "env", "flag")

# Each setting: where it lives in the file, the environment variable, the CLI override.
SETTINGS: dict[str, tuple[str, str, str]] = {
    "model": ("model", "OLLM_MODEL", "model"),
    "local.base_url": ("providers.local.base_url", "OLLAMA_HOST", "providers.local.base_url"),
    "vllm.base_url": ("providers.vllm.base_url", "VLLM_HOST", "providers.vllm.base_url"),
    "vllm.api_key": ("providers.vllm.api_key", "VLLM_API_KEY", "providers.vllm.api_key"),
    "oc.base_url": (
        "providers.openai-compatible.base_url",
        "OPENAI_COMPATIBLE_HOST",
        "providers.openai-compatible.base_url",
    ),
    "oc.api_key": (
        "providers.openai-compatible.api_key",
        "OPENAI_COMPATIBLE_API_KEY",
        "providers.openai-compatible.api_key",
    ),
    "gemini.api_key": ("providers.gemini.api_key", "GEMINI_API_KEY", "providers.gemini.api_key"),
}


def value_for(setting: str, layer: str) -> str:
    if setting.endswith("base_url"):
        return f"http://{layer}-{setting.split('.')[0]}:1"
    return f"{layer}-{setting}"


def put(tree: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    for part in parents:
        tree = tree.setdefault(part, {})
    tree[leaf] = value


def get(config: Any, dotted: str) -> Any:
    if dotted == "model":
        return config.model
    _, name, key = dotted.split(".")
    section = config.providers.get(name)
    return None if section is None else getattr(section, key)


def toml_of(tree: dict[str, Any]) -> str:
    lines = [f'{k} = "{v}"' for k, v in tree.items() if not isinstance(v, dict)]
    for name, section in tree.get("providers", {}).items():
        lines.append(f"[providers.{name}]")
        lines += [f'{k} = "{v}"' for k, v in section.items()]
    return "\n".join(lines) + "\n"


presence = st.fixed_dictionaries(
    {s: st.sets(st.sampled_from(LAYERS[1:])) for s in SETTINGS}
    | {"provider": st.dictionaries(st.sampled_from(LAYERS[1:]), st.sampled_from(PROVIDERS))}
)


@settings(max_examples=150, deadline=None)
@given(presence)
def test_precedence_matrix(present: dict[str, Any]) -> None:
    """Every setting comes from the highest layer that sets it: flags > env > file > defaults."""
    file_tree: dict[str, Any] = {}
    env: dict[str, str] = {}
    flags: dict[str, Any] = {}
    for setting, (file_path, env_var, flag_path) in SETTINGS.items():
        layers = present[setting]
        if "file" in layers:
            put(file_tree, file_path, value_for(setting, "file"))
        if "env" in layers:
            env[env_var] = value_for(setting, "env")
        if "flag" in layers:
            put(flags, flag_path, value_for(setting, "flag"))
    providers = present["provider"]
    if "file" in providers:
        file_tree["provider"] = providers["file"]
    if "env" in providers:
        env["OLLM_PROVIDER"] = providers["env"]
    if "flag" in providers:
        flags["provider"] = providers["flag"]

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.toml"
        path.write_text(toml_of(file_tree))
        config = load_config(path, env=env, overrides=flags)

    for setting, (file_path, _, _) in SETTINGS.items():
        winner = max(present[setting], key=LAYERS.index, default="default")
        expected = None if winner == "default" else value_for(setting, winner)
        assert get(config, file_path) == expected, setting
    winner = max(providers, key=LAYERS.index, default="default")
    assert config.provider == (providers[winner] if winner != "default" else "local")
    issues = [i for i in validate_config(config) if i.path != "providers.gemini.api_key"]
    assert issues == []


@settings(max_examples=100, deadline=None)
@given(
    st.sampled_from(PROVIDERS),
    st.sampled_from(LAYERS[1:]),
    st.sampled_from(("file", "env", "none")),
)
def test_host_flag_beats_every_layer_for_the_selected_provider(
    provider: str, provider_layer: str, url_layer: str
) -> None:
    """--host (override base_url) wins for whichever provider ends up selected."""
    env_var = {
        "local": "OLLAMA_HOST",
        "vllm": "VLLM_HOST",
        "openai-compatible": "OPENAI_COMPATIBLE_HOST",
        "gemini": None,
    }[provider]
    file_text = ""
    env: dict[str, str] = {}
    flags: dict[str, Any] = {"base_url": "http://flag:9"}
    if provider_layer == "file":
        file_text += f'provider = "{provider}"\n'
    elif provider_layer == "env":
        env["OLLM_PROVIDER"] = provider
    else:
        flags["provider"] = provider
    if url_layer == "file":
        file_text += f'[providers.{provider}]\nbase_url = "http://file:1"\n'
    elif url_layer == "env" and env_var:
        env[env_var] = "http://env:1"
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(file_text)
        config = load_config(path, env=env, overrides=flags)
    assert config.provider == provider
    assert config.providers[provider].base_url == "http://flag:9"


names = st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True)
plain = st.text(st.characters(blacklist_characters="$"), max_size=20)


@given(st.lists(st.tuples(plain, names), max_size=4), plain, st.dictionaries(names, plain))
def test_expansion_substitutes_exactly(
    pieces: list[tuple[str, str]], tail: str, env: dict[str, str]
) -> None:
    """Text without ``$`` is kept verbatim; each ``${NAME:-d}`` becomes the value or d."""
    text = "".join(f"{lit}${{{name}:-dflt}}" for lit, name in pieces) + tail
    expected = "".join(lit + (env.get(name) or "dflt") for lit, name in pieces) + tail
    assert expand_vars(text, env) == expected


@given(plain)
def test_escaped_references_survive(text: str) -> None:
    """``$${...}`` always yields a literal ``${...}`` whatever the environment."""
    assert expand_vars(f"$${{{text.replace('}', '')}}}", {}) == f"${{{text.replace('}', '')}}}"
