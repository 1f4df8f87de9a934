"""``ollm-lite chat`` as a subprocess against loopback Ollama- and llama.cpp-shaped servers."""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from support.cli_support import assert_one_line_error, popen, run
from support.ollama_support import (
    OllamaServer,
    Seen,
    error_midstream_transcript,
    json_answer,
    lines,
    refuse_port,
    serve,
    stream,
    text_transcript,
    thinking_transcript,
)
from support.openai_support import json_script, llamacpp_native_transcript
from support.transport_support import serve as serve_raw, stream_script

ANSWER = "The sky is blue because of Rayleigh scattering."


@pytest.fixture
def ollama() -> Iterator[OllamaServer]:
    with serve({("POST", "/api/chat"): stream(text_transcript())}) as server:
        yield server


def chat_bodies(server: OllamaServer) -> list[dict[str, object]]:
    return [s.json for s in server.seen if s.path == "/api/chat"]


def test_streams_answer_to_stdout(tmp_path: Path, ollama: OllamaServer) -> None:
    """The answer goes to stdout (ending in a newline), nothing to stderr, exit 0."""
    out = run(tmp_path, "--host", ollama.url, "--model", "llama3.2", "chat", "Why is the sky blue?")
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    assert out.stderr == ""
    body = chat_bodies(ollama)[0]
    assert body["model"] == "llama3.2"
    assert body["messages"] == [{"role": "user", "content": "Why is the sky blue?"}]


def _held_after_first_chunk(gate: threading.Event) -> Callable[[socket.socket, Seen], None]:
    """An ``/api/chat`` handler streaming the text answer: its first chunk at once, the rest
    only once ``gate`` is set (or after 10 s)."""
    chunks = text_transcript()

    def handler(client: socket.socket, req: Seen) -> None:
        client.sendall(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
            b"Transfer-Encoding: chunked\r\n\r\n"
        )
        client.sendall(b"%x\r\n%s\r\n" % (len(chunks[0]), chunks[0]))
        gate.wait(10)
        for data in chunks[1:]:
            client.sendall(b"%x\r\n%s\r\n" % (len(data), data))
        client.sendall(b"0\r\n\r\n")

    return handler


def test_output_arrives_while_the_server_is_still_streaming(tmp_path: Path) -> None:
    """The first words are on stdout before the server has sent the rest."""
    gate = threading.Event()
    with serve({("POST", "/api/chat"): _held_after_first_chunk(gate)}) as server:
        proc = popen(tmp_path, "--host", server.url, "--model", "m", "chat", "hi")
        try:
            assert proc.stdout is not None
            first = _read_until(proc.stdout, b"The", timeout=15)
            assert first.startswith(b"The")
            assert not gate.is_set()
        finally:
            gate.set()
        rest, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert (first + rest).decode() == ANSWER + "\n"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_started_with_sigint_ignored_the_chat_keeps_ignoring_it(tmp_path: Path) -> None:
    """``nohup``/a background job starts the CLI with SIGINT ignored: a Ctrl-C meant for the
    terminal's foreground job must not stop it; the answer completes, exit 0."""
    gate = threading.Event()
    with serve({("POST", "/api/chat"): _held_after_first_chunk(gate)}) as server:
        proc = popen(
            tmp_path, "--host", server.url, "--model", "m", "chat", "hi", preexec_fn=_ignore_sigint
        )
        try:
            assert proc.stdout is not None
            first = _read_until(proc.stdout, b"The", timeout=15)
            proc.send_signal(signal.SIGINT)
            time.sleep(0.5)  # room for a (wrong) reaction before the rest arrives
        finally:
            gate.set()
        rest, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert (first + rest).decode() == ANSWER + "\n"


def _read_until(pipe: object, marker: bytes, timeout: float) -> bytes:
    fd = pipe.fileno()  # type: ignore[attr-defined]
    data = b""
    deadline = time.monotonic() + timeout
    while marker not in data:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} on stdout within {timeout} s (got {data!r})"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            piece = os.read(fd, 4096)
            assert piece, f"stdout closed before {marker!r} (got {data!r})"
            data += piece
    return data


