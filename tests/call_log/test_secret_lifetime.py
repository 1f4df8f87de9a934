"""A secret stays a secret for the life of the data that carries it (docs/call-log.md, "Never
stored"; docs/reliability.md, "Secrets and redirects").

A canary property: a generated secret is handed to one call (a call's ``headers=``, the
client's default headers, the provider's key, an MCP server's ``headers`` or ``env``), a
server echoes it back (in the answer, the reasoning, the usage figures and tool arguments,
spelled with JSON escapes), and then the history carrying it lives on: more turns of the
``Session`` (``ask``, ``stream``, ``events``, none of them handed the secret), a saved and
reloaded session, a replay of the log with ``ScriptedProvider.from_log`` (a script run again
offline, itself logged), and a batch job made of the saved conversation. Whatever the draw,
the secret is in no database, ``-wal`` or ``-shm`` file (raw or once its JSON is decoded), no
saved session or batch output, no log record and no ``repr`` of what the library built — while
the caller's own history keeps it as the server sent it.
"""

from __future__ import annotations

import json
import string
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings, strategies as st
from support.echo_mcp import echo_mcp_server
from support.log_records import Records, captured_records
from support.log_support import file_bytes
from support.secret_scan import decoded_strings, file_strings, stored_strings

import ollm_lite
from ollm_lite import (
    FinishEvent,
    ScriptedProvider,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
    Usage,
)
from ollm_lite.call_log import open_log
from ollm_lite.types import ProviderEvent, ProviderRequest

#: Every secret holds a ``~`` (no text of the library holds one), and may hold what JSON and
#: ``repr`` escape (``/``, ``"``, ``\\``, ``'``, Latin-1 letters): any header can carry it.
_ALPHABET = string.ascii_letters + string.digits + "-_.+/=!$%&*~\"\\'éß"
secrets = st.builds(
    lambda head, tail: f"{head}~{tail}",
    st.text(string.ascii_letters + string.digits, min_size=1, max_size=10),
    st.text(_ALPHABET, min_size=2, max_size=24),
)

SOURCES = ("call_header", "client_header", "api_key", "mcp_http", "mcp_stdio")
SPELLINGS = ("plain", "slash", "ascii")


def _spelled(value: str, spelling: str) -> str:
    """``value`` inside a JSON string, as an encoder may write it."""
    if spelling == "plain":
        return json.dumps(value, ensure_ascii=False)[1:-1]
    escaped = json.dumps(value)[1:-1]
    return escaped.replace("/", "\\/") if spelling == "slash" else escaped


class EchoProvider(ScriptedProvider):
    """A server that echoes every header value it is sent and its own key (in the answer,
    the reasoning, the usage figures and a tool call's arguments, spelled ``spelling``), and
    quotes the last tool result."""

    def __init__(self, api_key: str | None, spelling: str) -> None:
        super().__init__([])
        self.api_key = api_key
        self.spelling = spelling

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        self.requests.append(request)
        said = " ".join([*request.headers.values(), *([self.api_key] if self.api_key else [])])
        usage = Usage(5, 2, 7, {"prompt_tokens_details": {"echo": said}})
        last = request.messages[-1]
        if request.tools and last.role == "user":
            name = request.tools[0].name
            arguments = '{"q": "' + _spelled(said, self.spelling) + '"}'
            yield ThinkingEvent(f"calling with {said}")
            yield ToolCallEvent(ToolCall.from_arguments("c1", name, arguments))
            yield FinishEvent("tool", usage)
            return
        quoted = last.text if last.role == "tool" else ""
        yield TextEvent(f"you sent [{said}] and the tool said [{quoted}]")
        yield FinishEvent("stop", usage)


def lookup(q: str) -> str:
    """Look ``q`` up.

    Args:
        q: What to look up.
    """
    return f"found {q}"


def _drive(
    client: ollm_lite.Client, tools: list[Any], headers: dict[str, str], saved: Path
) -> tuple[ollm_lite.Session, ollm_lite.Session]:
    """One call handed the secret, then every later use of its history."""
    chat = client.session()
    chat.run("who am I?", tools=tools, headers=headers)
    chat.ask("and then?")
    "".join(chat.stream("once more"))
    list(chat.events("and again"))
    chat.save(saved)
    loaded = ollm_lite.load_session(saved, client)
    loaded.ask("where were we?")
    return chat, loaded


