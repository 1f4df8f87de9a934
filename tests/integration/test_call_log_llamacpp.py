"""A real llama.cpp run on record: logged, searched, answered from the cache, and replayed
offline with ``ScriptedProvider.from_log``."""

from __future__ import annotations

from pathlib import Path

import llamacpp  # scripts/, put on sys.path by conftest.py
import pytest

import ollm_lite
from ollm_lite import ScriptedProvider

pytestmark = pytest.mark.integration


def _script(llm: ollm_lite.Client) -> list[str]:
    """A small "cron job": two questions at temperature 0."""
    return [
        llm.ask("What is the capital of France? Answer in one word.", max_tokens=16),
        "".join(llm.stream("Name a colour of the sky.", max_tokens=16)),
    ]


def test_a_real_run_is_logged_searched_and_replayed_offline(
    llamacpp_py_server: llamacpp.ServerInfo, tmp_path: Path
) -> None:
    path = tmp_path / "logs.db"
    server = llamacpp_py_server
    with ollm_lite.connect(
        "llamacpp", host=server.base_url, model=server.model, log=str(path), temperature=0
    ) as llm:
        answers = _script(llm)
    assert all(answers)
    with ollm_lite.open_log(path) as log:
        calls = log.calls()
        assert [c.source for c in calls] == ["stream", "ask"]
        assert all(c.host == f"http://127.0.0.1:{server.port}" for c in calls)
        assert all(c.first_token_seconds is not None for c in calls)
        assert [c.text for c in log.calls(search="capital of France")] == [answers[0]]
        [stats] = log.stats()
        assert stats.calls == 2 and stats.errors == 0
        # llama-cpp-python streams without usage: its tokenizer counted both calls
        for call in calls:
            assert call.usage is not None and call.usage.extra.get("estimated") is True
            assert call.usage.prompt_tokens and call.usage.completion_tokens
        assert stats.prompt_tokens > 0 and stats.completion_tokens > 0

    replay = ScriptedProvider.from_log(calls)  # strict: the same options as the logged run
    assert _script(ollm_lite.connect(replay, model=server.model, temperature=0)) == answers
    loose = ScriptedProvider.from_log(calls)
    with pytest.raises(ollm_lite.ConfigError, match=r"options\.temperature: logged 0, now null"):
        _script(ollm_lite.connect(loose, model=server.model))

    with ollm_lite.connect(
        "llamacpp", host=server.base_url, model=server.model, cache=True,
        log=str(path), temperature=0,
    ) as cached:  # fmt: skip
        assert _script(cached) == answers
    with ollm_lite.open_log(path) as log:
        assert [c.cached for c in log.calls(limit=2)] == [True, True]