@pytest.mark.parametrize("args", [(), ("-",)])
def test_prompt_from_stdin(tmp_path: Path, ollama: OllamaServer, args: tuple[str, ...]) -> None:
    """Without PROMPT, or with '-', the prompt is stdin's whole text."""
    text = "Summarise this log:\nline one\nline two\n"
    out = run(tmp_path, "--host", ollama.url, "--model", "m", "chat", *args, input=text)
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    assert chat_bodies(ollama)[0]["messages"] == [{"role": "user", "content": text}]


def test_empty_stdin_prompt_is_a_usage_error(tmp_path: Path, ollama: OllamaServer) -> None:
    out = run(tmp_path, "--host", ollama.url, "--model", "m", "chat", input="  \n")
    assert out.returncode == 2
    assert "empty prompt" in out.stderr
    assert chat_bodies(ollama) == []


def test_json_events(tmp_path: Path, ollama: OllamaServer) -> None:
    """--json: one JSON object per event; text events rebuild the answer; the last finishes."""
    out = run(tmp_path, "--host", ollama.url, "--model", "m", "chat", "--json", "hi")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    assert "".join(e["value"] for e in events if e["type"] == "text") == ANSWER
    assert events[-1]["type"] == "chat_finish"
    assert events[-1]["reason"] == "complete"
    assert events[-1]["usage"]["completion_tokens"] == 30
    assert {e["type"] for e in events} <= {"text", "turn_complete", "chat_finish"}


def test_no_stream_and_options_reach_the_server(tmp_path: Path, ollama: OllamaServer) -> None:
    out = run(
        tmp_path, "chat", "hi", "--no-stream", "--system", "Be brief.", "--temperature", "0.2",
        "--max-tokens", "64", "--host", ollama.url, "--model", "m",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert out.stdout == ANSWER + "\n"
    body = chat_bodies(ollama)[0]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}  # type: ignore[index]
    assert body["options"] == {"temperature": 0.2, "num_predict": 64}


def test_no_stream_json_is_one_result_object(tmp_path: Path, ollama: OllamaServer) -> None:
    out = run(tmp_path, "--host", ollama.url, "--model", "m", "chat", "hi", "--no-stream", "--json")
    assert out.returncode == 0, out.stderr
    (result,) = [json.loads(line) for line in out.stdout.splitlines()]
    assert result == {
        "type": "result",
        "content": ANSWER,
        "thinking": None,
        "reason": "complete",
        "error": None,
    }


def test_thinking_only_with_flag_and_only_on_stderr(tmp_path: Path) -> None:
    with serve({("POST", "/api/chat"): stream(thinking_transcript())}) as server:
        plain = run(tmp_path, "--host", server.url, "--model", "qwen3", "chat", "17*23?")
        shown = run(
            tmp_path, "--host", server.url, "--model", "qwen3", "chat", "17*23?", "--show-thinking"
        )
    answer = "17 × 23 = **391**\n"  # noqa: RUF001
    assert plain.returncode == shown.returncode == 0
    assert plain.stdout == shown.stdout == answer
    assert plain.stderr == ""
    assert "Okay, 17 times 23 is 391." in shown.stderr
    assert "\x1b[" not in shown.stderr  # stderr is not a terminal: no colour codes


def test_closed_port_is_one_line_error(tmp_path: Path) -> None:
    """Nothing listening: exit 1 and one line naming the URL, no traceback."""
    url = f"http://127.0.0.1:{refuse_port()}"
    out = run(tmp_path, "--host", url, "--model", "m", "chat", "hi")
    assert out.returncode == 1
    assert out.stdout == ""
    assert_one_line_error(out.stderr, "CONNECTION_FAILED")
    assert url in out.stderr


def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{refuse_port()}"
    out = run(tmp_path, "--debug", "--host", url, "models", "list")
    assert out.returncode == 1
    assert "Traceback" in out.stderr
    assert "ollm-lite: error [CONNECTION_FAILED]" in out.stderr


