"""Saved sessions and conversations: one reader, one writer, any path refused cleanly.

``load_session`` and ``Conversation.load`` read the same format through one reader (either
file loads as either, the system prompt kept); a damaged, deeply nested, huge or awkward file
is a ``ConfigError``; ``save`` to a path it cannot use is a ``ConfigError`` and leaves what
was there; a ``session_id`` in the file is tolerated and written back.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from support.client_support import client
from support.path_support import outcome_within

import ollm_lite
from ollm_lite import ConfigError, Message, ScriptedProvider
from ollm_lite.chat import ChatClient, Conversation

CHAT = ChatClient(ScriptedProvider(), model="m")


def test_deep_nesting_in_a_session_file_is_a_config_error(tmp_path: Path) -> None:
    llm, _ = client()
    deep = tmp_path / "deep.json"
    deep.write_text('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}")
    with pytest.raises(ConfigError) as caught:
        ollm_lite.load_session(deep, client=llm)
    assert str(deep) in caught.value.message


@pytest.mark.parametrize("saver", ["session", "conversation"])
def test_saving_to_a_path_with_a_nul_byte_is_a_config_error(tmp_path: Path, saver: str) -> None:
    llm, _ = client()
    folder = tmp_path / "out"
    folder.mkdir()
    target = str(folder / "a\0b.json")
    with pytest.raises(ConfigError) as caught:
        if saver == "session":
            llm.session().save(target)
        else:
            CHAT.conversation().save(target)
    assert caught.value.code == "CONFIG_INVALID"
    assert os.listdir(folder) == []


@pytest.mark.parametrize("saver", ["session", "conversation"])
def test_a_fifo_beside_the_target_does_not_block_a_save(tmp_path: Path, saver: str) -> None:
    """The temporary file is always a new one: a FIFO named like one is never opened."""
    target = tmp_path / "chat.json"
    fifo = tmp_path / "chat.json.tmp"
    os.mkfifo(fifo)
    llm, _ = client()

    def save() -> None:
        if saver == "session":
            llm.session(system="s").save(target)
        else:
            CHAT.conversation(system_prompt="s").save(target)

    assert outcome_within(save, [fifo]) is None
    assert json.loads(target.read_text("utf-8"))["messages"] == []


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_saving_over_a_fifo_or_a_directory_is_refused(tmp_path: Path, kind: str) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    target = folder / "chat.json"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.mkdir()
    llm, _ = client()
    with pytest.raises(ConfigError, match=kind.upper() if kind == "fifo" else kind):
        llm.session().save(target)
    assert target.is_fifo() if kind == "fifo" else target.is_dir()
    assert os.listdir(folder) == ["chat.json"]


def test_either_file_loads_as_either_with_its_system_prompt(tmp_path: Path) -> None:
    llm, _ = client("Oslo.")
    session = llm.session(system="Be brief.")
    session.ask("Capital?")
    session_file = tmp_path / "session.json"
    session.save(session_file)
    conversation_file = tmp_path / "conversation.json"
    Conversation(CHAT, system_prompt="Be kind.", history=session.messages).save(conversation_file)

    as_conversation = Conversation.load(session_file, CHAT)
    assert as_conversation.system_prompt == "Be brief."
    assert as_conversation.history == session.messages
    as_session = ollm_lite.load_session(conversation_file, client=llm)
    assert as_session.system == "Be kind."
    assert as_session.messages == session.messages


def test_a_session_id_and_unknown_keys_are_tolerated_and_the_id_kept(tmp_path: Path) -> None:
    llm, _ = client()
    path = tmp_path / "s.json"
    llm.session(system="s").save(path)
    data = json.loads(path.read_text("utf-8"))
    data["session_id"] = "01J0000000000000000000000"
    data["added_later"] = {"anything": [1, 2]}
    path.write_text(json.dumps(data), "utf-8")
    loaded = ollm_lite.load_session(path, client=llm)
    again = tmp_path / "again.json"
    loaded.save(again)
    assert json.loads(again.read_text("utf-8"))["session_id"] == "01J0000000000000000000000"
    data["session_id"] = 5
    path.write_text(json.dumps(data), "utf-8")
    with pytest.raises(ConfigError, match="session_id"):
        ollm_lite.load_session(path, client=llm)


def test_text_with_a_lone_surrogate_saves_and_loads_back(tmp_path: Path) -> None:
    llm, _ = client("ok")
    session = llm.session()
    session.ask("half a pair: \ud83d")
    path = tmp_path / "s.json"
    session.save(path)
    assert ollm_lite.load_session(path, client=llm).messages == session.messages


def test_a_file_over_the_limit_is_refused_and_never_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ollm_lite.chat._history_file as history_format

    monkeypatch.setattr(history_format, "HISTORY_LIMIT", 4096)
    llm, _ = client()
    path = tmp_path / "s.json"
    llm.session().save(path)
    big = ollm_lite.Session(llm, messages=[Message.user("x" * 8192)])
    with pytest.raises(ConfigError, match="larger than 4096 bytes"):
        big.save(path)
    assert ollm_lite.load_session(path, client=llm).messages == []
    path.write_text(json.dumps(big.to_dict()), "utf-8")
    with pytest.raises(ConfigError, match="larger than 4096 bytes"):
        ollm_lite.load_session(path, client=llm)
    with pytest.raises(ConfigError, match="larger than 4096 bytes"):
        Conversation.load(path, CHAT)
