"""Never a secret in the log: keys, header values, URL user-info, MCP env and header values —
also inside error messages and answers that echo them. A canary grep of the file and its WAL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support import ollama_support as oll
from support.echo_mcp import echo_mcp_server
from support.log_support import file_bytes, logged, logging_client
from support.secret_scan import stored_strings

import ollm_lite
from ollm_lite import FinishEvent, ScriptedProvider, ToolCall, ToolCallEvent

KEY = "sk-canary-KEY-7f3a9c1e5b"
HEADER = "hdr-canary-VALUE-2d8e4f"
PASSWORD = "pw-canary-USERINFO-9b1c"
MCP_ENV = "mcp-canary-ENV-4a6d2e"
MCP_HEADER = "mcp-canary-HEADER-8c3f1a"
CANARIES = (KEY, HEADER, PASSWORD, MCP_ENV, MCP_HEADER)


def _echo_everything() -> list[bytes]:
    words = [f"echo {secret} " for secret in CANARIES]
    return oll.text_transcript(words=words)


def _config(tmp_path: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text(
        "[mcp.servers.tool]\n"
        'command = ["true"]\n'
        f'env = {{ PLAIN_SETTING = "{MCP_ENV}" }}\n'
        "[mcp.servers.remote]\n"
        'url = "http://127.0.0.1:9/mcp"\n'
        f'headers = {{ X-Whatever = "{MCP_HEADER}" }}\n',
        "utf-8",
    )
    return config


def test_no_secret_reaches_the_file_or_its_wal(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    routes = {("POST", "/api/chat"): oll.stream(_echo_everything())}
    with oll.serve(routes) as server:
        host = server.url.replace("http://", f"http://user:{PASSWORD}@")
        llm = ollm_lite.connect(
            "local", host=host, api_key=KEY, model="llama3.2", log=str(path),
            config=_config(tmp_path),
        )  # fmt: skip
        answer = llm.ask(f"repeat {KEY} and {HEADER}", headers={"X-Trace": HEADER})
        llm.close()
    assert KEY in answer  # the caller gets the answer unchanged
    [call] = logged(path)
    data = file_bytes(path)
    for secret in CANARIES:
        assert secret.encode() not in data, secret
    assert "***" in call.text and "***" in call.messages[-1]["content"]
    assert call.host is not None and "user" not in call.host and PASSWORD not in call.host
    assert "headers" not in call.options


def test_an_error_echoing_the_key_is_stored_masked(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    routes = {("POST", "/api/chat"): oll.json_answer({"error": f"unknown key {KEY}"}, 400)}
    with oll.serve(routes) as server:
        llm = ollm_lite.connect(
            "local", host=server.url, api_key=KEY, model="llama3.2", log=str(path)
        )
        with pytest.raises(ollm_lite.OllmError):
            llm.ask("hello")
        llm.close()
    [call] = logged(path)
    assert call.error_code is not None
    assert KEY.encode() not in file_bytes(path)


SERVER_ENV = "mcp-code-ENV-5e1b7c"
SERVER_HEADER = "mcp-code-HEADER-3f9a0d"
CALL_HEADER = "conn-canary-HEADER-6d2b8e"


@contextmanager
def _server(kind: str) -> Iterator[tuple[ollm_lite.McpServer, str]]:
    """An MCP server built in code (not configured) whose ``whoami`` tool echoes its secret."""
    secret = SERVER_ENV if kind == "stdio" else SERVER_HEADER
    with echo_mcp_server(kind, secret) as server:
        yield server, secret


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_secrets_of_an_mcp_server_built_in_code_reach_neither_file(
    kind: str, tmp_path: Path
) -> None:
    """``run(..., tools=server.tools())`` with a server given ``env=``/``headers=`` in code,
    whose tool echoes the value, and a client given ``headers=``: the tool result, the next
    turn's request, the answer and the prompt quoting them are all stored masked."""
    path = tmp_path / "logs.db"
    with _server(kind) as (server, secret):
        call = ToolCall.from_arguments("c1", "whoami", {})
        llm, _ = logging_client(
            path,
            [ToolCallEvent(call), FinishEvent("tool")],
            f"The token is {secret}, sent with {CALL_HEADER}.",
            headers={"X-Trace": CALL_HEADER},
        )
        reply = llm.run(f"who am I? ({secret}, {CALL_HEADER})", tools=server.tools())
        llm.close()
    assert reply.tool_results[0].ok and secret in str(reply.tool_results[0].data)
    assert secret in reply.text  # the caller gets everything unchanged
    [logged_call] = logged(path)
    data = file_bytes(path)
    for canary in (secret, CALL_HEADER):
        assert canary.encode() not in data, canary
    assert "***" in logged_call.text and "***" in str(logged_call.tool_results[0].data)
    assert logged_call.messages[-1]["content"] == "who am I? (***, ***)"