def test_chat_debug_shows_the_traceback_of_a_failed_chat(tmp_path: Path) -> None:
    """``chat --debug``: the exception behind the error event is printed as a traceback,
    then the one-line error; without ``--debug`` only the line."""
    url = f"http://127.0.0.1:{refuse_port()}"
    out = run(tmp_path, "--debug", "--host", url, "--model", "m", "chat", "hi")
    assert out.returncode == 1
    assert "Traceback (most recent call last)" in out.stderr
    assert "ConnectionFailed" in out.stderr
    assert out.stderr.rstrip().splitlines()[-1].startswith("ollm-lite: error [CONNECTION_FAILED]")
    plain = run(tmp_path, "--host", url, "--model", "m", "chat", "hi")
    assert_one_line_error(plain.stderr, "CONNECTION_FAILED")


def test_chat_json_output_leaves_the_exception_out(tmp_path: Path) -> None:
    """``--json`` events carry the error as data; the exception object is not serialised."""
    url = f"http://127.0.0.1:{refuse_port()}"
    out = run(tmp_path, "--host", url, "--model", "m", "chat", "--json", "hi")
    assert out.returncode == 1
    events = [json.loads(line) for line in out.stdout.splitlines()]
    error = next(e for e in events if e["type"] == "error")
    assert set(error) == {"type", "error"}
    assert error["error"]["code"] == "CONNECTION_FAILED"


def test_error_mid_stream_keeps_the_partial_answer(tmp_path: Path) -> None:
    with serve({("POST", "/api/chat"): stream(error_midstream_transcript())}) as server:
        out = run(tmp_path, "--host", server.url, "--model", "m", "chat", "hi")
    assert out.returncode == 1
    assert out.stdout == " Yes. I can\n"
    assert_one_line_error(out.stderr, "LLM_BAD_RESPONSE")
    assert "an error was encountered while running the model" in out.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("chat", "hi", "--temperature", "hot"), "not a number"),
        (("chat", "hi", "--max-tokens", "0"), "at least 1"),
        (("--provider", "mistral", "chat", "hi"), "unknown provider 'mistral'"),
        (("--host", "ftp://x", "chat", "hi"), "scheme must be http"),
        (("chat", "hi", "--bogus"), "unrecognized arguments"),
        (("models",), "choose an action"),
        (("frobnicate",), "invalid choice"),
        ((), "usage:"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: tuple[str, ...], message: str) -> None:
    out = run(tmp_path, *args)
    assert out.returncode == 2, out.stderr
    assert message in out.stderr
    assert "Traceback" not in out.stderr


def test_model_from_the_server_when_it_has_one(tmp_path: Path) -> None:
    """No --model: a server with exactly one chat model uses it."""
    tags = {"models": [{"name": "only:1b", "model": "only:1b", "size": 1}]}
    routes = {
        ("POST", "/api/chat"): stream(text_transcript()),
        ("GET", "/api/tags"): json_answer(tags),
    }
    with serve(routes) as server:
        out = run(tmp_path, "--host", server.url, "chat", "hi")
        assert out.returncode == 0, out.stderr
        assert chat_bodies(server)[0]["model"] == "only:1b"


def test_no_model_and_several_on_the_server(tmp_path: Path) -> None:
    tags = {"models": [{"name": n, "model": n} for n in ("a:1b", "b:7b")]}
    with serve({("GET", "/api/tags"): json_answer(tags)}) as server:
        out = run(tmp_path, "--host", server.url, "chat", "hi")
    assert out.returncode == 1
    assert_one_line_error(out.stderr, "CONFIG_INVALID")
    assert "a:1b, b:7b" in out.stderr and "--model" in out.stderr


def test_environment_and_config_file_select_server(tmp_path: Path, ollama: OllamaServer) -> None:
    """OLLAMA_HOST / OLLM_MODEL work without flags; the file is read from ~/.config/ollm."""
    from support.cli_support import cli_env

    env = cli_env(tmp_path, OLLAMA_HOST=ollama.url, OLLM_MODEL="env-model")
    out = run(tmp_path, "chat", "hi", env=env)
    assert out.returncode == 0, out.stderr
    config = tmp_path / ".config/ollm/config.toml"
    config.parent.mkdir(parents=True)
    config.write_text(f'model = "file-model"\n[providers.local]\nbase_url = "{ollama.url}"\n')
    out = run(tmp_path, "chat", "hi")
    assert out.returncode == 0, out.stderr
    assert [b["model"] for b in chat_bodies(ollama)] == ["env-model", "file-model"]


