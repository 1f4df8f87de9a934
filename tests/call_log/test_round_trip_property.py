"""Property: any call's content comes back from the log unchanged, except secrets, masked."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

import ollm_lite
from ollm_lite import (
    FinishEvent,
    ScriptedProvider,
    TextEvent,
    ThinkingEvent,
    ToolCall,
    ToolCallEvent,
)
from ollm_lite.call_log import open_log

SECRET = "hdr-SECRET-value-1234"
# No "@": text shaped like URL user-info ("scheme://user@") is masked as a credential.
TEXT = st.text(st.characters(blacklist_characters="@"), max_size=60)
ARGS = st.dictionaries(
    st.text(st.characters(blacklist_characters="@"), min_size=1, max_size=8),
    st.one_of(st.integers(), st.booleans(), TEXT, st.none()),
    max_size=4,
)


def _masked(text: str) -> str:
    return text.replace(SECRET, "***")


@settings(max_examples=60)
@given(
    prompt=TEXT.filter(str.strip),
    system=st.one_of(st.none(), TEXT.filter(bool)),
    answer=TEXT,
    thinking=TEXT,
    args=ARGS,
    leak=st.booleans(),
)
def test_content_round_trips_except_masked_secrets(
    prompt: str, system: str | None, answer: str, thinking: str, args: dict[str, object],
    leak: bool,
) -> None:  # fmt: skip
    if leak:
        prompt, answer = f"{prompt} {SECRET}", f"{SECRET}{answer}"
    call = ToolCall.from_arguments("c1", "external", args)
    turns: list[object] = [
        [ThinkingEvent(thinking), TextEvent(answer), ToolCallEvent(call), FinishEvent("tool")]
    ]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "logs.db"
        llm = ollm_lite.connect(ScriptedProvider(turns), model="m", log=str(path))  # type: ignore[arg-type]
        tool = {"type": "function", "function": {"name": "external", "parameters": {}}}
        reply = llm.run(prompt, system=system, tools=[tool], headers={"X-Key": SECRET})
        assert reply.finish == "tool_calls"
        with open_log(path) as log:
            [logged] = log.calls()
        llm.close()
    user = logged.messages[-1]
    assert user == {"role": "user", "content": _masked(prompt)}
    if system:
        assert logged.messages[0] == {"role": "system", "content": _masked(system)}
    assert logged.text == _masked(answer)
    assert (logged.thinking or "") == _masked(thinking)
    [back] = logged.tool_calls
    assert (back.id, back.name, back.args) == (call.id, call.name, args)
    assert back.arguments == call.arguments
    assert logged.turns[0]["answer"]["text"] == _masked(answer)
