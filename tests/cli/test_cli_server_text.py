"""What a server says reaches the terminal without escape sequences or control characters
(model names, details, versions, error messages); a model's streamed answer is printed as it
is (docs/reliability.md, "Secrets and redirects")."""

from __future__ import annotations

import re
from pathlib import Path

from support.cli_support import run
from support.ollama_support import chunk, final, json_answer, lines, serve, stream

HOSTILE = "\x1b[2J\x1b]0;owned\x07\x1b[31m"


def _controls(text: str) -> list[str]:
    return [c for c in text if (ord(c) < 32 and c not in "\n") or 0x7F <= ord(c) <= 0x9F]


def test_models_list_and_show_strip_control_characters(tmp_path: Path) -> None:
    tags = {"models": [{"name": f"evil{HOSTILE}:latest", "size": 1, "details": {}}]}
    show = {"details": {"family": f"llama{HOSTILE}\nline"}, "capabilities": ["completion"]}
    scripts = {("GET", "/api/tags"): json_answer(tags), ("POST", "/api/show"): json_answer(show)}
    with serve(scripts) as server:
        listed = run(tmp_path, "models", "list", "--host", server.url)
        shown = run(tmp_path, "models", "show", "evil", "--host", server.url)
    assert listed.returncode == 0 and shown.returncode == 0, listed.stderr + shown.stderr
    assert "evil:latest" in listed.stdout and re.search(r"^family +llama line$", shown.stdout, re.M)
    assert _controls(listed.stdout + shown.stdout) == []


def test_a_server_error_message_loses_its_control_characters(tmp_path: Path) -> None:
    answer = json_answer({"error": f"model not found{HOSTILE} really"}, 404)
    with serve({("POST", "/api/show"): answer}) as server:
        done = run(tmp_path, "models", "show", "x", "--host", server.url)
    assert done.returncode == 1
    assert "model not found really" in done.stderr and _controls(done.stderr) == []


def test_a_streamed_answer_is_printed_as_it_is(tmp_path: Path) -> None:
    """The model's own words are the user's data: printed unchanged, colour codes included."""
    answer = stream(lines([chunk("m", 0, content="\x1b[1mbold\x1b[0m"), final("m", 1)]))
    with serve({("POST", "/api/chat"): answer}) as server:
        done = run(tmp_path, "chat", "hi", "--host", server.url, "--model", "m")
    assert done.returncode == 0, done.stderr
    assert "\x1b[1mbold\x1b[0m" in done.stdout
