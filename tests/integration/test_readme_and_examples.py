"""Every Python snippet of README.md and every script in examples/ runs, as written, against the
quick-start llama.cpp server (llama-cpp-python's server with SmolLM2-135M-Instruct).

The newcomer's path: ``scripts/llamacpp.py start`` writes the ollm configuration that points at
the server, and nothing else is set. Each snippet and example runs here in a fresh interpreter
with only that configuration file (``$OLLM_CONFIG``, written by the script's own
:func:`llamacpp.write_config`) and no provider variables: what it prints comes from the real
server. A snippet may not swallow an error: every one must exit 0 here, and one that reports an
``ErrorEvent`` exits non-zero.

Two snippets belong to setup guides of other servers (Ollama's model management, a vLLM server on
a GPU); they cannot run against llama.cpp and are compiled only, each named below with why.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
README = REPO / "README.md"
SNIPPETS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
#: Snippets for other servers, by a line they contain: compiled, not run.
OTHER_SERVERS = {
    'provider.pull_model("llama3.2"': "Ollama's model management needs an Ollama server",
    'VllmProvider(base_url="http://gpu-box:8000")': "needs a vLLM server with Qwen3-8B",
}
EXAMPLES = sorted((REPO / "examples").glob("*.py"))


def _snippet_id(code: str) -> str:
    first = next(line for line in code.splitlines() if line.strip() and "import" not in line)
    return re.sub(r"\W+", "_", first)[:40]


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
    # The Gemini guide builds a provider from the key in the environment (no request is made).
    env["GEMINI_API_KEY"] = "placeholder-key-for-the-readme"
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
    assert len(SNIPPETS) >= 10
    for marker in OTHER_SERVERS:
        assert sum(marker in code for code in SNIPPETS) == 1, marker


@pytest.mark.parametrize("code", SNIPPETS, ids=[_snippet_id(c) for c in SNIPPETS])
def test_readme_snippet_runs_against_the_quick_start_server(
    code: str, newcomer_env: dict[str, str], tmp_path: Path
) -> None:
    other = [why for marker, why in OTHER_SERVERS.items() if marker in code]
    compile(code, "README.md", "exec")
    if other:
        pytest.skip(f"compiled only: {other[0]}")
    done = _run([sys.executable, "-c", code], newcomer_env, tmp_path)
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr


def test_ten_line_script_streams_a_real_answer(
    newcomer_env: dict[str, str], tmp_path: Path
) -> None:
    (code,) = [c for c in SNIPPETS if "Why is the sky blue?" in c and "chat_stream" in c][:1]
    done = _run([sys.executable, "-c", code], newcomer_env, tmp_path)
    assert done.returncode == 0, done.stderr
    answer, _, finish = done.stdout.rstrip("\n").rpartition("\n")
    assert len(answer.split()) >= 3, done.stdout  # words from the model, not an echo of nothing
    assert finish in ("[stop]", "[length]"), done.stdout


def test_snippets_report_errors_instead_of_swallowing_them(
    newcomer_env: dict[str, str], tmp_path: Path
) -> None:
    """With nothing listening, every snippet that chats exits non-zero and names the code."""
    dead = dict(newcomer_env)
    config = tmp_path / "dead.toml"
    config.write_text(
        Path(newcomer_env["OLLM_CONFIG"])
        .read_text()
        .replace(f":{_port(newcomer_env)}", f":{llamacpp.free_port()}")
    )
    dead["OLLM_CONFIG"] = str(config)
    chatting = [c for c in SNIPPETS if ".chat(" in c or "chat_stream(" in c]
    chatting = [c for c in chatting if not any(m in c for m in OTHER_SERVERS)]
    chatting = [c for c in chatting if "ScriptedProvider" not in c]
    # The cancel= snippet's timer may stop the connection retries first: a chat cancelled by
    # its caller ends "cancelled", with no error to report.
    chatting = [c for c in chatting if "cancel=" not in c]
    assert len(chatting) >= 2
    for code in chatting:
        done = _run([sys.executable, "-c", code], dead, tmp_path)
        assert done.returncode != 0, code
        assert "CONNECTION_FAILED" in done.stderr, (code, done.stderr)


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
