"""The scripts in ``examples/`` import and work, offline, over ``ScriptedProvider``.

They use the script API (``ollm_lite.connect()``); here ``connect`` gives a client over a
``ScriptedProvider`` instead of the configured server.
"""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support.cli_support import ROOT

import ollm_lite
import ollm_lite.client
from ollm_lite import (
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    ScriptedProvider,
    ScriptedTurn,
    TextEvent,
    ToolCall,
    ToolCallEvent,
)
from ollm_lite.errors import OllmError
from ollm_lite.tokens import TokenCounter

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def load(name: str) -> ModuleType:
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def offline(
    module: ModuleType, monkeypatch: pytest.MonkeyPatch, provider: ScriptedProvider
) -> None:
    """Make the example's ``ollm_lite.connect()`` a client over the scripted provider."""
    real = ollm_lite.client.connect

    def connect(*args: Any, **kwargs: Any) -> ollm_lite.Client:
        return real(provider, model="m")

    monkeypatch.setattr(ollm_lite, "connect", connect)  # the examples call ollm_lite.connect


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.stem for p in EXAMPLES])
def test_every_example_imports_and_says_how_to_run_it(path: Path) -> None:
    module = load(path.stem)
    doc = module.__doc__ or ""
    assert "python examples/" in doc, "the docstring shows the command line"
    assert "llamacpp" in doc or "Ollama" in doc
    assert callable(module.main)


def test_expected_examples_exist() -> None:
    assert {p.stem for p in EXAMPLES} >= {"cron_summarise", "tool_agent", "cancellable_chat"}


# --------------------------------------------------------------------------- cron_summarise


def test_cron_summarise_main_appends_summary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cron = load("cron_summarise")
    log = tmp_path / "app.log"
    log.write_text("".join(f"line {i}\n" for i in range(500)) + "ERROR disk full\n")
    provider = ScriptedProvider(["- disk full on /var"])
    offline(cron, monkeypatch, provider)
    out = tmp_path / "summaries.txt"
    assert cron.main([str(log), "--lines", "3", "--out", str(out)]) == 0
    assert out.read_text().endswith("app.log\n- disk full on /var\n\n")
    (request,) = provider.requests
    sent = request.messages[-1].text
    assert sent.endswith("line 498\nline 499\nERROR disk full\n")
    assert "line 497" not in sent
    assert request.system_prompt == cron.SYSTEM


def test_cron_summarise_failure_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cron = load("cron_summarise")
    log = tmp_path / "app.log"
    log.write_text("something\n")
    failing = ScriptedProvider([[ErrorEvent(ErrorInfo("server exploded", "LLM_HTTP_ERROR"))]])
    offline(cron, monkeypatch, failing)
    assert cron.main([str(log)]) == 1
    err = capsys.readouterr().err
    assert err == "cron_summarise: error [LLM_HTTP_ERROR]: server exploded\n"
    with pytest.raises(OllmError):
        cron.summarise("x", ollm_lite.connect(ScriptedProvider([]), model="m"))


def test_cron_summarise_fits_the_log_to_the_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """200 lines do not fit a small window: the most recent lines that fit are sent."""
    cron = load("cron_summarise")
    log = tmp_path / "app.log"
    log.write_text("".join(f"{i:05d} service started ok\n" for i in range(300)))
    provider = ScriptedProvider(["- all quiet"], context_length=1200)
    offline(cron, monkeypatch, provider)
    assert cron.main([str(log)]) == 0
    captured = capsys.readouterr()
    assert captured.out == "- all quiet\n"
    (request,) = provider.requests
    sent = request.messages[-1].text
    assert sent.endswith("00299 service started ok\n")
    kept = sent.count("service started ok")
    assert 0 < kept < 200
    assert f"holds the last {kept} of 200 lines" in captured.err
    counter = TokenCounter(provider)
    assert counter.check(request).tokens + cron.ANSWER_TOKENS <= 1200
    assert request.options.max_tokens == cron.ANSWER_TOKENS


