"""Configuration properties: the precedence matrix, ``${VAR}`` expansion round trips, malformed
``${`` references and base URL forms."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import assume, given, settings, strategies as st

from ollm_lite.config import (
    PROVIDERS,
    Config,
    ProviderConfig,
    expand_vars,
    load_config,
    validate_config,
)
from ollm_lite.errors import ConfigError
from ollm_lite.http.urls import normalize_base_url
from ollm_lite.providers._ollama_wire import parse_ollama_host

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
        "anthropic": "ANTHROPIC_BASE_URL",
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


# --------------------------------------------------------------------------- malformed ${


malformed_refs = st.one_of(
    st.just("${"),
    names.map(lambda n: "${" + n),  # unterminated
    st.just("${}"),
    st.from_regex(r"\$\{[0-9][A-Z0-9_]{0,4}\}", fullmatch=True),  # starts with a digit
    st.tuples(names, names).map(lambda p: f"${{{p[0]} {p[1]}}}"),  # a blank inside
    names.map(lambda n: f"${{{n}:default}}"),  # ':' without '-'
)
ref_free = st.text(st.characters(exclude_characters="${}", exclude_categories=("Cs",)), max_size=10)
fields = st.sampled_from(
    ["model", "providers.vllm.base_url", "providers.vllm.api_key", "providers.local.backend"]
)


@settings(max_examples=100, deadline=None)
@given(fields, ref_free, malformed_refs, ref_free, st.dictionaries(names, ref_free, max_size=3))
def test_malformed_references_load_verbatim_and_are_reported(
    field: str, before: str, ref: str, after: str, env: dict[str, str]
) -> None:
    """README, Configuration: a malformed ``${`` never makes load_config raise; the value is kept as
    written and validate_config reports it at its dotted path, without quoting a key."""
    value = before + ref + after
    tree: dict[str, Any] = {}
    put(tree, field, value)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "config.toml"
        path.write_text(toml_of_escaped(tree))
        config = load_config(path, env=env)
    # API keys lose surrounding whitespace (README: a key file keeps its trailing newline).
    assert get(config, field) == (value.strip() if field.endswith("api_key") else value)
    issues = validate_config(config)
    mine = [i for i in issues if i.path == field]
    assert len(mine) >= 1
    unsendable = "it cannot be sent in a header"
    assert all(
        "unterminated '${'" in i.message
        or "bad variable reference" in i.message
        or (field.endswith("api_key") and unsendable in i.message)
        for i in mine
    )
    assert any(unsendable not in i.message for i in mine)
    if field.endswith("api_key"):  # nothing of the value is quoted
        assert {i.message.split(": it cannot")[0] for i in mine} <= {
            "unterminated '${' (write $${ for a literal ${)",
            "bad variable reference: expected ${NAME} or ${NAME:-default}",
            "holds a leading or trailing blank or line break",
            "holds a control character",
            "holds a character outside Latin-1",
        }


def toml_of_escaped(tree: dict[str, Any]) -> str:
    """Like ``toml_of`` but with every string escaped (any text survives)."""
    lines = [f"{k} = {toml_str(v)}" for k, v in tree.items() if not isinstance(v, dict)]
    for name, section in tree.get("providers", {}).items():
        lines.append(f"[providers.{name}]")
        lines += [f"{k} = {toml_str(v)}" for k, v in section.items()]
    return "\n".join(lines) + "\n"


def toml_str(text: str) -> str:
    def escape(ch: str) -> str:
        if ch in '"\\':
            return "\\" + ch
        return f"\\u{ord(ch):04x}" if ord(ch) < 0x20 or ord(ch) == 0x7F else ch

    return '"' + "".join(map(escape, text)) + '"'


# --------------------------------------------------------------------------- base URLs

host_names = st.from_regex(r"[a-z][a-z0-9-]{0,10}(\.[a-z][a-z0-9-]{0,6}){0,2}", fullmatch=True)
hosts = st.one_of(
    host_names.filter(lambda h: h not in ("http", "https")),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(lambda ip: f"[{ip}]"),
)
ports = st.one_of(st.just(""), st.integers(1, 65535).map(lambda p: f":{p}"))
url_paths = st.one_of(st.just(""), st.just("/"), st.from_regex(r"/[a-z0-9/]{1,12}", fullmatch=True))
userinfo = st.one_of(st.just(""), st.from_regex(r"[a-z]{1,5}:[a-z0-9]{1,8}@", fullmatch=True))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["", "http://", "https://", "HTTP://"]), userinfo, hosts, ports, url_paths)
def test_every_ollama_host_form_is_a_valid_base_url(
    scheme: str, user: str, host: str, port: str, path: str
) -> None:
    """host, host:port, [v6]:port, user:pw@host, with or without http(s)://, with a path: the
    provider accepts it (Ollama's OLLAMA_HOST rules) and so does validate_config, for every
    provider."""
    url = f"{scheme}{user}{host}{port}{path}"
    parse_ollama_host(url)  # the local provider's own reading: no error
    for provider in ("local", "vllm", "openai-compatible"):
        config = Config(providers={provider: ProviderConfig(base_url=url)})
        assert validate_config(config) == [], (provider, url)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["http", "https", "HTTP", "htp", "http2", "ftp", "hxxp"]),
    st.sampled_from([":/", "//", ":"]),
    userinfo,
    hosts,
    ports,
    url_paths,
)
def test_a_mangled_scheme_separator_is_always_reported(
    scheme: str, separator: str, user: str, host: str, port: str, path: str
) -> None:
    """``scheme:/rest``, ``scheme//rest`` (and ``http:rest``) are never read as a host name;
    the issue names the field and never shows the user-info."""
    assume(separator != ":" or scheme.lower() in ("http", "https"))
    url = f"{scheme}{separator}{user}{host}{port}{path}"
    for provider in ("local", "vllm", "openai-compatible"):
        issues = validate_config(Config(providers={provider: ProviderConfig(base_url=url)}))
        assert [i.path for i in issues] == [f"providers.{provider}.base_url"], url
        assert issues[0].message.startswith("malformed URL ")
        if user:
            assert user not in issues[0].message


url_texts = st.one_of(
    st.text(alphabet="htps:/@[]0123456789.abc-_ ?#%", max_size=30),
    st.builds(
        "".join,
        st.tuples(
            st.sampled_from(["", "http://", "https://", "http:/", "http//", "ftp://", ":"]),
            userinfo,
            hosts,
            st.sampled_from(["", ":", ":0", ":80", ":99999", ":x"]),
            url_paths,
        ),
    ),
)


@settings(max_examples=300, deadline=None)
@given(url_texts)
def test_providers_and_validation_read_base_urls_alike(url: str) -> None:
    """One parser: a base URL a provider refuses (CONFIG_INVALID) is exactly one that
    validate_config reports, for the same reason."""
    issues = validate_config(Config(providers={"vllm": ProviderConfig(base_url=url)}))
    try:
        normalize_base_url(url)
    except ConfigError as exc:
        assert [i.path for i in issues] == ["providers.vllm.base_url"], (url, exc.message)
        assert issues[0].message.endswith(exc.message.partition(": ")[2])
    else:
        assert issues == [], url