def test_invalid_config_file_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[providers.local]\nbase_url = "ftp://nowhere"\n')
    out = run(tmp_path, "--config", str(config), "chat", "hi")
    assert out.returncode == 1
    assert_one_line_error(out.stderr, "CONFIG_INVALID")
    assert "providers.local.base_url" in out.stderr and "config validate" in out.stderr


def test_llamacpp_quick_start_command(tmp_path: Path) -> None:
    """`--provider llamacpp --host URL chat "hi"` streams from an OpenAI-style SSE server."""
    models = {"object": "list", "data": [{"id": "gemma.gguf", "object": "model"}]}
    scripts = {
        "/v1/chat/completions": stream_script(llamacpp_native_transcript()),
        "/v1/models": json_script(models),
    }
    with serve_raw(scripts) as server:
        out = run(tmp_path, "--provider", "llamacpp", "--host", server.url, "chat", "hi")
        bodies = [json.loads(r.body) for r in server.requests if r.path == "/v1/chat/completions"]
    assert out.returncode == 0, out.stderr
    assert out.stdout == "Hello! How can I help?\n"
    assert bodies[0]["model"] == "gemma.gguf"
    assert bodies[0]["stream"] is True


def test_sigint_during_silent_stream_exits_130_with_partial_answer(tmp_path: Path) -> None:
    """Ctrl-C while the server is silent: exit 130, the partial answer on stdout."""
    chunks = lines(
        [
            {"model": "m", "created_at": "x", "message": {"role": "assistant", "content": w},
             "done": False}
            for w in ("Partial", " answer")
        ]
    )  # fmt: skip
    with serve({("POST", "/api/chat"): stream(chunks, then="hang")}) as server:
        proc = popen(tmp_path, "--host", server.url, "--model", "m", "chat", "hi")
        assert proc.stdout is not None
        got = _read_until(proc.stdout, b"answer", timeout=15)
        proc.send_signal(signal.SIGINT)
        try:
            # The server stays silent until the client goes away: ending at all (within a
            # bound generous for a busy machine) means the Ctrl-C ended it; no speed asserted.
            rest, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 130, err
    assert (got + rest).decode() == "Partial answer\n"
    assert b"Traceback" not in err
    assert b"cancelled" in err


@pytest.mark.parametrize("mode", [(), ("--json",), ("--no-stream",), ("--no-stream", "--json")])
def test_empty_answer_is_an_error_in_every_mode(tmp_path: Path, mode: tuple[str, ...]) -> None:
    """Nothing (or only blanks) answered: exit 1 with one error line, whatever the output mode."""
    words = [" ", "\n"]
    with serve({("POST", "/api/chat"): stream(text_transcript(words=words))}) as server:
        out = run(tmp_path, "--host", server.url, "--model", "m", "chat", "hi", *mode)
    assert out.returncode == 1, out.stderr
    assert out.stderr == (
        "ollm-lite: error [LLM_BAD_RESPONSE]: the model returned an empty answer\n"
    )
    if "--json" in mode:
        assert all(json.loads(line) for line in out.stdout.splitlines())
    else:
        assert not out.stdout.strip()


def test_max_tokens_has_a_default(tmp_path: Path, ollama: OllamaServer) -> None:
    """Without --max-tokens a runaway answer stops at the default, not the server's limit."""
    out = run(tmp_path, "--host", ollama.url, "--model", "m", "chat", "hi")
    assert out.returncode == 0, out.stderr
    assert chat_bodies(ollama)[0]["options"] == {"num_predict": 1024}
    help_text = run(tmp_path, "chat", "--help").stdout
    assert "default 1024" in help_text


