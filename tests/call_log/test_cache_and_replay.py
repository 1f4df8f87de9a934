"""``cache=True`` answers identical model turns from the log; ``ScriptedProvider.from_log``
replays logged turns offline, oldest call first."""

from __future__ import annotations

import contextlib
from pathlib import Path

from support import ollama_support as oll
from support.log_support import logged, logging_client

import ollm_lite
from ollm_lite import FinishEvent, ScriptedProvider, TextEvent, ToolCall, ToolCallEvent, Usage
from ollm_lite.call_log import open_log

CALLS: list[str] = []


def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    CALLS.append(city)
    return f"sunny in {city}"


def _answer(text: str) -> list[object]:
    return [TextEvent(text), FinishEvent("stop", Usage(9, 3, 12))]


def test_an_identical_turn_is_answered_from_the_log_with_no_request(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, provider = logging_client(path, _answer("first"), _answer("second"), cache=True)
    assert llm.ask("Why?", temperature=0.5) == "first"
    assert llm.ask("Why?", temperature=0.5, timeout=30, headers={"X-A": "b"}) == "first"
    assert len(provider.requests) == 1
    assert "".join(llm.stream("Why?", temperature=0.5)) == "first"  # streamed or not: same
    assert len(provider.requests) == 1
    calls = logged(path)
    assert [c.cached for c in calls] == [False, True, True]
    assert calls[1].first_token_seconds is None and calls[1].usage is None
    with open_log(path) as log:
        [stats] = log.stats()
    assert (stats.calls, stats.cached, stats.prompt_tokens, stats.completion_tokens) == (3, 2, 9, 3)


def test_anything_that_counts_makes_a_miss(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    answers = [_answer(str(n)) for n in range(6)]
    llm, provider = logging_client(path, *answers, cache=True)
    llm.ask("Why?")
    llm.ask("Why?", temperature=0.1)
    llm.ask("Why?", system="Be brief.")
    llm.ask("Why?", model="another")
    llm.ask("Why not?")
    llm.ask("Why?", think=True)
    assert len(provider.requests) == 6
    assert not any(c.cached for c in logged(path))


def test_a_failed_or_cancelled_turn_is_never_served(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    llm, provider = logging_client(path, cache=True)  # empty script: the turn fails
    with contextlib.suppress(ollm_lite.OllmError):
        llm.ask("Why?")
    provider.enqueue("now it works")
    assert llm.ask("Why?") == "now it works"
    cut = llm.stream("Tell me")
    provider.enqueue([TextEvent("a"), TextEvent("b"), FinishEvent("stop")])
    next(cut)
    cut.close()
    provider.enqueue("whole")
    assert "".join(llm.stream("Tell me")) == "whole"


def test_tools_still_run_and_a_changed_result_misses(tmp_path: Path) -> None:
    CALLS.clear()
    path = tmp_path / "logs.db"
    call = ToolCall.from_arguments("c1", "lookup", {"city": "Oslo"})
    llm, provider = logging_client(
        path, [ToolCallEvent(call), FinishEvent("tool")], "Sunny.", cache=True
    )
    assert llm.run("Weather in Oslo?", tools=[lookup]).text == "Sunny."
    assert llm.run("Weather in Oslo?", tools=[lookup]).text == "Sunny."
    assert CALLS == ["Oslo", "Oslo"]  # the tool ran again
    assert len(provider.requests) == 2
    assert [c.cached for c in logged(path)] == [False, True]

    def lookup_changed(city: str) -> str:
        """The weather of a city.

        Args:
            city: The city.
        """
        return f"rain in {city}"

    lookup_changed.__name__ = "lookup"
    provider.enqueue("Rainy.")
    assert llm.run("Weather in Oslo?", tools=[lookup_changed]).text == "Rainy."
    assert len(provider.requests) == 3  # the first turn from the log, the second asked
    assert logged(path)[-1].cached is False


def test_from_log_replays_the_turns_oldest_call_first(tmp_path: Path) -> None:
    CALLS.clear()
    path = tmp_path / "logs.db"
    call = ToolCall.from_arguments("c1", "lookup", {"city": "Oslo"})
    llm, _ = logging_client(
        path,
        [TextEvent("Hello.")],
        [ToolCallEvent(call), FinishEvent("tool")],
        [TextEvent("Sunny."), FinishEvent("stop", Usage(3, 1, 4))],
    )

    def script(client: ollm_lite.Client) -> list[str]:
        return [client.ask("Hi"), client.run("Weather in Oslo?", tools=[lookup]).text]

    original = script(llm)
    with open_log(path) as log:
        calls = log.calls()  # newest first
    replay = ScriptedProvider.from_log(calls)
    assert replay.remaining == 3
    offline = ollm_lite.connect(replay, model="m")
    assert script(offline) == original == ["Hello.", "Sunny."]
    assert replay.remaining == 0
    assert [r.messages[-1].text for r in replay.requests][:2] == ["Hi", "Weather in Oslo?"]
    again = ScriptedProvider.from_log(list(reversed(calls)))
    assert script(ollm_lite.connect(again, model="m")) == original


def test_two_deployments_behind_one_gateway_never_share_answers(tmp_path: Path) -> None:
    """The cache keys on the base URL whole: ``/team-a`` and ``/team-b`` on one port are two
    servers; the same path again (credentials aside) is the same one. The ``host`` column
    stays ``scheme://host:port``."""
    path = tmp_path / "logs.db"
    routes = {
        ("POST", "/team-a/api/chat"): oll.stream(oll.text_transcript(words=["from ", "A"])),
        ("POST", "/team-b/api/chat"): oll.stream(oll.text_transcript(words=["from ", "B"])),
    }
    with oll.serve(routes) as server:
        answers = []
        for team in ("team-a", "team-b", "team-a", "team-b/"):
            host = server.url.replace("http://", "http://user:pw@") + f"/{team}"
            llm = ollm_lite.connect("local", host=host, model="llama3.2", log=str(path), cache=True)
            answers.append(llm.ask("Who are you?"))
            llm.close()
        sent = [r.path for r in server.requests if r.path.endswith("/api/chat")]
    assert answers == ["from A", "from B", "from A", "from B"]
    assert sent == ["/team-a/api/chat", "/team-b/api/chat"]
    calls = logged(path)
    assert [c.cached for c in calls] == [False, False, True, True]
    assert {c.host for c in calls} == {server.url}


def test_a_fleet_is_the_same_set_of_base_urls_in_any_order() -> None:
    from ollm_lite.call_log._cache import servers

    one = servers("http://gw:8000/team-a, https://other/v")
    assert one == servers("https://OTHER:443/v/, http://u:p@gw:8000/team-a")
    assert one != servers("http://gw:8000/team-b, https://other/v")
    assert servers("http://gw:8000") == ["http://gw:8000"]  # a bare host keys as it always did
    assert servers(None) == servers("") == [""]
