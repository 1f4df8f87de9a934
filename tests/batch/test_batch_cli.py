"""``ollm-lite batch run`` / ``batch make`` as a user runs them: a subprocess against loopback
servers. Exit codes: 0 all answered, 1 some failed, 2 invalid input (nothing sent), 130 Ctrl-C."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from support.batch_support import chat_line, read_output, write_lines, write_prompts
from support.cli_support import assert_one_line_error, popen, run
from support.fault_server import refused_url
from support.transport_support import LoopbackServer, Request, respond, serve

CHAT = "/v1/chat/completions"


class Held:
    """A chat route that answers ``ok: <prompt>`` once released (``fail`` prompts get 500)."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.release.set()
        self.in_flight = 0
        self.lock = threading.Lock()

    def __call__(self, client: socket.socket, req: Request) -> None:
        with self.lock:
            self.in_flight += 1
        try:
            while not self.release.wait(0.01):
                if req.stop.is_set():
                    return
            prompt = json.loads(req.body)["messages"][-1]["content"]
            if prompt.startswith("fail"):
                respond(client, 500, b'{"error": {"message": "model crashed"}}')
                return
            message = {"role": "assistant", "content": f"ok: {prompt}"}
            answer = {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}
            respond(client, 200, json.dumps(answer).encode())
        finally:
            with self.lock:
                self.in_flight -= 1


@pytest.fixture
def server() -> Iterator[tuple[LoopbackServer, Held]]:
    route = Held()
    route.keep_alive = True  # type: ignore[attr-defined]
    with serve({CHAT: route}) as srv:
        yield srv, route


def _args(url: str, *more: str) -> list[str]:
    return ["--provider", "openai-compatible", "--model", "m", "batch", "run", *more, "--host", url]


def test_a_complete_run_exits_0_and_a_rerun_sends_nothing(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    srv, _ = server
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b", "c"])
    out = tmp_path / "out.jsonl"
    done = run(tmp_path, *_args(srv.url, str(inp), "-o", str(out)))
    assert done.returncode == 0, done.stderr
    assert "3 done, 0 failed" in done.stderr
    assert len(read_output(out)) == 3
    sent = len(srv.requests)
    again = run(tmp_path, *_args(srv.url, str(inp), "-o", str(out)))
    assert again.returncode == 0
    assert "3 already in" in again.stderr
    assert len(srv.requests) == sent


def test_failed_lines_exit_1_after_all_are_written_and_retry_failed_reruns_them(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    srv, _ = server
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "fail", "c"])
    out = tmp_path / "out.jsonl"
    first = run(tmp_path, *_args(srv.url, str(inp), "-o", str(out)))
    assert first.returncode == 1
    lines = read_output(out)
    assert len(lines) == 3
    (bad,) = [x for x in lines if x["error"]]
    assert bad["response"]["status_code"] == 500
    assert bad["response"]["body"]["error"]["message"] == "model crashed"  # the server's words
    assert bad["error"]["code"] == "LLM_HTTP_ERROR"
    retried = run(tmp_path, *_args(srv.url, str(inp), "-o", str(out), "--retry-failed"))
    assert retried.returncode == 1  # the server still fails it
    assert len(read_output(out)) == 3
    assert "1 failed, 2 already in" in retried.stderr