def test_the_configs_options_are_chats_defaults(tmp_path: Path, ollama: OllamaServer) -> None:
    """``[options]`` sets chat's defaults (its max_tokens over chat's own 1024); flags win."""
    config = tmp_path / "config.toml"
    config.write_text("[options]\nmax_tokens = 64\ntemperature = 0.25\nseed = 7\nthink = false\n")
    out = run(tmp_path, "--config", str(config), "--host", ollama.url, "--model", "m", "chat", "hi")
    assert out.returncode == 0, out.stderr
    body = chat_bodies(ollama)[-1]
    assert body["options"] == {"num_predict": 64, "temperature": 0.25, "seed": 7}
    assert body["think"] is False
    out = run(
        tmp_path, "--config", str(config), "--host", ollama.url, "--model", "m",
        "chat", "hi", "--max-tokens", "9", "--temperature", "1",
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert chat_bodies(ollama)[-1]["options"] == {"num_predict": 9, "temperature": 1.0, "seed": 7}


def test_a_bad_options_table_is_a_config_error(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text("[options]\nmax_tokens = 0\nkeep_alive = '5m'\n")
    out = run(tmp_path, "--config", str(config), "--host", "http://127.0.0.1:9", "chat", "hi")
    assert out.returncode == 1
    assert "options.max_tokens" in out.stderr or "options.keep_alive" in out.stderr
    shown = run(tmp_path, "--config", str(config), "config", "validate")
    assert shown.returncode == 1
    assert "options.keep_alive: unknown key 'keep_alive'" in shown.stdout
    assert "options.max_tokens: max_tokens must be an integer >= 1, not 0" in shown.stdout


@pytest.mark.parametrize(
    ("args", "usage"),
    [
        (("chat", "--bogus"), "usage: ollm-lite chat "),
        (("chat", "hi", "there"), "usage: ollm-lite chat "),
        (("health", "--bogus"), "usage: ollm-lite health "),
        (("models", "list", "--bogus"), "usage: ollm-lite models list "),
        (("config", "show", "--bogus"), "usage: ollm-lite config show "),
    ],
)
def test_unknown_arguments_print_the_commands_usage(
    tmp_path: Path, args: tuple[str, ...], usage: str
) -> None:
    out = run(tmp_path, *args)
    assert out.returncode == 2
    assert out.stderr.startswith(usage), out.stderr
    assert f"{' '.join(usage.split()[1:])}: error: unrecognized arguments: {args[-1]}" in (
        out.stderr
    )


def test_closed_stdout_pipe_ends_quietly(tmp_path: Path) -> None:
    """`ollm-lite chat ... | head -2`: no BrokenPipeError noise once the reader is gone."""
    words = [f"line {i}\n" for i in range(3000)]
    with serve({("POST", "/api/chat"): stream(text_transcript(words=words))}) as server:
        proc = popen(tmp_path, "--host", server.url, "--model", "m", "chat", "hi")
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == b"line 0\n"
        proc.stdout.close()
        err = proc.stderr.read()
        proc.wait(timeout=15)
    assert proc.returncode in (0, 1)
    assert b"Traceback" not in err and b"Exception ignored" not in err


def test_a_cut_answer_ends_its_line_before_the_warning(tmp_path: Path) -> None:
    """With stdout and stderr on one terminal (one pipe here), the max-tokens warning starts
    a line of its own instead of running on from the answer's last word."""
    from support.cli_support import cli_env, command
    from support.ollama_support import chunk, final

    words = ["Fly", " to", " Kyoto", " or"]
    transcript = lines(
        [chunk("m", i, content=w) for i, w in enumerate(words)]
        + [final("m", len(words), reason="length")]
    )
    with serve({("POST", "/api/chat"): stream(transcript)}) as server:
        done = subprocess.run(
            command("--host", server.url, "--model", "m", "chat", "hi"),
            env=cli_env(tmp_path),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=30,
            check=False,
        )
    assert done.returncode == 0, done.stdout
    first, second = done.stdout.splitlines()[:2]
    assert first == "Fly to Kyoto or"
    assert second.startswith("warning: ")
    assert "max_tokens" in second
