"""What importing and chatting load: only what a chat needs, so that scripts start fast.

``import ollm_lite`` loads the package root only (every name resolves on first use, see
``ollm_lite/__init__.py``). ``from ollm_lite import LocalProvider, ChatClient`` (a script that
chats with a local Ollama) loads the HTTP stack, the Ollama provider and the chat runtime —
and none of the command line, MCP, batches, fleets, the other providers, tool definitions or
the ReAct fallback, which load when first used. Each check runs in a fresh interpreter.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from support import ollama_support as oll

TESTS = Path(__file__).parent

#: Modules a chat with a local Ollama server does not need, by what they are for.
NOT_FOR_A_CHAT = {
    "the command line": ["ollm_lite.cli", "ollm_lite.__main__", "ollm_lite.cli._chat"],
    "the script API": [
        "ollm_lite.client",
        "ollm_lite.client._session",
        "ollm_lite.client._run_call",
    ],
    "MCP": ["ollm_lite.mcp"],
    "batches and fleets": ["ollm_lite.batch", "ollm_lite.fleet"],
    "other providers": [
        "ollm_lite.providers.gemini",
        "ollm_lite.providers.anthropic",
        "ollm_lite.providers.openai_compat",
        "ollm_lite.providers.vllm",
        "ollm_lite.providers.scripted",
    ],
    "defining tools": [
        "ollm_lite.tools",
        "ollm_lite.tools._schema",
        "ollm_lite.tools._docstrings",
        "ollm_lite.tools._validation",
        "ollm_lite.tools._calls",
        "ollm_lite.chat._parallel_tools",
    ],
    "the ReAct fallback": ["ollm_lite.react"],
    "reading a config file": ["tomllib"],
}


def _loaded(code: str) -> list[str]:
    """The modules in ``sys.modules`` after running ``code`` in a fresh interpreter."""
    script = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))\n"
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=TESTS
    ).stdout
    return list(json.loads(out.splitlines()[-1]))


def _unwanted(loaded: list[str]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for purpose, modules in NOT_FOR_A_CHAT.items():
        hits = [m for m in loaded if any(m == x or m.startswith(f"{x}.") for x in modules)]
        if hits:
            found[purpose] = hits
    return found


def test_import_ollm_lite_loads_no_http_stack() -> None:
    loaded = _loaded("import ollm_lite")
    assert not [m for m in loaded if m.split(".")[0] in ("requests", "urllib3")]
    assert [m for m in loaded if m.startswith("ollm_lite")] == ["ollm_lite"]


def test_the_chat_import_loads_only_what_a_chat_needs() -> None:
    loaded = _loaded("from ollm_lite import LocalProvider, ChatClient")
    assert {"requests", "ollm_lite.chat", "ollm_lite.providers.ollama"} <= set(loaded)
    assert _unwanted(loaded) == {}


def test_a_chat_without_tools_loads_nothing_more_of_that() -> None:
    """Deferred is not merely postponed: a whole chat against a loopback Ollama server (run by
    this process) still loads none of it."""
    with oll.serve({("POST", "/api/chat"): oll.stream(oll.text_transcript())}) as server:
        code = (
            "from ollm_lite import LocalProvider, ChatClient\n"
            f"provider = LocalProvider(base_url={server.url!r})\n"
            "events = list(ChatClient(provider, model='llama3.2').chat('Why is the sky blue?'))\n"
            "assert events[-1].reason == 'complete', events[-1]\n"
        )
        loaded = _loaded(code)
    assert _unwanted(loaded) == {}


def test_tools_load_when_a_chat_is_given_some() -> None:
    code = (
        "from ollm_lite import ChatClient, ScriptedProvider\n"
        "def add(a: int, b: int) -> int:\n"
        "    '''Add two numbers.'''\n"
        "    return a + b\n"
        "ChatClient(ScriptedProvider(['hi']), tools=[add], model='m')\n"
    )
    assert "ollm_lite.tools" in _loaded(code)
