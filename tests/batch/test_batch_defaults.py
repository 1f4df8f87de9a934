"""A client's options (``connect(**options)``) are the defaults of every batch line, under the
line's own body: headers, generation options, ``extra_body``, ``think``, ``keep_alive``,
``tool_choice`` and ``timeout`` (each line's deadline). Real HTTP on loopback (Ollama's wire)."""

from __future__ import annotations

import contextlib
import json
import socket
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from support.batch_support import chat_line, read_output, write_lines
from support.transport_support import Request, respond, serve

import ollm_lite
from ollm_lite.batch import BatchFileError

SECRET = "tenant-secret-7"


def _answer(client: socket.socket, req: Request) -> None:
    text = req.json["messages"][-1]["content"]
    if text.startswith("fail"):  # a server quoting the request's header in its error
        respond(client, 500, json.dumps({"error": f"no tenant {SECRET}"}).encode())
        return
    answer = {
        "model": "m",
        "message": {"role": "assistant", "content": f"ok {text}"},
        "done": True,
        "done_reason": "stop",
    }
    respond(client, 200, json.dumps(answer).encode() + b"\n", content_type="application/x-ndjson")


def _held(client: socket.socket, req: Request) -> None:
    req.stop.wait(5)  # never answers while the test runs (bounded, so a failure cannot hang)


def _connect(url: str, **options: Any) -> ollm_lite.Client:
    return ollm_lite.connect("local", host=url, model="m", log=False, **options)


def test_the_clients_options_reach_each_line_and_the_lines_body_wins(tmp_path: Path) -> None:
    with serve({"/api/chat": _answer}, keep_alive=True) as srv:
        inp = write_lines(
            tmp_path / "in.jsonl",
            [
                chat_line("plain", "a"),
                chat_line(
                    "own", "b", temperature=0.9, max_tokens=16, custom=2, think=True,
                    keep_alive="1m",
                ),
            ],
        )  # fmt: skip
        with _connect(
            srv.url,
            headers={"X-Tenant": SECRET},
            temperature=0.25,
            max_tokens=7,
            seed=3,
            extra_body={"custom": 1, "added": "yes"},
            think=False,
            keep_alive="5m",
        ) as llm:
            summary = ollm_lite.run_batch(inp, tmp_path / "out.jsonl", client=llm)
        assert (summary.done, summary.failed) == (2, 0)
        sent = {r.json["messages"][-1]["content"]: r for r in srv.requests}
    plain, own = sent["a"], sent["b"]
    for request in (plain, own):
        assert request.headers.get("x-tenant") == SECRET
        assert request.json["options"]["seed"] == 3
        assert request.json["added"] == "yes"
    assert plain.json["options"]["temperature"] == 0.25
    assert plain.json["options"]["num_predict"] == 7
    assert (plain.json["custom"], plain.json["think"], plain.json["keep_alive"]) == (1, False, "5m")
    assert own.json["options"]["temperature"] == 0.9
    assert own.json["options"]["num_predict"] == 16
    assert (own.json["custom"], own.json["think"], own.json["keep_alive"]) == (2, True, "1m")


def test_the_clients_headers_are_secrets_in_error_lines(tmp_path: Path) -> None:
    with serve({"/api/chat": _answer}, keep_alive=True) as srv:
        inp = write_lines(tmp_path / "in.jsonl", [chat_line("x", "fail now")])
        with _connect(srv.url, headers={"X-Tenant": SECRET}) as llm:
            summary = ollm_lite.run_batch(inp, tmp_path / "out.jsonl", client=llm)
        assert srv.requests[0].headers.get("x-tenant") == SECRET
    assert summary.failed == 1
    raw = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    assert SECRET not in raw
    assert "no tenant ***" in read_output(tmp_path / "out.jsonl")[0]["error"]["message"]


def test_the_clients_headers_are_secrets_in_the_call_log(tmp_path: Path) -> None:
    def echo_header(client: socket.socket, req: Request) -> None:
        answer = {
            "model": "m",
            "message": {"role": "assistant", "content": f"you are {req.headers['x-tenant']}"},
            "done": True,
            "done_reason": "stop",
        }
        body = json.dumps(answer).encode() + b"\n"
        respond(client, 200, body, content_type="application/x-ndjson")

    log = tmp_path / "calls.db"
    with serve({"/api/chat": echo_header}) as srv:
        inp = write_lines(tmp_path / "in.jsonl", [chat_line("x", "who am I?")])
        with ollm_lite.connect(
            "local", host=srv.url, model="m", log=log, headers={"X-Tenant": SECRET}
        ) as llm:
            summary = ollm_lite.run_batch(inp, tmp_path / "out.jsonl", client=llm)
    assert summary.done == 1
    with contextlib.closing(sqlite3.connect(log)) as db:
        dump = "\n".join(db.iterdump())
    assert "you are ***" in dump
    assert SECRET not in dump


@pytest.mark.parametrize(
    ("route", "line"),
    [
        ("/api/chat", chat_line("slow", "a")),
        (
            "/api/embed",
            {"custom_id": "slow", "url": "/v1/embeddings", "body": {"model": "e", "input": "a"}},
        ),
    ],
)
def test_the_clients_timeout_is_each_lines_deadline(
    tmp_path: Path, route: str, line: dict[str, object]
) -> None:
    with serve({route: _held}) as srv:
        inp = write_lines(tmp_path / "in.jsonl", [line])
        with _connect(srv.url, timeout=0.3) as llm:
            summary = ollm_lite.run_batch(inp, tmp_path / "out.jsonl", client=llm)
    assert summary.failed == 1
    (written,) = read_output(tmp_path / "out.jsonl")
    assert written["error"]["code"] == "LLM_TIMEOUT"


def test_a_default_tool_choice_applies_where_the_line_has_none(tmp_path: Path) -> None:
    tools = [
        {"type": "function", "function": {"name": name, "parameters": {}}}
        for name in ("lookup", "other")
    ]
    with serve({"/api/chat": _answer}, keep_alive=True) as srv:
        inp = write_lines(
            tmp_path / "in.jsonl",
            [
                chat_line("forced", "a", tools=tools),
                chat_line("own", "b", tools=tools, tool_choice="auto"),
            ],
        )
        with _connect(srv.url, tool_choice="lookup") as llm:
            ollm_lite.run_batch(inp, tmp_path / "out.jsonl", client=llm)
        sent = {r.json["messages"][-1]["content"]: r.json for r in srv.requests}
    # Ollama has no tool_choice: a forced tool is sent alone
    assert [t["function"]["name"] for t in sent["a"]["tools"]] == ["lookup"]
    assert [t["function"]["name"] for t in sent["b"]["tools"]] == ["lookup", "other"]


def test_a_default_tool_choice_the_line_cannot_follow_stops_the_run_before_sending(
    tmp_path: Path,
) -> None:
    tool = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    with serve({"/api/chat": _answer}, keep_alive=True) as srv:
        inp = write_lines(
            tmp_path / "in.jsonl",
            [chat_line("tools", "a", tools=[tool]), chat_line("none", "b")],
        )
        with _connect(srv.url, tool_choice="lookup") as llm:
            with pytest.raises(BatchFileError, match="line 2: the client's default tool_choice"):
                ollm_lite.run_batch(inp, tmp_path / "out.jsonl", client=llm)
        assert srv.requests == []
