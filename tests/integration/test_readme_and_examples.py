"""Every Python snippet of README.md and every script in examples/ runs, as written, against the
quick-start llama.cpp server (llama-cpp-python's server with SmolLM2-135M-Instruct).

The newcomer's path: ``scripts/llamacpp.py start`` writes the ollm configuration that points at
the server, and nothing else is set. Each snippet and example runs here in a fresh interpreter
with only that configuration file (``$OLLM_CONFIG``, written by the script's own
:func:`llamacpp.write_config`) and no provider variables: what it prints comes from the real
server. A snippet may not swallow an error: every one must exit 0 here, and with nothing
listening each one exits non-zero naming ``CONNECTION_FAILED``.

The README's five scripts are also checked for what they return (a tool call that ran, a
validated typed answer, a two-turn history), in-process over the same configuration. The tool
and typed scripts pass with a tiny model because llama.cpp constrains a forced tool call and a
JSON Schema answer with a grammar. The snippets are read by tests/doc_snippets.py, which
tests/docs also uses to run every snippet of README.md and docs/ offline.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest
from support.doc_snippets import ROOT, Snippet, readers_folder, run, run_steps, snippets

import ollm_lite
import ollm_lite.client as client_module
from ollm_lite import Reply
from ollm_lite.client import Client

pytestmark = pytest.mark.integration

REPO = ROOT
README = REPO / "README.md"
SNIPPETS = snippets([README])
FIVE = {s.directive["script"]: s for s in SNIPPETS if "script" in s.directive}
EXAMPLES = sorted((REPO / "examples").glob("*.py"))
#: In-process checks bound each answer, so a tiny model on a busy machine cannot ramble.
BOUNDS = {"max_tokens": 96, "timeout": 600.0}


@pytest.fixture(scope="module")
def newcomer_env(
    llamacpp_py_server: llamacpp.ServerInfo, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The environment after ``start``: its configuration file, no provider variables."""
    home = tmp_path_factory.mktemp("newcomer")
    config = home / "config.toml"
    assert llamacpp.write_config(llamacpp_py_server, config)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OLLM_", "OLLAMA_", "VLLM_", "OPENAI_COMPATIBLE_", "GEMINI_"))
    }
    env["OLLM_CONFIG"] = str(config)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    yield env


def _run(
    args: list[str], env: dict[str, str], cwd: Path, **kw: object
) -> subprocess.CompletedProcess[str]:
    # Generous: a 4 000-token prompt on a busy 2-core machine takes minutes, not seconds.
    return subprocess.run(
        args,
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        **kw,  # type: ignore[call-overload]
    )


def test_readme_has_the_snippets_this_test_expects() -> None:
    assert sorted(FIVE) == ["one-shot", "streamed", "tool-using", "two-turn", "typed"]
    assert all(s.live for s in SNIPPETS), [s.id for s in SNIPPETS if not s.live]