ESCAPED = "sk-esc/aped-KEY-é4b1"


def test_a_key_echoed_in_usage_is_stored_masked(tmp_path: Path) -> None:
    """A server copying the ``Authorization`` header into its usage figures: the ``usage``
    column (and the turn's answer) hold it masked; the caller's ``Reply.usage`` is as sent."""
    path = tmp_path / "logs.db"
    details = {"prompt_tokens_details": {"authorization": f"Bearer {KEY}"}}
    turn = [ollm_lite.TextEvent("hi"), FinishEvent("stop", ollm_lite.Usage(3, 1, 4, details))]
    llm, _ = logging_client(path, turn, headers={"Authorization": f"Bearer {KEY}"})
    reply = llm.run("hello")
    llm.close()
    assert KEY in json.dumps(reply.usage.extra if reply.usage else {})
    [call] = logged(path)
    assert KEY.encode() not in file_bytes(path)
    assert call.usage is not None and call.usage.prompt_tokens == 3
    assert "***" in json.dumps(call.usage.extra)


@pytest.mark.parametrize(
    "spelled",
    [
        ESCAPED.replace("/", "\\/"),
        json.dumps(ESCAPED)[1:-1],
        json.dumps(ESCAPED)[1:-1].replace("/", "\\/"),
    ],
    ids=["slash", "ascii", "both"],
)
def test_a_key_escaped_in_tool_arguments_reads_back_masked(tmp_path: Path, spelled: str) -> None:
    """Tool arguments spelling the key with JSON escapes (``\\/``, ``\\u00e9``): what the log
    gives back — the parsed ``args`` as well as the raw ``arguments`` — holds it masked."""
    path = tmp_path / "logs.db"
    call = ToolCall.from_arguments("c1", "lookup", '{"q": "' + spelled + '"}')
    assert call.args == {"q": ESCAPED}
    llm, _ = logging_client(
        path, [ToolCallEvent(call), FinishEvent("tool")], headers={"X-Key": ESCAPED}
    )
    external = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    reply = llm.run("look it up", tools=[external])
    llm.close()
    assert reply.tool_calls[0].args == {"q": ESCAPED}  # the caller's own, unchanged
    [logged_call] = logged(path)
    assert logged_call.tool_calls[0].args == {"q": "***"}
    assert all(ESCAPED not in s for s in stored_strings(path))
    assert ESCAPED not in repr(logged_call)


