"""``ollm_lite.config``: file discovery, ``${VAR}`` expansion, aliases, validation messages."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from ollm_lite.config import (
    BACKENDS,
    ENV_VARS,
    PROVIDER_ALIASES,
    Config,
    ConfigIssue,
    ProviderConfig,
    canonical_provider,
    config_path,
    env_default,
    expand_vars,
    load_config,
    redacted,
    validate_config,
)
from ollm_lite.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "config.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def paths(issues: list[ConfigIssue]) -> list[str]:
    return [issue.path for issue in issues]


# --------------------------------------------------------------------------- discovery


def test_nothing_configured_gives_local_and_no_sections(tmp_path: Path) -> None:
    """With no file and no variables the provider is local and nothing else is set."""
    config = load_config(env={"HOME": str(tmp_path)})
    assert config == Config()
    assert config.provider == "local"
    assert config.source is None
    assert validate_config(config) == []


def test_file_location_order(tmp_path: Path) -> None:
    """path argument > $OLLM_CONFIG > $XDG_CONFIG_HOME > ~/.config."""
    env = {"HOME": str(tmp_path / "home")}
    assert config_path(None, env) == (tmp_path / "home/.config/ollm/config.toml", False)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg")
    assert config_path(None, env) == (tmp_path / "xdg/ollm/config.toml", False)
    env["OLLM_CONFIG"] = str(tmp_path / "named.toml")
    assert config_path(None, env) == (tmp_path / "named.toml", True)
    assert config_path(tmp_path / "arg.toml", env) == (tmp_path / "arg.toml", True)


def test_reads_xdg_and_home_locations(tmp_path: Path) -> None:
    """The default locations are read when they exist."""
    home_file = tmp_path / "home/.config/ollm/config.toml"
    home_file.parent.mkdir(parents=True)
    home_file.write_text('model = "from-home"\n')
    assert load_config(env={"HOME": str(tmp_path / "home")}).model == "from-home"
    xdg_file = tmp_path / "xdg/ollm/config.toml"
    xdg_file.parent.mkdir(parents=True)
    xdg_file.write_text('model = "from-xdg"\n')
    env = {"HOME": str(tmp_path / "home"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    config = load_config(env=env)
    assert config.model == "from-xdg"
    assert config.source == str(xdg_file)


def test_ollm_config_variable_names_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, 'provider = "vllm"\n', "x.toml")
    config = load_config(env={"OLLM_CONFIG": str(path), "HOME": str(tmp_path)})
    assert config.provider == "vllm"
    assert config.source == str(path)


def test_named_file_missing_is_an_error(tmp_path: Path) -> None:
    """A file named explicitly that does not exist fails loudly; a default one is skipped."""
    with pytest.raises(ConfigError) as err:
        load_config(tmp_path / "nope.toml", env={})
    assert err.value.code == "CONFIG_INVALID"
    assert "nope.toml" in err.value.message
    with pytest.raises(ConfigError):
        load_config(env={"OLLM_CONFIG": str(tmp_path / "gone.toml")})


def test_malformed_toml_names_file_and_position(tmp_path: Path) -> None:
    path = write(tmp_path, 'provider = "local"\nmodel = \n')
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    assert str(path) in err.value.message
    assert "line 2" in err.value.message
    assert err.value.code == "CONFIG_INVALID"


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_bytes(b'model = "\xff"\n')
    with pytest.raises(ConfigError, match="UTF-8"):
        load_config(path, env={})


def test_unreadable_path_is_config_error(tmp_path: Path) -> None:
    """A directory where the file should be is reported, not an IsADirectoryError."""
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path, env={})


# --------------------------------------------------------------------------- ${VAR}


@pytest.mark.parametrize(
    ("text", "env", "expected"),
    [
        ("${A}", {"A": "x"}, "x"),
        ("pre-${A}-post", {"A": "x"}, "pre-x-post"),
        ("${A:-dflt}", {}, "dflt"),
        ("${A:-dflt}", {"A": ""}, "dflt"),
        ("${A:-dflt}", {"A": "set"}, "set"),
        ("${A:-}", {}, ""),
        ("${A}", {"A": ""}, ""),
        ("${A:-with:colon-and-dash}", {}, "with:colon-and-dash"),
        ("${A}${B}", {"A": "1", "B": "2"}, "12"),
        ("$${A}", {}, "${A}"),
        ("cost $5 and $A", {"A": "no"}, "cost $5 and $A"),
        ("no vars", {}, "no vars"),
    ],
)
def test_expand_vars(text: str, env: dict[str, str], expected: str) -> None:
    assert expand_vars(text, env) == expected


def test_unset_variable_names_it_and_the_field(tmp_path: Path) -> None:
    """An unset ${VAR} without default fails with the variable and the field path."""
    path = write(tmp_path, '[providers.vllm]\napi_key = "${MY_VLLM_KEY}"\n')
    with pytest.raises(ConfigError) as err:
        load_config(path, env={})
    assert "MY_VLLM_KEY" in err.value.message
    assert "providers.vllm.api_key" in err.value.message
    assert err.value.details["variable"] == "MY_VLLM_KEY"


@pytest.mark.parametrize("text", ["${", "x ${A", "${}", "${1A}", "${A B}", "${A:default}"])
def test_malformed_references_are_config_errors(text: str) -> None:
    with pytest.raises(ConfigError):
        expand_vars(text, {"A": "x"})


def test_malformed_references_load_as_written_and_are_reported(tmp_path: Path) -> None:
    """README, Configuration: only unreadable TOML and an unset ${VAR} raise; a malformed reference
    loads unexpanded and validate_config names the field and what is wrong, once per field."""
    path = write(
        tmp_path,
        'model = "${A B}"\n'
        '[providers.vllm]\napi_key = "abc${def"\nbase_url = "http://${H}:${"\n'
        '[providers.openai-compatible]\nbackend = "${}"\n'
        '[context_limits]\n"m" = 100\n',
    )
    config = load_config(path, env={"H": "gpu-box"})
    assert config.model == "${A B}"
    assert config.providers["vllm"].api_key == "abc${def"
    assert config.providers["vllm"].base_url == "http://${H}:${"  # nothing half-expanded
    assert config.providers["openai-compatible"].backend == "${}"
    by_path = {issue.path: issue.message for issue in validate_config(config)}
    assert len(validate_config(config)) == len(by_path) == 4
    assert "unterminated '${'" in by_path["providers.vllm.api_key"]
    assert "unterminated '${'" in by_path["providers.vllm.base_url"]
    assert "bad variable reference '${}'" in by_path["providers.openai-compatible.backend"]
    assert "bad variable reference '${A B}'" in by_path["model"]
    assert "expected ${NAME} or ${NAME:-default}" in by_path["model"]


def test_malformed_reference_in_a_key_is_not_echoed(tmp_path: Path) -> None:
    """The text of a key-like value never appears in the issue, even the reference part."""
    path = write(tmp_path, '[providers.vllm]\napi_key = "sk-${live secret 9}"\n')
    config = load_config(path, env={})
    issues = validate_config(config)
    assert paths(issues) == ["providers.vllm.api_key"]
    assert "bad variable reference" in issues[0].message
    shown = str(issues) + repr(config) + repr(redacted(config))
    assert "live secret" not in shown and "sk-" not in shown


def test_unset_variable_still_raises_beside_a_malformed_reference(tmp_path: Path) -> None:
    path = write(tmp_path, 'model = "${A B}-${NOT_SET_HERE}"\n')
    with pytest.raises(ConfigError, match="NOT_SET_HERE"):
        load_config(path, env={})


def test_config_validate_command_lists_malformed_references(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`ollm-lite config validate` reports the bad reference instead of failing to load."""
    from ollm_lite.cli import main

    for var in ("OLLM_PROVIDER", "OPENAI_COMPATIBLE_HOST"):
        monkeypatch.delenv(var, raising=False)
    path = write(tmp_path, '[providers.openai-compatible]\nbackend = "${}"\n')
    assert main(["--config", str(path), "config", "validate"]) == 1
    out = capsys.readouterr().out
    assert "providers.openai-compatible.backend: bad variable reference '${}'" in out