@pytest.mark.parametrize(
    "snippet", SNIPPETS, ids=[s.directive.get("script", s.id) for s in SNIPPETS]
)
def test_readme_snippet_runs_against_the_quick_start_server(
    snippet: Snippet, newcomer_env: dict[str, str], tmp_path: Path
) -> None:
    run_steps(snippet, readers_folder(tmp_path), newcomer_env)
    done = _run([sys.executable, "-c", snippet.code], newcomer_env, tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert done.stdout.strip(), done.stderr  # the model's answer, printed


def test_one_shot_script_prints_a_real_answer(newcomer_env: dict[str, str], tmp_path: Path) -> None:
    done = _run([sys.executable, "-c", FIVE["one-shot"].code], newcomer_env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) >= 3, done.stdout  # words from the model


def test_snippets_report_errors_instead_of_swallowing_them(
    newcomer_env: dict[str, str], tmp_path: Path
) -> None:
    """With nothing listening, every snippet exits non-zero and names the failure."""
    dead = dict(newcomer_env)
    config = tmp_path / "dead.toml"
    config.write_text(
        Path(newcomer_env["OLLM_CONFIG"])
        .read_text()
        .replace(f":{_port(newcomer_env)}", f":{llamacpp.free_port()}")
    )
    dead["OLLM_CONFIG"] = str(config)
    readers_folder(tmp_path)
    for snippet in SNIPPETS:
        run_steps(snippet, tmp_path, dead)
        (tmp_path / "labels.jsonl").unlink(missing_ok=True)
        done = _run([sys.executable, "-c", snippet.code], dead, tmp_path)
        assert done.returncode != 0, snippet.id
        # A raised ConnectionFailed, or the snippet's own "[CONNECTION_FAILED] ..." line.
        named = "ConnectionFailed" in done.stderr or "CONNECTION_FAILED" in done.stderr
        assert named, (snippet.id, done.stderr)


# --------------------------------------------------------------------------- the five, in-process


@pytest.fixture
def configured(newcomer_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """This process reads the configuration ``start`` wrote, as the scripts do."""
    monkeypatch.setenv("OLLM_CONFIG", newcomer_env["OLLM_CONFIG"])


def _bounded(made: list[Client]) -> Any:
    real = client_module.connect

    def connect(*args: Any, **kwargs: Any) -> Client:
        client = real(*args, **{**BOUNDS, **kwargs})
        made.append(client)
        return client

    return connect


FiveRunner = Callable[[str], tuple[dict[str, Any], str, list[Client]]]


@pytest.fixture
def run_five(
    configured: None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> FiveRunner:
    """Runs one of the README's five scripts by name against the configured server; returns its
    namespace, what it printed and the clients it made."""

    def run_one(name: str) -> tuple[dict[str, Any], str, list[Client]]:
        made: list[Client] = []
        namespace = run(FIVE[name], tmp_path, monkeypatch, _bounded(made))
        printed = capsys.readouterr().out
        assert printed.strip(), f"the {name} script printed nothing"
        assert made and made[0].model == llamacpp.MODEL_ALIAS
        return namespace, printed, made

    return run_one


def test_tool_script_calls_the_tool(run_five: FiveRunner) -> None:
    namespace, _, made = run_five("tool-using")
    reply = made[0].run("What is 2.5 + 4?", tools=[namespace["add"]], tool_choice="add")
    assert isinstance(reply, Reply)
    assert reply.tool_calls and reply.tool_calls[0].name == "add"
    first = reply.tool_results[0]
    assert first.ok, first.error  # the forced call had valid arguments and ran
    assert isinstance(first.data, int | float)
    assert reply.finish in ("complete", "max_turns", "loop_detected")


def test_typed_script_returns_the_dataclass(run_five: FiveRunner) -> None:
    namespace, printed, made = run_five("typed")
    assert printed.startswith("City(name=")  # a City instance was printed, not text
    value = made[0].ask("Name a city in Italy.", schema=namespace["City"])
    assert isinstance(value, namespace["City"])
    assert isinstance(value.name, str) and isinstance(value.country, str)


def test_two_turn_script_keeps_the_history(run_five: FiveRunner) -> None:
    namespace, _, _ = run_five("two-turn")
    roles = [m.role for m in namespace["chat"].messages]
    assert roles == ["user", "assistant", "user", "assistant"]


def test_the_module_level_shortcuts_use_the_configuration(
    configured: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(client_module, "_default", None)
    pieces = list(ollm_lite.stream("Say hello.", max_tokens=16))
    assert "".join(pieces).strip()
    assert ollm_lite.ask("Say hello.", max_tokens=16).strip()
    client_module.default_client().close()


def _port(env: dict[str, str]) -> int:
    text = Path(env["OLLM_CONFIG"]).read_text()
    found = re.search(r"127\.0\.0\.1:(\d+)", text)
    assert found is not None
    return int(found.group(1))


def test_every_example_is_run_here() -> None:
    assert {p.stem for p in EXAMPLES} == {"cancellable_chat", "cron_summarise", "tool_agent"}


def test_example_cron_summarise_fits_a_long_log_and_summarises(
    newcomer_env: dict[str, str], tmp_path: Path
) -> None:
    """Run as its docstring says: the default 200 lines do not fit 4 096 tokens; it fits them."""
    log = tmp_path / "app.log"
    log.write_text(
        "".join(
            f"2026-11-26T07:{i // 60:02d}:{i % 60:02d} worker[{i % 7}] INFO request {i} served "
            f"in {i % 97} ms from cache shard {i % 13} for user agent curl/8.{i % 5}\n"
            for i in range(400)
        )
        + "2026-11-26T08:00:00 worker[3] ERROR disk full on /var\n"
    )
    done = _run(
        [sys.executable, str(REPO / "examples" / "cron_summarise.py"), str(log)],
        newcomer_env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip(), done.stderr
    assert "of 200 lines; summarising those" in done.stderr


def test_example_tool_agent(newcomer_env: dict[str, str], tmp_path: Path) -> None:
    done = _run(
        [sys.executable, str(REPO / "examples" / "tool_agent.py"), "What time is it?"],
        newcomer_env,
        tmp_path,
    )
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert done.stdout.strip() or "[tool]" in done.stderr


def test_example_cancellable_chat(newcomer_env: dict[str, str], tmp_path: Path) -> None:
    done = _run(
        [sys.executable, str(REPO / "examples" / "cancellable_chat.py"), "--deadline", "60"],
        newcomer_env,
        tmp_path,
        input="Hello! Who are you?\n\n",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("you> ") and len(done.stdout) > len("you> you> ") + 2


def test_cli_chat_runs_on_the_configuration(newcomer_env: dict[str, str], tmp_path: Path) -> None:
    """`ollm-lite chat "Hello"`, as the set-up section says, with nothing but the config file."""
    done = _run(
        [sys.executable, "-m", "ollm_lite", "chat", "In one sentence, what is a llama?"],
        newcomer_env,
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.split()) >= 3
