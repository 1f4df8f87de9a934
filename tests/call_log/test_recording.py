"""Every kind of call is one row with the fields of ``LoggedCall``, written when it ends."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import sys
from datetime import UTC
from pathlib import Path

import pytest
from support.log_support import count_rows, logged, logging_client

import ollm_lite
from ollm_lite import (
    FinishEvent,
    ImagePart,
    ScriptedProvider,
    TextEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from ollm_lite.errors import ConfigError


def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: First.
        b: Second.
    """
    return a + b


def test_an_ask_is_one_row_with_its_fields(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(
        path,
        [TextEvent("Blue "), TextEvent("light."), FinishEvent("stop", Usage(7, 3, 10))],
        temperature=0.25,
    )
    assert llm.ask("Why is the sky blue?", system="Be brief.", seed=4) == "Blue light."
    [call] = logged(path)
    assert call.source == "ask"
    assert call.text == "Blue light."
    assert call.finish == "complete"
    assert call.model == "m"
    assert call.provider == "scripted"
    assert call.host is None
    assert call.script == os.path.basename(sys.argv[0])
    assert call.started.tzinfo is not None and call.started.utcoffset() == UTC.utcoffset(None)
    assert call.seconds >= 0 and call.first_token_seconds is not None
    assert call.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Why is the sky blue?"},
    ]
    assert call.options == {"temperature": 0.25, "seed": 4}
    assert call.usage is not None and call.usage.prompt_tokens == 7
    assert call.usage.completion_tokens == 3
    assert call.cached is False and call.error_code is None and call.custom_id is None
    assert len(call.turns) == 1
    assert call.turns[0]["answer"]["text"] == "Blue light."
    assert call.turns[0]["request"]["messages"][-1]["content"] == "Why is the sky blue?"


def test_nothing_is_logged_unless_asked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    llm = ollm_lite.connect(ScriptedProvider(["hi"]), model="m")
    assert llm.ask("hello") == "hi"
    assert llm.call_log is None
    assert not (tmp_path / "ollm").exists()


def test_stream_run_events_and_map_name_their_source(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "one", "two", "three", "four", "five")
    assert "".join(llm.stream("s")) == "one"
    assert llm.run("r").text == "two"
    assert list(llm.events("e"))[-1].reason == "complete"
    replies = llm.map(["m1", "m2"], concurrency=1)
    assert sorted(r.text for r in replies) == ["five", "four"]
    calls = logged(path)
    assert [c.source for c in calls] == ["stream", "run", "events", "map", "map"]
    assert [c.text for c in calls][:3] == ["one", "two", "three"]


def test_a_run_with_tools_keeps_each_turn_and_the_tool_results(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    call = ToolCall.from_arguments("c1", "add", {"a": 2, "b": 3})
    llm, _ = logging_client(path, [ToolCallEvent(call), FinishEvent("tool")], "It is 5.")
    reply = llm.run("What is 2 + 3?", tools=[add])
    assert reply.text == "It is 5."
    [logged_call] = logged(path)
    assert logged_call.tool_calls == [call]
    assert [r.data for r in logged_call.tool_results] == [5]
    assert len(logged_call.turns) == 2
    assert logged_call.turns[0]["answer"]["tool_calls"][0]["function"]["name"] == "add"
    second = logged_call.turns[1]["request"]["messages"]
    assert second[-1]["role"] == "tool" and second[-1]["tool_call_id"] == "c1"
    assert logged_call.messages == [{"role": "user", "content": "What is 2 + 3?"}]


def test_a_stream_closed_early_is_cancelled_with_the_text_so_far(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, [TextEvent("first "), TextEvent("second"), FinishEvent("stop")])
    pieces = llm.stream("go")
    assert next(pieces) == "first "
    pieces.close()
    [call] = logged(path)
    assert call.finish == "cancelled"
    assert call.text == "first "


def test_events_closed_early_are_cancelled_too(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, [TextEvent("a"), TextEvent("b"), FinishEvent("stop")])
    events = llm.events("go")
    next(events)
    events.close()
    [call] = logged(path)
    assert (call.source, call.finish, call.text) == ("events", "cancelled", "a")


def test_the_row_is_committed_before_the_call_returns(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "a", "b")
    llm.ask("one")
    assert count_rows(path) == 1  # another connection sees it at once
    llm.ask("two")
    assert count_rows(path) == 2


def test_a_failed_call_keeps_its_error(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path)  # an empty script: the request fails
    with pytest.raises(ollm_lite.OllmError) as caught:
        llm.ask("hello")
    [call] = logged(path)
    assert call.finish == "error"
    assert call.error_code == caught.value.code
    assert call.error_message
    assert logged(path, errors=True) == [call]


def test_a_session_links_its_calls_and_keeps_the_id_through_save_and_load(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "a", "b", "c")
    chat = llm.session(system="Terse.")
    chat.ask("one")
    chat.ask("two")
    saved = tmp_path / "chat.json"
    chat.save(saved)
    again = ollm_lite.load_session(saved, client=llm)
    again.ask("three")
    calls = logged(path)
    assert {c.session_id for c in calls} == {chat.session_id}
    assert again.session_id == chat.session_id
    other, _ = logging_client(path, "x")
    other.ask("alone")
    assert logged(path)[-1].session_id is None


def test_a_session_file_without_an_id_still_loads(tmp_path: Path) -> None:
    saved = tmp_path / "old.json"
    saved.write_text(
        '{"format": "ollm-lite-session", "version": 1, "system": null, "messages": '
        '[{"role": "user", "content": "hi"}]}',
        "utf-8",
    )
    llm = ollm_lite.connect(ScriptedProvider([]), model="m")
    chat = ollm_lite.load_session(saved, client=llm)
    assert len(chat.messages) == 1 and chat.session_id


def test_an_image_is_kept_by_hash_size_and_type_never_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    raw = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4
    llm, _ = logging_client(path, "a cat")
    llm.ask("What is this?", images=[ImagePart(base64.b64encode(raw).decode(), "image/png")])
    [call] = logged(path)
    parts = call.messages[-1]["content"]
    assert parts[-1] == {
        "type": "image",
        "sha256": hashlib.sha256(raw).hexdigest(),
        "bytes": len(raw),
        "mime": "image/png",
    }
    assert base64.b64encode(raw)[:40] not in path.read_bytes() + Path(f"{path}-wal").read_bytes()


def test_ids_sort_by_time(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, *"abcdef")
    for prompt in "abcdef":
        llm.ask(prompt)
    calls = logged(path)
    assert [c.messages[-1]["content"] for c in calls] == list("abcdef")
    assert [c.id for c in calls] == sorted(c.id for c in calls)
    assert [c.started for c in calls] == sorted(c.started for c in calls)


def test_files_are_the_owners_alone(tmp_path: Path) -> None:
    path = tmp_path / "new" / "folder" / "logs.db"
    llm, _ = logging_client(path, "a")
    llm.ask("x")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    wal = Path(f"{path}-wal")
    assert not wal.exists() or stat.S_IMODE(wal.stat().st_mode) == 0o600


def test_cache_without_the_log_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        ollm_lite.connect(ScriptedProvider([]), model="m", log=False, cache=True)