def test_expansion_applies_to_every_string_value(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'provider = "${P}"\nmodel = "${M:-llama3.2}"\n'
        '[providers.vllm]\nbase_url = "http://${H}:8000"\napi_key = "${K:-}"\n',
    )
    config = load_config(path, env={"P": "vllm", "H": "gpu-box"})
    assert config.provider == "vllm"
    assert config.model == "llama3.2"
    assert config.providers["vllm"].base_url == "http://gpu-box:8000"
    assert config.providers["vllm"].api_key == ""


# --------------------------------------------------------------------------- env, overrides


def test_every_environment_variable(tmp_path: Path) -> None:
    env = {
        "HOME": str(tmp_path),
        "OLLM_PROVIDER": "gemini",
        "OLLM_MODEL": "gemini-2.5-flash",
        "OLLAMA_HOST": "http://o:1",
        "OLLAMA_API_KEY": "ok",
        "VLLM_HOST": "http://v:2",
        "VLLM_API_KEY": "vk",
        "OPENAI_COMPATIBLE_HOST": "http://c:3",
        "OPENAI_COMPATIBLE_API_KEY": "ck",
        "GEMINI_API_KEY": "gk",
    }
    config = load_config(env=env)
    assert config.provider == "gemini"
    assert config.model == "gemini-2.5-flash"
    assert config.providers["local"] == ProviderConfig(base_url="http://o:1", api_key="ok")
    assert config.providers["vllm"] == ProviderConfig(base_url="http://v:2", api_key="vk")
    assert config.providers["openai-compatible"] == ProviderConfig(
        base_url="http://c:3", api_key="ck"
    )
    assert config.providers["gemini"] == ProviderConfig(api_key="gk")
    assert config.origins["providers.vllm.api_key"] == "env VLLM_API_KEY"
    assert validate_config(config) == []


