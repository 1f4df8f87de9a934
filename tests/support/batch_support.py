"""Helpers of the batch tests: an echoing in-memory backend and input-file writers."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from ollm_lite.providers.base import BaseProvider
from ollm_lite.types import (
    EmbeddingResult,
    ErrorEvent,
    ErrorInfo,
    FinishEvent,
    ProviderEvent,
    ProviderRequest,
    TextEvent,
    Usage,
)


class EchoBackend(BaseProvider):
    """Answers ``echo: <last user text>``; a prompt starting with ``fail`` gets an HTTP 500.

    Thread safe; ``prompts`` records every prompt received, in arrival order. ``gate``, when
    given, is waited on before answering (to hold requests in flight).
    """

    name = "echo"

    def __init__(self, gate: threading.Event | None = None) -> None:
        self.prompts: list[str] = []
        self.embedded: list[list[str]] = []
        self._lock = threading.Lock()
        self.gate = gate
        self.started = threading.Semaphore(0)

    def chat_stream(self, request: ProviderRequest) -> Iterator[ProviderEvent]:
        text = request.messages[-1].text
        with self._lock:
            self.prompts.append(text)
        self.started.release()
        if self.gate is not None:
            while not self.gate.wait(0.01):
                if request.cancel is not None and request.cancel.is_set():
                    yield FinishEvent("cancelled")
                    return
        if text.startswith("fail"):
            info = ErrorInfo("echo at http://echo answered HTTP 500: boom", "LLM_HTTP_ERROR")
            details = {"status": 500, "server_message": "boom", "type": "server_error"}
            yield ErrorEvent(ErrorInfo(info.message, info.code, details))
            return
        yield TextEvent(f"echo: {text}")
        yield FinishEvent("stop", Usage(3, 2, 5))

    def embed(self, texts: list[str], model: str | None = None) -> EmbeddingResult:
        with self._lock:
            self.embedded.append(list(texts))
        return EmbeddingResult([[float(len(t)), 1.0] for t in texts], model or "e", 2)


def client_for(provider: Any, model: str | None = "m") -> Any:
    """The two attributes ``run_batch`` reads from a client."""
    return SimpleNamespace(provider=provider, model=model)


def chat_line(custom_id: str, prompt: str, **body: Any) -> dict[str, Any]:
    """One chat request line."""
    return {
        "custom_id": custom_id,
        "method": "POST",
        "url": "/v1/chat/completions",
        "body": {"model": "m", "messages": [{"role": "user", "content": prompt}], **body},
    }


def write_lines(path: Path, lines: Sequence[Any]) -> Path:
    """Write objects (JSON-encoded) or raw strings, one a line."""
    text = "".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines)
    path.write_text(text, encoding="utf-8")
    return path


def write_prompts(path: Path, prompts: Sequence[str]) -> Path:
    """An input file of chat lines ``c0``, ``c1`` … for ``prompts``."""
    return write_lines(path, [chat_line(f"c{i}", p) for i, p in enumerate(prompts)])


def read_output(path: Path) -> list[dict[str, Any]]:
    """Every output line, decoded; the file must end with a newline."""
    data = path.read_bytes()
    assert not data or data.endswith(b"\n")
    return [json.loads(line) for line in data.splitlines()]