def test_cron_summarise_empty_summary_is_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A blank answer must not look like success: exit 1, nothing appended."""
    cron = load("cron_summarise")
    log = tmp_path / "app.log"
    log.write_text("ERROR disk full\n")
    offline(cron, monkeypatch, ScriptedProvider(["  \n"]))
    out = tmp_path / "summaries.txt"
    assert cron.main([str(log), "--out", str(out)]) == 1
    assert capsys.readouterr().err == (
        "cron_summarise: error [LLM_BAD_RESPONSE]: the model returned an empty summary\n"
    )
    assert not out.exists()


def test_cron_summarise_nothing_fits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cron = load("cron_summarise")
    log = tmp_path / "app.log"
    log.write_text("x" * 8000 + "\n")
    provider = ScriptedProvider(["never sent"], context_length=1000)
    offline(cron, monkeypatch, provider)
    assert cron.main([str(log)]) == 1
    assert "[OLLM_ERROR]: not even the last line fits" in capsys.readouterr().err
    assert provider.requests == []


# --------------------------------------------------------------------------- tool_agent


def test_tool_agent_runs_the_tool_and_streams_the_answer(tmp_path: Path) -> None:
    agent = load("tool_agent")
    call = ToolCall.from_arguments("c1", "disk_usage", {"path": str(tmp_path)})
    provider = ScriptedProvider([[ToolCallEvent(call), FinishEvent("tool")], "Your disk is fine."])
    llm = ollm_lite.connect(provider, model="m")
    out, err = io.StringIO(), io.StringIO()
    assert agent.ask("How full is my disk?", llm, out=out, err=err) == 0
    assert out.getvalue() == "Your disk is fine.\n"
    assert "[tool] disk_usage(" in err.getvalue()
    tool_message = provider.requests[1].messages[-1]
    assert tool_message.role == "tool"
    result = json.loads(tool_message.text)
    assert result["ok"] is True and 0 <= result["data"]["used_percent"] <= 100
    assert {s.name for s in provider.requests[0].tools or []} == {
        "current_time", "disk_usage", "count_files",
    }  # fmt: skip


def test_tool_agent_react_mode(tmp_path: Path) -> None:
    agent = load("tool_agent")
    (tmp_path / "a.log").write_text("x")
    (tmp_path / "b.txt").write_text("y")
    react_call = (
        "Thought: I should count.\nAction: count_files\n"
        f'Action Input: {{"path": "{tmp_path}", "pattern": "*.log"}}'
    )
    provider = ScriptedProvider([react_call, "Final Answer: There is 1 log file."])
    llm = ollm_lite.connect(provider, model="m")
    out, err = io.StringIO(), io.StringIO()
    assert agent.ask("How many logs?", llm, react=True, out=out, err=err) == 0
    assert out.getvalue() == "There is 1 log file.\n"
    assert '[tool] -> {"ok": true, "data": 1}' in err.getvalue()
    assert provider.requests[0].tools is None  # ReAct: tools described in the prompt instead


# --------------------------------------------------------------------------- cancellable_chat


def test_cancellable_chat_deadline_keeps_partial_and_continues() -> None:
    chat = load("cancellable_chat")
    provider = ScriptedProvider([ScriptedTurn([TextEvent("A long")], hang=True), "Second answer."])
    session = ollm_lite.connect(provider, model="m").session()
    out = io.StringIO()
    started = time.monotonic()
    reason = chat.answer(session, "Tell me everything", threading.Event(), 0.2, out=out)
    assert reason == "cancelled"
    assert time.monotonic() - started < 2.0
    assert out.getvalue() == "A long [stopped]\n"
    assert chat.answer(session, "Shorter, please", threading.Event(), out=out) == "complete"
    assert out.getvalue().endswith("Second answer.\n")
    assert [m.role for m in session.messages] == ["user", "assistant", "user", "assistant"]
    assert session.messages[1].text == "A long"


def test_cancellable_chat_main_quits_on_eof(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = load("cancellable_chat")
    offline(chat, monkeypatch, ScriptedProvider(["Hi there."]))
    lines: list[Any] = iter(["hello", ""])
    monkeypatch.setattr("builtins.input", lambda prompt="": next(lines))
    assert chat.main([]) == 0
    assert "Hi there.\n" in capsys.readouterr().out