def test_google_api_key_is_read_and_gemini_api_key_wins(tmp_path: Path) -> None:
    """Google's own variable works for the configuration as for the provider; the project's
    variable, listed first, wins when both are set."""
    config = load_config(env={"HOME": str(tmp_path), "GOOGLE_API_KEY": " g-key\n"})
    assert config.providers["gemini"].api_key == "g-key"
    assert config.origins["providers.gemini.api_key"] == "env GOOGLE_API_KEY"
    both = {"HOME": str(tmp_path), "GOOGLE_API_KEY": "g-key", "GEMINI_API_KEY": "gem-key"}
    config = load_config(env=both)
    assert config.providers["gemini"].api_key == "gem-key"
    assert config.origins["providers.gemini.api_key"] == "env GEMINI_API_KEY"
    assert env_default("gemini", "api_key", both) == "gem-key"


@pytest.mark.parametrize(
    "var", sorted(v for v, path in ENV_VARS.items() if ".providers" in f".{path}")
)
def test_env_default_agrees_with_load_config(var: str, tmp_path: Path) -> None:
    """What a provider built without arguments reads is what the configuration reads."""
    _, provider, key = ENV_VARS[var].split(".")
    value = "http://h:1" if key == "base_url" else "  key-1234\n"
    env = {"HOME": str(tmp_path), var: value}
    section = load_config(env=env).providers[provider]
    assert env_default(provider, key, env) == getattr(section, key) == value.strip()
    assert env_default(provider, key, {var: ""}) is None
    assert env_default(provider, key, {}) is None


def test_empty_environment_values_count_as_unset(tmp_path: Path) -> None:
    path = write(tmp_path, 'model = "file-model"\n[providers.local]\nbase_url = "http://f:1"\n')
    config = load_config(path, env={"OLLM_MODEL": "", "OLLAMA_HOST": ""})
    assert config.model == "file-model"
    assert config.providers["local"].base_url == "http://f:1"


def test_host_override_goes_to_the_finally_selected_provider(tmp_path: Path) -> None:
    """--host / --api-key apply to the provider chosen after every layer is merged."""
    path = write(tmp_path, 'provider = "vllm"\n')
    config = load_config(path, env={}, overrides={"base_url": "http://h:1", "api_key": "k"})
    assert config.providers["vllm"] == ProviderConfig(base_url="http://h:1", api_key="k")
    config = load_config(path, env={"OLLM_PROVIDER": "local"}, overrides={"base_url": "http://h:1"})
    assert config.providers["local"].base_url == "http://h:1"
    assert "vllm" not in config.providers


