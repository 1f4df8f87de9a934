"""The chat runtime: parallel tools, ReAct parsing and the cost of one turn.

* 8 tools that each sleep 100 ms, called in one model turn (``ScriptedProvider``): wall time of
  the whole ``ChatClient.chat`` call against the ideal 100 ms;
* ``ReActToolHandler.parse`` on a typical action reply and a final answer (µs per parse), and a
  whole ReAct round (action, observation, final answer) through ``ChatClient``;
* ``ScriptedProvider`` overhead: one text turn through ``chat_stream`` alone and through
  ``ChatClient.chat`` (no network, so this is the runtime's own cost per turn).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ollm_lite.chat import ChatClient
from ollm_lite.providers.scripted import ScriptedProvider
from ollm_lite.react import ReActToolHandler
from ollm_lite.tools import Tool, ToolRegistry, tool
from ollm_lite.types import (
    ChatFinishEvent,
    FinishEvent,
    Message,
    ProviderCapabilities,
    ProviderRequest,
    ToolCall,
    ToolCallEvent,
)

from ._common import Report, Settings, interleave, median
from ._server import ServerProcess

SECTION = "chat"
TOOL_SLEEP = 0.1
TOOLS = 8

REACT_ACTION = (
    "Thought: I need the current weather in Oslo before I can answer.\n"
    "Action: get_weather\n"
    'Action Input: {"city": "Oslo", "unit": "c"}\n'
)
REACT_FINAL = (
    "Thought: The tool says it is 4 °C and cloudy.\n"
    "Final Answer: It is 4 °C and cloudy in Oslo right now."
)


def _sleeper(index: int) -> Tool:
    def sleeper(note: str = "") -> dict[str, object]:
        """Sleep a little and report.

        Args:
            note: Anything.
        """
        time.sleep(TOOL_SLEEP)
        return {"slept": TOOL_SLEEP, "tool": index}

    return tool(name=f"sleep_{index}")(sleeper)


def _weather(city: str, unit: str = "c") -> dict[str, object]:
    """Current weather for a city.

    Args:
        city: City name.
        unit: Temperature unit.
    """
    return {"city": city, "temp": 4, "unit": unit, "sky": "cloudy"}


def _finish(events: object) -> ChatFinishEvent:
    last = None
    for event in events:  # type: ignore[attr-defined]
        last = event
    if not isinstance(last, ChatFinishEvent):
        raise RuntimeError(f"the chat did not finish: {last!r}")
    return last


def parallel_tools(report: Report, settings: Settings) -> None:
    """8 x 100 ms tools in one turn."""
    registry = ToolRegistry([_sleeper(i) for i in range(TOOLS)])
    calls = [ToolCall.from_arguments(f"c{i}", f"sleep_{i}", {"note": str(i)}) for i in range(TOOLS)]
    walls: list[float] = []
    for _ in range(max(settings.runs, 3)):
        provider = ScriptedProvider(
            [[*(ToolCallEvent(c) for c in calls), FinishEvent("tool")], "All done."]
        )
        client = ChatClient(provider, tools=registry, model="scripted")
        t0 = time.perf_counter()
        finish = _finish(client.chat("Run every tool."))
        walls.append(time.perf_counter() - t0)
        if finish.reason != "complete":
            raise RuntimeError(f"tool chat ended with {finish.reason}")
    wall_ms = median(walls) * 1e3
    report.add(
        f"{TOOLS} tools x {TOOL_SLEEP * 1e3:.0f} ms in one turn: wall",
        wall_ms,
        "ms",
        f"median of {len(walls)}; worst {max(walls) * 1e3:.1f} ms; ideal 100 ms",
    )
    report.target(
        f"{TOOLS} x 100 ms tools, wall time",
        wall_ms,
        130.0,
        "ms",
        f"worst of {len(walls)}: {max(walls) * 1e3:.1f} ms",
    )


def react(report: Report, settings: Settings) -> None:
    """ReAct parse cost and one whole ReAct round."""
    registry = ToolRegistry([tool(name="get_weather")(_weather)])
    handler = ReActToolHandler(registry.schemas())
    if handler.parse(REACT_ACTION).action != "get_weather":
        raise RuntimeError("the ReAct parser did not find the action")
    loops = max(50, settings.chunks // 10)
    for label, text in (("action reply", REACT_ACTION), ("final answer", REACT_FINAL)):

        def parse_many(text: str = text) -> None:
            for _ in range(loops):
                handler.parse(text)

        times = interleave({label: parse_many}, settings.runs)
        report.add(
            f"ReAct parse, {label}",
            median(times[label]) / loops * 1e6,
            "µs/turn",
            f"{len(text)} characters",
        )
    caps = ProviderCapabilities(
        streaming=True,
        tool_calling=False,
        model_management=False,
        embeddings=False,
        token_counting=False,
        guided_decoding=False,
        vision=None,
        thinking=None,
    )
    rounds = max(20, settings.chunks // 100)

    def react_rounds() -> None:
        provider = ScriptedProvider(
            [t for _ in range(rounds) for t in (REACT_ACTION, REACT_FINAL)], capabilities=caps
        )
        client = ChatClient(provider, tools=registry, model="scripted")
        for _ in range(rounds):
            finish = _finish(client.chat("Weather in Oslo?", tool_mode="react"))
            if finish.reason != "complete":
                raise RuntimeError(f"ReAct chat ended with {finish.reason}")

    times = interleave({"react": react_rounds}, settings.runs)
    report.add(
        "ReAct round through ChatClient (2 turns + 1 tool)",
        median(times["react"]) / rounds * 1e6,
        "µs/chat",
        "ScriptedProvider, no network",
    )


def turn_overhead(report: Report, settings: Settings) -> None:
    """One scripted text turn: provider alone vs the whole chat runtime."""
    turns = max(50, settings.chunks // 10)
    text = "Hello there, this is a scripted answer."

    def provider_only() -> None:
        provider = ScriptedProvider([text] * turns)
        request = ProviderRequest(model="scripted", messages=[Message.user("hi")])
        for _ in range(turns):
            for _event in provider.chat_stream(request):
                pass

    def through_client() -> None:
        provider = ScriptedProvider([text] * turns)
        client = ChatClient(provider, model="scripted")
        for _ in range(turns):
            _finish(client.chat("hi"))

    def conversation() -> None:
        provider = ScriptedProvider([text] * turns)
        convo = ChatClient(provider, model="scripted").conversation()
        for _ in range(min(turns, 200)):  # history grows: keep it to a realistic length
            _finish(convo.send("hi"))

    bench: dict[str, Callable[[], None]] = {
        "ScriptedProvider.chat_stream, one text turn": provider_only,
        "ChatClient.chat, one text turn": through_client,
    }
    times = interleave(bench, settings.runs)
    for name, values in times.items():
        report.add(name, median(values) / turns * 1e6, "µs/turn", "no network")
    convo_times = interleave({"c": conversation}, settings.runs)["c"]
    report.add(
        "Conversation.send, one text turn (history grows)",
        median(convo_times) / min(turns, 200) * 1e6,
        "µs/turn",
        f"{min(turns, 200)} turns in one conversation",
    )


def run(settings: Settings, server: ServerProcess | None = None) -> Report:
    """Parallel tools, ReAct and per-turn overhead (no server needed)."""
    report = Report(SECTION)
    parallel_tools(report, settings)
    react(report, settings)
    turn_overhead(report, settings)
    return report