def test_a_session_keeps_masking_a_call_header_in_later_calls(tmp_path: Path) -> None:
    """Call 1 is handed ``headers=`` and its answer echoes the value; calls 2 and 3 are
    handed nothing, yet their records (which carry call 1's answer in their messages) and the
    saved session hold it masked. The live history keeps the answer as it came."""
    path, saved = tmp_path / "logs.db", tmp_path / "chat.json"
    llm, _ = logging_client(path, f"you sent {CALL_HEADER}", "noted", "still noted")
    chat = llm.session()
    chat.ask("what did I send?", headers={"X-Trace": CALL_HEADER})
    chat.ask("and now?")
    list(chat.stream("once more"))
    chat.save(saved)
    llm.close()
    assert CALL_HEADER in chat.messages[1].text
    assert CALL_HEADER.encode() not in file_bytes(path)
    _, second, third = logged(path)
    assert second.messages[1]["content"] == "you sent ***" == third.messages[1]["content"]
    assert CALL_HEADER not in saved.read_text("utf-8")
    assert CALL_HEADER not in repr(chat)
    loaded = ollm_lite.load_session(saved, llm)
    assert loaded.messages[1].text == "you sent ***"
    assert loaded.session_id == chat.session_id


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_a_session_keeps_masking_an_mcp_secret_in_later_calls(kind: str, tmp_path: Path) -> None:
    """Call 1 runs an MCP tool whose result echoes the server's ``env``/``headers`` value;
    call 2 is given no tools: its record (the tool result is in its messages) masks it."""
    path, saved = tmp_path / "logs.db", tmp_path / "chat.json"
    with _server(kind) as (server, secret):
        call = ToolCall.from_arguments("c1", "whoami", {})
        llm, _ = logging_client(path, [ToolCallEvent(call), FinishEvent("tool")], "ok", "fine")
        chat = llm.session()
        chat.run("who am I?", tools=server.tools())
        chat.ask("and?")
        chat.save(saved)
        llm.close()
    assert any(secret in m.text for m in chat.messages)  # in memory, as the tool said
    assert secret.encode() not in file_bytes(path)
    _, second = logged(path)
    assert any("token ***" in str(m["content"]) for m in second.messages)
    assert secret not in saved.read_text("utf-8")


def test_a_strict_replay_of_a_history_carrying_a_secret_replays(tmp_path: Path) -> None:
    """The log holds a tool result echoing an MCP server's secret masked; replaying the same
    script strictly, the live request (which carries the secret again) is the logged one."""
    path = tmp_path / "logs.db"
    with _server("http") as (server, _):
        call = ToolCall.from_arguments("c1", "whoami", {})
        llm, _ = logging_client(path, [ToolCallEvent(call), FinishEvent("tool")], "ok", "fine")
        chat = llm.session()
        chat.run("who am I?", tools=server.tools(), headers={"X-Trace": CALL_HEADER})
        chat.ask(f"and {CALL_HEADER}?")
        llm.close()
        replay = ollm_lite.ScriptedProvider.from_log(logged(path))
        again = ollm_lite.connect(replay, model="m").session()
        again.run("who am I?", tools=server.tools(), headers={"X-Trace": CALL_HEADER})
        assert again.ask(f"and {CALL_HEADER}?") == "fine"


def test_a_strict_replay_that_differs_does_not_quote_a_header_value(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, _ = logging_client(path, "hi")
    llm.ask("hello")
    llm.close()
    replay = ollm_lite.ScriptedProvider.from_log(logged(path))
    with pytest.raises(ollm_lite.ConfigError) as caught:
        ollm_lite.connect(replay, model="m").ask(
            f"hello {CALL_HEADER}", headers={"X-Trace": CALL_HEADER}
        )
    assert "messages[0]" in caught.value.message and CALL_HEADER not in caught.value.message


def test_a_saved_session_masks_the_clients_secrets_and_leaves_out_a_block_quoting_one(
    tmp_path: Path,
) -> None:
    """A session given its history in code, on a client with a default header: the saved
    file masks the value in the text, keeps a clean thinking block as it was, and leaves out
    one whose text quotes the value (masking it would break its signature)."""
    from ollm_lite.types import Message, ProviderBlock

    clean = ProviderBlock("anthropic", {"type": "thinking", "thinking": "hm", "signature": "s1"})
    quoting = ProviderBlock("anthropic", {"type": "thinking", "thinking": CALL_HEADER})
    history = [
        Message.user("what did I send?"),
        Message("assistant", [ollm_lite.TextPart(f"you sent {CALL_HEADER}")],
                provider_blocks=(clean, quoting)),
    ]  # fmt: skip
    saved = tmp_path / "chat.json"
    with ollm_lite.connect(ScriptedProvider([]), model="m", headers={"X": CALL_HEADER}) as llm:
        ollm_lite.Session(llm, messages=history).save(saved)
        loaded = ollm_lite.load_session(saved, llm)
    assert CALL_HEADER not in saved.read_text("utf-8")
    assert loaded.messages[1].text == "you sent ***"
    assert loaded.messages[1].provider_blocks == (clean,)