def test_llamacpp_alias_with_host_override() -> None:
    """The quick start's `--provider llamacpp --host URL` selects openai-compatible/llamacpp."""
    config = load_config(
        env={"HOME": "/nonexistent", "OPENAI_COMPATIBLE_HOST": "http://env:1"},
        overrides={"provider": "llamacpp", "base_url": "http://127.0.0.1:8765"},
    )
    assert config.provider == "openai-compatible"
    assert config.providers["openai-compatible"] == ProviderConfig(
        base_url="http://127.0.0.1:8765", backend="llamacpp"
    )
    assert validate_config(config) == []


def test_none_overrides_are_ignored(tmp_path: Path) -> None:
    path = write(tmp_path, 'provider = "vllm"\nmodel = "m"\n')
    config = load_config(
        path, env={}, overrides={"provider": None, "model": None, "base_url": None}
    )
    assert (config.provider, config.model) == ("vllm", "m")
    assert config.providers == {}


def test_nested_overrides_and_context_limits(tmp_path: Path) -> None:
    path = write(tmp_path, '[context_limits]\n"a" = 100\n"b" = 200\n')
    config = load_config(
        path,
        env={},
        overrides={"context_limits": {"b": 300}, "providers": {"vllm": {"timeout": 9.5}}},
    )
    assert config.context_limits == {"a": 100, "b": 300}
    assert config.providers["vllm"].timeout == 9.5


# --------------------------------------------------------------------------- aliases


@pytest.mark.parametrize(("alias", "target"), sorted(PROVIDER_ALIASES.items()))
def test_provider_aliases(alias: str, target: tuple[str, str | None]) -> None:
    env = {"HOME": "/nonexistent", "OLLM_PROVIDER": alias.upper(), "GEMINI_API_KEY": "g"}
    config = load_config(env=env)
    assert config.provider == target[0]
    if target[1] is not None:
        assert config.providers["openai-compatible"].backend == target[1]
    assert validate_config(config) == []


def test_alias_table_maps_to_canonical_section(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[providers.ollama]\nbase_url = "http://o:1"\n'
        '[providers.lmstudio]\nbase_url = "http://l:1234"\napi_key = "k"\n',
    )
    config = load_config(path, env={})
    assert config.providers["local"].base_url == "http://o:1"
    assert config.providers["openai-compatible"] == ProviderConfig(
        base_url="http://l:1234", api_key="k", backend="lmstudio"
    )
    assert validate_config(config) == []


def test_two_tables_for_one_provider_are_reported(tmp_path: Path) -> None:
    """An alias table next to its canonical table: the canonical values win, and it is flagged."""
    path = write(
        tmp_path,
        '[providers.openai-compatible]\nbase_url = "http://c:1"\nbackend = "localai"\n'
        '[providers.lmstudio]\nbase_url = "http://l:1"\n',
    )
    config = load_config(path, env={})
    assert config.providers["openai-compatible"].base_url == "http://c:1"
    assert config.providers["openai-compatible"].backend == "localai"
    issues = validate_config(config)
    assert paths(issues) == ["providers.lmstudio"]
    assert "second time" in issues[0].message


def test_backend_alias_as_provider_beats_file_backend(tmp_path: Path) -> None:
    path = write(tmp_path, '[providers.openai-compatible]\nbackend = "lmstudio"\n')
    config = load_config(path, env={"OLLM_PROVIDER": "kobold"})
    assert config.providers["openai-compatible"].backend == "kobold"


def test_canonical_provider_unknown_is_unchanged() -> None:
    assert canonical_provider("Mystery") == ("Mystery", None)
    assert canonical_provider(" Ollama ") == ("local", None)


def test_backends_match_the_provider_table() -> None:
    """The config's backend enum is the one OpenAICompatibleProvider accepts."""
    from ollm_lite.providers.backends import OPENAI_COMPATIBLE_BACKENDS
    from ollm_lite.registry import OPENAI_COMPATIBLE_PRESETS

    assert BACKENDS == OPENAI_COMPATIBLE_BACKENDS
    for preset in OPENAI_COMPATIBLE_PRESETS:
        assert PROVIDER_ALIASES[preset] == ("openai-compatible", preset)


# --------------------------------------------------------------------------- validation


BAD = """\
provider = "olama"
model = 3
colour = "blue"
[providers.local]
base_url = "ftp://x"
timeout = "fast"
[providers.vllm]
base_url = "http://gpu:99999"
api_key = 12345
backend = "lmstudio"
[providers.openai-compatible]
backend = "lmstudo"
timeout = -1
bogus = 1
[providers.mistral]
base_url = "http://m:1"
[context_limits]
"llama3.2" = "big"
"qwen" = 0
"""


