"""A tool-using agent: the model answers questions about this machine by calling Python tools.

Three plain functions become tools with ``@tool`` (their JSON Schema comes from the type hints
and docstrings). ``llm.events(...)`` runs the calls the model makes, in parallel, sends the
results back, and streams the final answer. Tool calls are shown on stderr, the answer on
stdout.

The provider, server and model come from the usual configuration. Against the quick-start
llama.cpp server (``start`` writes that configuration)::

    python3 scripts/llamacpp.py start
    python examples/tool_agent.py "What time is it?"

Against Ollama with a tool-calling model (native tool calls)::

    ollama pull llama3.2
    OLLM_PROVIDER=ollama OLLM_MODEL=llama3.2 python examples/tool_agent.py \\
        "How full is my disk, and what time is it?"

``--react`` forces the prompt-based ReAct fallback (``tool_mode="react"``) for models without
native tool calling. A 135M model picks a tool only now and then, whichever way: use a bigger
one for real work.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

import ollm_lite
from ollm_lite import (
    ChatFinishEvent,
    Client,
    ErrorEvent,
    TextEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolRegistry,
    tool,
)


@tool
def current_time() -> str:
    """The local date and time, ISO 8601."""
    return datetime.now().isoformat(timespec="seconds")


@tool
def disk_usage(path: str = "~") -> dict[str, Any]:
    """How full the disk holding a path is.

    Args:
        path: Any path on the disk (default: the home folder).
    """
    usage = shutil.disk_usage(os.path.expanduser(path))
    return {
        "total_gb": round(usage.total / 1e9, 1),
        "used_gb": round(usage.used / 1e9, 1),
        "free_gb": round(usage.free / 1e9, 1),
        "used_percent": round(100 * usage.used / usage.total, 1),
    }


@tool
def count_files(path: str, pattern: str = "*") -> int:
    """How many files under a folder match a glob pattern.

    Args:
        path: The folder.
        pattern: A glob such as ``*.log``.
    """
    from pathlib import Path

    return sum(1 for p in Path(os.path.expanduser(path)).rglob(pattern) if p.is_file())


TOOLS = ToolRegistry([current_time, disk_usage, count_files])


def ask(
    question: str,
    llm: Client,
    *,
    react: bool = False,
    out: TextIO = sys.stdout,
    err: TextIO = sys.stderr,
) -> int:
    """Stream the agent's answer to ``out`` (tool activity to ``err``); returns an exit code."""
    code = 1
    mode = "react" if react else "auto"
    for event in llm.events(question, tools=TOOLS, tool_mode=mode, max_turns=6):
        if isinstance(event, TextEvent):
            out.write(event.value)
            out.flush()
        elif isinstance(event, ToolCallStartEvent):
            err.write(f"[tool] {event.tool_call.name}({event.tool_call.arguments})\n")
        elif isinstance(event, ToolCallResultEvent):
            err.write(f"[tool] -> {event.result.to_json()}\n")
        elif isinstance(event, ErrorEvent):
            err.write(f"tool_agent: error [{event.error.code}]: {event.error.message}\n")
        elif isinstance(event, ChatFinishEvent):
            code = 0 if event.reason == "complete" else 1
    out.write("\n")
    return code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Ask a question the model answers with tools.")
    parser.add_argument("question")
    parser.add_argument("--react", action="store_true", help="force the ReAct fallback")
    args = parser.parse_args(argv)
    with ollm_lite.connect() as llm:
        return ask(args.question, llm, react=args.react)


if __name__ == "__main__":
    raise SystemExit(main())
