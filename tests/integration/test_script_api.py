"""The README's five scripts, as written, against a real llama.cpp server.

The server is llama-cpp-python's (started by conftest.py through scripts/llamacpp.py); the
configuration file ``connect()`` reads points at it, as ``scripts/llamacpp.py start`` would
write it. Each script runs unchanged; the harness only bounds the answers' length
(``max_tokens``) and each call's time (``timeout``) through ``connect``'s option defaults, so a
tiny model on a busy machine cannot ramble for minutes. The tool and typed scripts pass with a
tiny model because llama.cpp constrains a forced tool call and a JSON Schema answer with a
grammar.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest
from doc_snippets import ROOT, Snippet, run, snippets

import ollm_lite
import ollm_lite.client as client_module
from ollm_lite import Reply
from ollm_lite.client import Client

pytestmark = pytest.mark.integration

MODEL = llamacpp.MODEL_ALIAS
LIVE = [s for s in snippets([ROOT / "README.md"]) if s.live]
BOUNDS = {"max_tokens": 96, "timeout": 240.0}


@pytest.fixture
def configured(llamacpp_py_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A config file pointing at the server, where ``connect()`` looks for it."""
    folder = tmp_path / "xdg"
    (folder / "ollm").mkdir(parents=True)
    (folder / "ollm" / "config.toml").write_text(
        f'provider = "llamacpp"\nmodel = "{MODEL}"\n'
        f'[providers.llamacpp]\nbase_url = "{llamacpp_py_server.base_url}"\n',
        "utf-8",
    )
    monkeypatch.setenv("XDG_CONFIG_HOME", str(folder))
    for name in ("OLLM_CONFIG", "OLLM_PROVIDER", "OLLM_MODEL", "OPENAI_COMPATIBLE_HOST"):
        monkeypatch.delenv(name, raising=False)
    return folder


def live_connect(made: list[Client]) -> Any:
    real = client_module.connect

    def connect(*args: Any, **kwargs: Any) -> Client:
        client = real(*args, **{**BOUNDS, **kwargs})
        made.append(client)
        return client

    return connect


def test_the_readme_has_five_live_scripts() -> None:
    assert sorted(s.directive["script"] for s in LIVE if "script" in s.directive) == [
        "one-shot",
        "streamed",
        "tool-using",
        "two-turn",
        "typed",
    ]


@pytest.mark.parametrize("snippet", LIVE, ids=[s.directive.get("script", s.id) for s in LIVE])
def test_readme_script_runs_against_the_real_server(
    snippet: Snippet,
    configured: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    made: list[Client] = []
    try:
        namespace = run(snippet, tmp_path, monkeypatch, live_connect(made))
    finally:
        for client in made:
            client.close()
    printed = capsys.readouterr().out
    assert printed.strip(), "the script printed nothing"
    assert made and made[0].model == MODEL
    check = CHECKS.get(snippet.directive.get("script", ""))
    if check is not None:
        check(namespace, printed)


def _typed(namespace: dict[str, Any], printed: str) -> None:
    city_type = namespace["City"]
    assert printed.startswith("City(name=")  # a City instance was printed, not text
    with ollm_lite.connect() as llm:
        value = llm.ask("Name a city in Italy.", schema=city_type)
    assert isinstance(value, city_type)
    assert isinstance(value.name, str) and isinstance(value.country, str)


def _tools(namespace: dict[str, Any], printed: str) -> None:
    add = namespace["add"]
    with ollm_lite.connect() as llm:
        reply = llm.run("What is 2.5 + 4?", tools=[add], tool_choice="add")
    assert isinstance(reply, Reply)
    assert reply.tool_calls and reply.tool_calls[0].name == "add"
    first = reply.tool_results[0]
    assert first.ok, first.error  # the forced call had valid arguments and ran
    assert isinstance(first.data, int | float)
    assert reply.finish in ("complete", "max_turns", "loop_detected")


def _two_turn(namespace: dict[str, Any], printed: str) -> None:
    chat = namespace["chat"]
    roles = [m.role for m in chat.messages]
    assert roles == ["user", "assistant", "user", "assistant"]


CHECKS = {"typed": _typed, "tool-using": _tools, "two-turn": _two_turn}