def test_validate_reports_every_problem_at_once(tmp_path: Path) -> None:
    """Bad values load; validate_config returns each problem with its path and a message."""
    config = load_config(write(tmp_path, BAD), env={})
    issues = validate_config(config)
    by_path = {issue.path: issue.message for issue in issues}
    assert sorted(by_path) == sorted(
        [
            "colour",
            "provider",
            "model",
            "providers.local.base_url",
            "providers.local.timeout",
            "providers.vllm.base_url",
            "providers.vllm.api_key",
            "providers.vllm.backend",
            "providers.openai-compatible.backend",
            "providers.openai-compatible.timeout",
            "providers.openai-compatible.bogus",
            "providers.mistral",
            "context_limits.llama3.2",
            "context_limits.qwen",
        ]
    )
    assert len(issues) == len(by_path)
    assert "unknown provider 'olama'" in by_path["provider"]
    assert "did you mean 'ollama'" in by_path["provider"]
    assert "unknown key 'colour'" in by_path["colour"]
    assert "must be a non-empty string, got an integer 3" in by_path["model"]
    assert "scheme must be http or https" in by_path["providers.local.base_url"]
    assert "bad port" in by_path["providers.vllm.base_url"]
    assert "positive number of seconds, got 'fast'" in by_path["providers.local.timeout"]
    assert "must be a string, got an integer" in by_path["providers.vllm.api_key"]
    assert "12345" not in by_path["providers.vllm.api_key"]  # a key's value is never echoed
    assert "only applies to openai-compatible" in by_path["providers.vllm.backend"]
    assert "unknown backend 'lmstudo'" in by_path["providers.openai-compatible.backend"]
    assert "did you mean 'lmstudio'" in by_path["providers.openai-compatible.backend"]
    assert "unknown key 'bogus'" in by_path["providers.openai-compatible.bogus"]
    assert "unknown provider 'mistral'" in by_path["providers.mistral"]
    assert "positive integer" in by_path["context_limits.qwen"]
    assert str(issues[0]) == f"{issues[0].path}: {issues[0].message}"


def test_wrong_table_types(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, 'providers = "all"\ncontext_limits = 4096\n'), env={})
    issues = validate_config(config)
    assert paths(issues) == ["providers", "context_limits"]
    assert all("must be a table" in issue.message for issue in issues)
    config = load_config(write(tmp_path, "[providers]\nlocal = 1\n", "b.toml"), env={})
    assert paths(validate_config(config)) == ["providers.local"]


def test_validate_hand_built_config() -> None:
    """Configs built in code are checked the same way (aliases are fine)."""
    config = Config(
        provider="lmstudio",
        providers={
            "openai-compatible": ProviderConfig(base_url="localhost:1234", backend="generic"),
            "local": ProviderConfig(base_url=":11434", timeout=30),
        },
        context_limits={"m": 8192},
    )
    assert validate_config(config) == []
    bad = Config(model="  ", providers={"local": ProviderConfig(timeout=float("nan"))})
    assert paths(validate_config(bad)) == ["model", "providers.local.timeout"]


MANGLED_URLS = [
    ("http:/localhost:11434", "expected http://host[:port]"),
    ("http//localhost:11434", "expected http://host[:port]"),
    ("HTTPS:/gpu-box", "expected https://host[:port]"),
    ("http:localhost:11434", "'http' must be followed by '://'"),
    ("htp:/bad", "empty port after 'htp:'"),
    ("localhost:", "empty port after 'localhost:'"),
    ("htp//bad", "'htp//' lacks the ':' of a scheme"),
]


@pytest.mark.parametrize(("url", "message"), MANGLED_URLS)
@pytest.mark.parametrize("provider", ["local", "vllm", "openai-compatible"])
def test_mangled_urls_are_reported(url: str, message: str, provider: str) -> None:
    """A scheme typo is not a host name: http:/x, http//x and htp:/x are malformed."""
    config = Config(providers={provider: ProviderConfig(base_url=url)})
    issues = validate_config(config)
    assert paths(issues) == [f"providers.{provider}.base_url"]
    assert issues[0].message.startswith(f"malformed URL {url!r}: ")
    assert message in issues[0].message


