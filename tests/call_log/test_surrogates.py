"""Text holding a lone surrogate (a Python string UTF-8 cannot carry) is still logged and reads
back exactly: Python allows such strings in prompts, answers and arguments."""

from __future__ import annotations

from pathlib import Path

import ollm_lite
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.types import FinishEvent, TextEvent, ThinkingEvent, ToolCall, ToolCallEvent

LONE = "\ud800"


def test_a_call_holding_lone_surrogates_is_logged_and_reads_back_exactly(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    call = ToolCall.from_arguments("c1", "external", {"q": f"x{LONE}y"})
    turns: list[object] = [
        [
            ThinkingEvent(f"t{LONE}"),
            TextEvent(f"a{LONE}b"),
            ToolCallEvent(call),
            FinishEvent("tool"),
        ]
    ]
    tool = {"type": "function", "function": {"name": "external", "parameters": {}}}
    with ollm_lite.connect(ScriptedProvider(turns), model="m", log=str(path)) as llm:  # type: ignore[arg-type]
        reply = llm.run(f"p{LONE}q", tools=[tool])
    assert reply.text == f"a{LONE}b"
    with ollm_lite.open_log(path) as log:
        [logged] = log.calls()
        assert log.calls(search="p") == [logged]
    assert logged.messages[-1] == {"role": "user", "content": f"p{LONE}q"}
    assert logged.text == f"a{LONE}b"
    assert logged.thinking == f"t{LONE}"
    [back] = logged.tool_calls
    assert back.args == {"q": f"x{LONE}y"}