def test_a_resumed_run_exits_1_while_the_output_holds_errors_from_before(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    """A first run against a wrong host fails every line; the rerun against the right one
    sends nothing new (the failed lines are kept) and still exits 1, saying so."""
    srv, _ = server
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b"])
    out = tmp_path / "out.jsonl"
    with refused_url() as dead:
        wrong = run(tmp_path, *_args(dead, str(inp), "-o", str(out)))
    assert wrong.returncode == 1, wrong.stderr
    assert "2 line(s)" in wrong.stderr
    rerun = run(tmp_path, *_args(srv.url, str(inp), "-o", str(out)))
    assert rerun.returncode == 1, rerun.stderr
    assert "0 failed, 2 already in" in rerun.stderr
    (said,) = [line for line in rerun.stderr.splitlines() if "hold an error" in line]
    assert "2 line(s)" in said and "--retry-failed" in said
    assert srv.requests == []
    retried = run(tmp_path, *_args(srv.url, str(inp), "-o", str(out), "--retry-failed"))
    assert retried.returncode == 0, retried.stderr
    assert "hold an error" not in retried.stderr
    assert all(x["error"] is None for x in read_output(out))


def test_an_invalid_input_exits_2_before_any_request(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    srv, _ = server
    inp = write_lines(tmp_path / "in.jsonl", [chat_line("x", "a"), chat_line("x", "b")])
    result = run(tmp_path, *_args(srv.url, str(inp), "-o", str(tmp_path / "out.jsonl")))
    assert result.returncode == 2
    assert_one_line_error(result.stderr, "CONFIG_INVALID")
    assert "duplicate custom_id 'x'" in result.stderr
    assert srv.requests == []
    assert not (tmp_path / "out.jsonl").exists()


def test_plain_progress_lines_when_not_a_terminal(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    srv, _ = server
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b"])
    result = run(tmp_path, *_args(srv.url, str(inp), "-o", str(tmp_path / "o.jsonl")))
    progress = [line for line in result.stderr.splitlines() if line.startswith("batch: 2/2")]
    assert progress and "\r" not in result.stderr


def test_a_fleet_of_hosts_from_the_command_line(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    srv, _ = server
    route = Held()
    route.keep_alive = True  # type: ignore[attr-defined]
    with serve({CHAT: route}) as other, refused_url() as dead:
        inp = write_prompts(tmp_path / "in.jsonl", [f"p{i}" for i in range(12)])
        result = run(
            tmp_path,
            *_args(srv.url, str(inp), "-o", str(tmp_path / "o.jsonl"), "--per-host", "2"),
            "--host",
            dead,
            "--host",
            other.url,
        )
        assert result.returncode == 0, result.stderr
        assert srv.requests and other.requests
        assert f"ollm-lite: fleet: {dead} ejected" in result.stderr  # health is visible
        assert "hosts 2/3 up" in result.stderr or "hosts 3/3 up" in result.stderr


class Lines:
    """Collects a child's stderr lines as they come (a thread reads the pipe)."""

    def __init__(self, stream: object) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: object) -> None:
        for raw in iter(stream.readline, b""):  # type: ignore[attr-defined]
            self.lines.append(raw.decode("utf-8", "replace"))

    def text(self) -> str:
        self._thread.join(60)
        return "".join(self.lines)

    def saw(self, needle: str) -> bool:
        return any(needle in line for line in self.lines)


def _wait(condition: object, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


@contextmanager
def _interrupted_run(
    tmp_path: Path, server: tuple[LoopbackServer, Held], prompts: int
) -> Iterator[tuple[subprocess.Popen[bytes], Lines, Path, Path]]:
    """A batch run of ``prompts`` lines at concurrency 2, stopped by one Ctrl-C while two
    requests are held in flight; yields (process, its stderr, input, output). The held requests
    are released and the process is killed on the way out."""
    srv, route = server
    route.release.clear()
    inp = write_prompts(tmp_path / "in.jsonl", [f"p{i}" for i in range(prompts)])
    out = tmp_path / "out.jsonl"
    proc = popen(tmp_path, *_args(srv.url, str(inp), "-o", str(out), "--concurrency", "2"))
    err = Lines(proc.stderr)
    try:
        _wait(lambda: route.in_flight == 2)
        proc.send_signal(signal.SIGINT)
        _wait(lambda: err.saw("interrupt: no new requests"))
        yield proc, err, inp, out
    finally:
        route.release.set()
        proc.kill()


def test_ctrl_c_lets_requests_in_flight_finish_then_exits_130(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    srv, route = server
    with _interrupted_run(tmp_path, server, prompts=6) as (proc, err, inp, out):
        route.release.set()
        proc.wait(timeout=60)
    assert proc.returncode == 130, err.text()
    assert "run the same command again to resume" in err.text()
    lines = read_output(out)
    assert len(lines) == 2 and all(x["error"] is None for x in lines)
    assert len([r for r in srv.requests if r.path == CHAT]) == 2  # nothing new was started
    resumed = run(tmp_path, *_args(srv.url, str(inp), "-o", str(out)))
    assert resumed.returncode == 0
    assert sorted(x["custom_id"] for x in read_output(out)) == [f"c{i}" for i in range(6)]


def test_a_second_ctrl_c_cancels_requests_in_flight(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    with _interrupted_run(tmp_path, server, prompts=4) as (proc, _err, _inp, out):
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=60)
    assert proc.returncode == 130
    assert out.read_bytes() == b""  # cancelled lines are not written: the next run sends them


def test_batch_make_from_text_and_csv(tmp_path: Path) -> None:
    prompts = tmp_path / "p.txt"
    prompts.write_text("first\n\nsecond, with a comma\n")
    result = run(
        tmp_path, "batch", "make", str(prompts), "-o", str(tmp_path / "in.jsonl"),
        "--model", "m", "--system", "Be brief.",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [json.loads(x) for x in (tmp_path / "in.jsonl").read_text().splitlines()]
    assert [x["custom_id"] for x in lines] == ["prompt-1", "prompt-3"]
    assert lines[1]["body"] == {
        "model": "m",
        "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "second, with a comma"},
        ],
    }
    table = tmp_path / "t.csv"
    table.write_text('custom_id,text,other\nT-1,"multi\nline",x\nT-2,plain,y\n')
    made = run(
        tmp_path, "batch", "make", str(table), "-o", str(tmp_path / "c.jsonl"), "--column", "text"
    )
    assert made.returncode == 0, made.stderr
    rows = [json.loads(x) for x in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert [(r["custom_id"], r["body"]["messages"][-1]["content"]) for r in rows] == [
        ("T-1", "multi\nline"),
        ("T-2", "plain"),
    ]
    assert "model" not in rows[0]["body"]
    wrong = run(
        tmp_path, "batch", "make", str(table), "-o", str(tmp_path / "d.jsonl"), "--column", "nope"
    )
    assert wrong.returncode == 2
    assert_one_line_error(wrong.stderr, "CONFIG_INVALID")


def test_batch_make_id_column_takes_each_lines_id_and_refuses_empty_or_repeated_ones(
    tmp_path: Path,
) -> None:
    table = tmp_path / "t.csv"
    table.write_text("ticket,text\nT-7,Printer on fire\nT-9,Password reset\n")
    out = tmp_path / "in.jsonl"
    made = run(tmp_path, "batch", "make", str(table), "-o", str(out), "--id-column", "ticket")
    assert made.returncode == 0, made.stderr
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert [(r["custom_id"], r["body"]["messages"][-1]["content"]) for r in rows] == [
        ("T-7", "Printer on fire"),
        ("T-9", "Password reset"),
    ]
    for text, row in [
        ("ticket,text\nT-7,a\nT-8,b\nT-7,c\n", "row 4"),  # the header is row 1
        ('ticket,text\nT-7,"two\nlines"\n\n ,b\n', "row 4 (line 5)"),  # a blank line is a row
    ]:
        table.write_text(text)
        refused = run(
            tmp_path, "batch", "make", str(table), "-o", str(tmp_path / "x.jsonl"),
            "--id-column", "ticket",
        )  # fmt: skip
        assert refused.returncode == 2, refused.stderr
        assert_one_line_error(refused.stderr, "CONFIG_INVALID")
        assert row in refused.stderr
        assert not (tmp_path / "x.jsonl").exists()
    unknown = run(
        tmp_path, "batch", "make", str(table), "-o", str(tmp_path / "x.jsonl"),
        "--id-column", "nope",
    )  # fmt: skip
    assert unknown.returncode == 2 and "no column 'nope'" in unknown.stderr
    table.write_text('text\nA\n\n"B\nC"\nD\n')  # without ids: prompt-<the row's last line>
    made = run(tmp_path, "batch", "make", str(table), "-o", str(out))
    assert made.returncode == 0, made.stderr
    ids = [json.loads(x)["custom_id"] for x in out.read_text().splitlines()]
    assert ids == ["prompt-2", "prompt-5", "prompt-6"]


def test_the_command_lines_of_docs_batch_md_run_as_written(tmp_path: Path) -> None:
    """docs/batch.md's shell snippet, against two loopback servers standing in for gpu-a/b."""
    import re
    import shlex

    from support.cli_support import ROOT

    page = (ROOT / "docs" / "batch.md").read_text()
    (shell,) = re.findall(r"```sh\n(.*?)```", page, re.S)
    commands = [shlex.split(c) for c in shell.replace("\\\n", " ").strip().splitlines()]
    (tmp_path / "support-tickets.csv").write_text("text\nPrinter on fire\nPassword reset\n")
    first, second = Held(), Held()
    first.keep_alive = second.keep_alive = True  # type: ignore[attr-defined]
    with serve({CHAT: first}) as a, serve({CHAT: second}) as b:
        for argv in commands:
            assert argv[0] == "ollm-lite"
            args = [
                x.replace("http://gpu-a:8080", a.url).replace("http://gpu-b:8080", b.url)
                for x in argv[1:]
            ]
            args = [str(tmp_path / x) if x.startswith("support-") else x for x in args]
            result = run(tmp_path, *args)
            assert result.returncode == 0, result.stderr
        assert a.requests or b.requests
    labels = read_output(tmp_path / "support-labels.jsonl")
    assert sorted(x["custom_id"] for x in labels) == ["prompt-2", "prompt-3"]
    assert all(x["error"] is None for x in labels)


def test_run_batch_without_a_client_connects_as_the_cli_does(
    tmp_path: Path, server: tuple[LoopbackServer, Held], monkeypatch: pytest.MonkeyPatch
) -> None:
    """client=None: the configuration file and environment decide, as for ``ollm-lite``."""
    from ollm_lite import run_batch

    srv, _ = server
    config = tmp_path / "config.toml"
    config.write_text(
        f'provider = "openai-compatible"\nmodel = "m"\n'
        f'[providers.openai-compatible]\nbase_url = "{srv.url}"\n'
    )
    monkeypatch.setenv("OLLM_CONFIG", str(config))
    inp = write_prompts(tmp_path / "in.jsonl", ["a", "b"])
    summary = run_batch(inp, tmp_path / "out.jsonl")
    assert (summary.done, summary.failed) == (2, 0)
    assert len(srv.requests) == 2


def test_lines_without_a_model_use_the_servers_only_model(tmp_path: Path) -> None:
    from support.fault_server import status

    route = Held()
    route.keep_alive = True  # type: ignore[attr-defined]
    models = status(200, {"object": "list", "data": [{"id": "only-model", "object": "model"}]})
    with serve({CHAT: route, "/v1/models": models}) as srv:
        line = chat_line("a", "hi")
        del line["body"]["model"]
        inp = write_lines(tmp_path / "in.jsonl", [line])
        out = tmp_path / "out.jsonl"
        args = ["--provider", "openai-compatible", "batch", "run", str(inp), "-o", str(out)]
        result = run(tmp_path, *args, "--host", srv.url)
        assert result.returncode == 0, result.stderr
        sent = json.loads(next(r for r in srv.requests if r.path == CHAT).body)
        assert sent["model"] == "only-model"
        assert read_output(out)[0]["response"]["body"]["model"] == "only-model"


def test_the_configs_options_reach_each_line_and_the_lines_body_wins(
    tmp_path: Path, server: tuple[LoopbackServer, Held]
) -> None:
    """``[options]`` is every line's default (``max_tokens``), a line's own body wins."""
    srv, _ = server
    config = tmp_path / "config.toml"
    config.write_text("[options]\nmax_tokens = 77\ntemperature = 0.5\n")
    first, second = chat_line("a", "hi"), chat_line("b", "ho")
    second["body"]["max_tokens"] = 5
    inp = write_lines(tmp_path / "in.jsonl", [first, second])
    out = tmp_path / "out.jsonl"
    result = run(tmp_path, "--config", str(config), *_args(srv.url, str(inp), "-o", str(out)))
    assert result.returncode == 0, result.stderr
    sent = sorted(
        (json.loads(r.body) for r in srv.requests if r.path == CHAT),
        key=lambda body: body["messages"][-1]["content"],
    )
    assert [(b["max_tokens"], b["temperature"]) for b in sent] == [(77, 0.5), (5, 0.5)]


def test_dead_hosts_are_each_reported_down_once(tmp_path: Path) -> None:
    """Every host of the fleet refuses: the lines fail, and each host's going down is one
    warning line, not one per request it failed (the repeats are details for --debug)."""
    src, out = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    write_lines(src, [chat_line("a", "one"), chat_line("b", "two")])
    with refused_url() as first, refused_url() as second:
        dead = [first, second]
        args = ["--provider", "openai-compatible", "--model", "m", "batch", "run", str(src)]
        args += ["-o", str(out), "--host", first, "--host", second]
        done = run(tmp_path, *args)
    assert done.returncode == 1, done.stderr
    ejected = [line for line in done.stderr.splitlines() if " ejected for " in line]
    assert sorted(line.split()[2] for line in ejected) == sorted(dead), done.stderr