@pytest.mark.parametrize(("url", "message"), MANGLED_URLS[:3])
def test_mangled_host_flag_is_a_usage_error(
    url: str, message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--host` goes through the same check: exit 2 with the message."""
    from ollm_lite.cli import main

    assert main(["--host", url, "config", "validate"]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    "url",
    [
        "localhost",
        "localhost:11434",
        ":11434",
        "0.0.0.0",
        "127.0.0.1:8080/ollama/",
        "[::1]",
        "[::1]:11434",
        "user:pw@gpu-box:11434",
        "example.com/ollama",
        "http-proxy:3128",
        "httpbin.org",
        "http://h",
        "HTTPS://h:443/x",
        "http://[::1]:8080",
    ],
)
def test_ollama_host_forms_stay_accepted(url: str) -> None:
    """Every OLLAMA_HOST form the providers accept is a valid base_url."""
    from ollm_lite.providers._ollama_wire import parse_ollama_host

    parse_ollama_host(url)
    config = Config(providers={"local": ProviderConfig(base_url=url)})
    assert validate_config(config) == []
    assert validate_config(load_config(env={"HOME": "/nonexistent", "OLLAMA_HOST": url})) == []


@pytest.mark.parametrize("url", ["::1", "::", "::1/ollama"])
def test_bare_ipv6_is_ollama_only(url: str) -> None:
    """OLLAMA_HOST=::1 works for Ollama; other providers need http://[::1]:port."""
    assert validate_config(Config(providers={"local": ProviderConfig(base_url=url)})) == []
    issues = validate_config(Config(providers={"vllm": ProviderConfig(base_url=url)}))
    assert paths(issues) == ["providers.vllm.base_url"]
    assert "needs brackets" in issues[0].message


def test_url_userinfo_is_hidden_without_a_scheme_too() -> None:
    issues = validate_config(
        Config(providers={"local": ProviderConfig(base_url="me:pw-secret@host:/x")})
    )
    assert paths(issues) == ["providers.local.base_url"]
    assert "pw-secret" not in str(issues[0]) and "***@host:/x" in str(issues[0])


def test_gemini_selected_without_key() -> None:
    config = load_config(env={"HOME": "/nonexistent", "OLLM_PROVIDER": "gemini"})
    issues = validate_config(config)
    assert paths(issues) == ["providers.gemini.api_key"]
    assert "GEMINI_API_KEY" in issues[0].message
    config = load_config(env={"OLLM_PROVIDER": "gemini", "GEMINI_API_KEY": "x", "HOME": "/n"})
    assert validate_config(config) == []


def test_anthropic_from_the_environment() -> None:
    """ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY set [providers.anthropic]; ``claude`` selects it;
    no key is required (the local servers that speak the Messages API need none)."""
    env = {"HOME": "/n", "OLLM_PROVIDER": "claude", "ANTHROPIC_API_KEY": " sk-ant-x\n"}
    config = load_config(env=env)
    assert config.provider == "anthropic"
    assert config.providers["anthropic"] == ProviderConfig(api_key="sk-ant-x")
    assert config.origins["providers.anthropic.api_key"] == "env ANTHROPIC_API_KEY"
    assert validate_config(config) == []
    local = load_config(
        env={
            "HOME": "/n",
            "OLLM_PROVIDER": "anthropic",
            "ANTHROPIC_BASE_URL": "http://127.0.0.1:8080",
        }
    )
    assert local.providers["anthropic"].base_url == "http://127.0.0.1:8080"
    assert validate_config(local) == []
    bad = load_config(
        env={"HOME": "/n"}, overrides={"providers": {"anthropic": {"base_url": "ftp://x"}}}
    )
    assert paths(validate_config(bad)) == ["providers.anthropic.base_url"]
    assert (
        env_default("anthropic", "base_url", {"ANTHROPIC_BASE_URL": "http://h:1"}) == "http://h:1"
    )


# --------------------------------------------------------------------------- secrets


def test_api_keys_never_in_repr_or_redacted(tmp_path: Path) -> None:
    path = write(tmp_path, '[providers.vllm]\napi_key = "sk-file-secret"\n')
    config = load_config(
        path, env={"GEMINI_API_KEY": "gm-env-secret"}, overrides={"api_key": "sk-flag-secret"}
    )
    shown = repr(config) + str(config) + repr(redacted(config)) + repr(validate_config(config))
    for secret in ("sk-file-secret", "gm-env-secret", "sk-flag-secret"):
        assert secret not in shown
    assert redacted(config)["providers"]["vllm"]["api_key"] == "***"
    assert config.providers["local"].api_key == "sk-flag-secret"  # kept for use, just hidden


def test_import_does_not_load_requests() -> None:
    """Loading the configuration must not pull in the HTTP stack (keeps --help fast)."""
    code = (
        "import sys, ollm_lite.config as c; c.load_config(env={}); print('requests' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_key_pasted_elsewhere_and_url_userinfo_are_masked(tmp_path: Path) -> None:
    """A key typed into the wrong field is still a secret; user:pass@ in a URL is hidden."""
    key = "sk-pasted-0123456789"
    path = write(
        tmp_path,
        f'[providers.vllm]\napi_key = "{key}"\ntimeout = "{key}"\n'
        f'base_url = "ftp://user:pw-secret@host"\n'
        f'[providers.openai-compatible]\nbackend = "{key}"\n',
    )
    config = load_config(path, env={})
    issues = validate_config(config)
    assert paths(issues) == [
        "providers.vllm.base_url",
        "providers.vllm.timeout",
        "providers.openai-compatible.backend",
    ]
    shown = " ".join(map(str, issues)) + repr(config) + repr(redacted(config))
    assert key not in shown and "pw-secret" not in shown
    assert "ftp://***@host" in shown
    assert config.providers["vllm"].timeout == key  # the value itself is kept as loaded


def test_a_backend_alias_does_not_take_another_backends_url(tmp_path: Path) -> None:
    """The quick start's file names the llama.cpp server; OLLM_PROVIDER=lmstudio does not
    send LM Studio requests there, and the origins say why the URL was dropped."""
    path = write(
        tmp_path,
        'provider = "llamacpp"\n[providers.llamacpp]\nbase_url = "http://127.0.0.1:8080"\n'
        'api_key = "llama-key"\ntimeout = 600\n',
    )
    config = load_config(path, env={"OLLM_PROVIDER": "lmstudio"})
    section = config.providers["openai-compatible"]
    assert section == ProviderConfig(backend="lmstudio", timeout=600)
    why = config.origins["providers.openai-compatible.base_url"]
    assert "not used" in why and "'llamacpp'" in why and "env OLLM_PROVIDER" in why
    assert validate_config(config) == []
    # The same backend, or no backend change, keeps the file's URL.
    same = load_config(path, env={"OLLM_PROVIDER": "llama.cpp"})
    assert same.providers["openai-compatible"].base_url == "http://127.0.0.1:8080"
    assert load_config(path, env={}).providers["openai-compatible"].base_url == (
        "http://127.0.0.1:8080"
    )


def test_a_url_set_with_the_chosen_backend_or_without_one_is_kept(tmp_path: Path) -> None:
    generic = write(tmp_path, '[providers.openai-compatible]\nbase_url = "http://g:1"\n', "g.toml")
    config = load_config(generic, env={"OLLM_PROVIDER": "lmstudio"})
    assert config.providers["openai-compatible"].base_url == "http://g:1"
    llama = write(tmp_path, '[providers.llamacpp]\nbase_url = "http://l:1"\n', "l.toml")
    env = {"OLLM_PROVIDER": "lmstudio", "OPENAI_COMPATIBLE_HOST": "http://lm:1234"}
    assert load_config(llama, env=env).providers["openai-compatible"].base_url == "http://lm:1234"
    flags = load_config(llama, env={}, overrides={"provider": "kobold", "base_url": "http://k:5"})
    assert flags.providers["openai-compatible"].base_url == "http://k:5"


def test_config_show_says_which_url_was_dropped_and_why(tmp_path: Path) -> None:
    path = write(
        tmp_path, 'provider = "llamacpp"\n[providers.llamacpp]\nbase_url = "http://l:8080"\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "ollm_lite", "--config", str(path), "config", "show"],
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "OLLM_PROVIDER": "lmstudio"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert 'backend = "lmstudio"  # env OLLM_PROVIDER' in done.stdout
    assert "# base_url: not used: the file sets it for backend 'llamacpp'" in done.stdout
    assert "http://l:8080" not in done.stdout