def _batch(client: ollm_lite.Client, saved: Path, tmp: Path) -> list[str]:
    """A batch job made of the saved conversation: its output and what it reported."""
    messages = [
        {"role": m["role"], "content": "".join(p.get("text", "") for p in m["parts"])}
        for m in json.loads(saved.read_text("utf-8"))["messages"]
        if m["role"] in ("user", "assistant")
    ]
    source, output = tmp / "in.jsonl", tmp / "out.jsonl"
    line = {"method": "POST", "url": "/v1/chat/completions"}
    body = {"model": "m", "messages": [*messages, {"role": "user", "content": "sum it up"}]}
    source.write_text(json.dumps({"custom_id": "c1", **line, "body": body}) + "\n", "utf-8")
    summary = ollm_lite.run_batch(source, output, client=client)
    return [*file_strings(output), repr(summary)]


@settings(
    max_examples=30,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    secret=secrets,
    source=st.sampled_from(SOURCES),
    spelling=st.sampled_from(SPELLINGS),
)
def test_a_secret_stays_masked_for_the_life_of_its_history(
    tmp_path_factory: Any, secret: str, source: str, spelling: str
) -> None:
    """Any secret, handed any way, echoed in any spelling, then carried by the history
    through later turns, a saved and reloaded session, a replay and a batch job: stored and
    shown nowhere, kept in the caller's own history."""
    tmp = tmp_path_factory.mktemp("canary")
    logs, replayed = tmp / "logs.db", tmp / "replayed.db"
    call_headers = {"X-Call-Secret": secret} if source == "call_header" else {}
    defaults = {"headers": {"X-Client-Secret": secret}} if source == "client_header" else {}
    with ExitStack() as stack:
        records: Records = stack.enter_context(captured_records())
        tools: list[Any] = [lookup]
        shown: list[Any] = []
        if source.startswith("mcp_"):
            server = stack.enter_context(echo_mcp_server(source[4:], secret))
            tools = list(server.tools())
            shown.append(server)
        echo = EchoProvider(secret if source == "api_key" else None, spelling)
        client = stack.enter_context(ollm_lite.connect(echo, model="m", log=str(logs), **defaults))
        chat, loaded = _drive(client, tools, call_headers, tmp / "chat.json")
        texts = _batch(client, tmp / "chat.json", tmp)

        with open_log(logs) as log:
            calls = log.calls(limit=None)
        replay = ScriptedProvider.from_log(calls)
        again = stack.enter_context(
            ollm_lite.connect(replay, model="m", log=str(replayed), **defaults)
        )
        rechat, reloaded = _drive(again, tools, call_headers, tmp / "again.json")
        with open_log(replayed) as log:
            calls += log.calls(limit=None)
        shown += [client, chat, loaded, again, rechat, reloaded, replay, echo, *calls]

    # The caller's own history keeps what the server sent: the canary did reach it.
    assert any(secret in s for m in chat.messages for s in decoded_strings(m.text))
    for path in (logs, replayed):
        data = file_bytes(path)
        assert secret.encode() not in data and secret.encode("latin-1") not in data
        assert [s for s in stored_strings(path) if secret in s] == []
    for saved in (tmp / "chat.json", tmp / "again.json"):
        assert [s for s in file_strings(saved) if secret in s] == []
    assert [t for t in texts if secret in t] == []
    assert [t for t in records.texts if secret in t] == []
    reprs = [repr(value) for value in shown]
    reprs += [
        repr(r)
        for r in [*echo.requests, *replay.requests]
        if secret in r.headers.values()  # what a request is handed, it masks wherever shown
    ]
    assert [r for r in reprs if secret in r or repr(secret)[1:-1] in r] == []


def test_a_batch_answer_echoing_a_client_secret_is_written_masked(tmp_path: Path) -> None:
    """A batch line's answer quoting the client's key and default header: the output line
    holds both masked (as the call log does), the rest of the answer as it came."""
    key, header = "sk-batch-KEY/9f2~", "hdr-batch-VALUE~7c1"
    echo = EchoProvider(key, "slash")
    source, output = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    line = {"custom_id": "c1", "method": "POST", "url": "/v1/chat/completions", "body": body}
    source.write_text(json.dumps(line) + "\n", "utf-8")
    with ollm_lite.connect(echo, model="m", headers={"X-Secret": header}) as llm:
        ollm_lite.run_batch(source, output, client=llm)
    [written] = [json.loads(text) for text in output.read_text("utf-8").splitlines()]
    answer = written["response"]["body"]["choices"][0]["message"]["content"]
    assert answer == "you sent [*** ***] and the tool said []"
    assert [s for s in file_strings(output) if key in s or header in s] == []
