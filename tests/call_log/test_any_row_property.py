"""Property: whatever value any column of any row holds (any JSON value or text that is not
JSON, any SQLite type, text that is not UTF-8), reading it — ``calls``, ``get``, ``stats``,
``from_log``, the CLI, the cache look-up — gives a correct record, a ``ConfigError`` naming
the row, or (the cache) a miss; never another exception."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

import ollm_lite
from ollm_lite import FinishEvent, ScriptedProvider, TextEvent, ToolCall, ToolCallEvent, Usage
from ollm_lite.call_log import LoggedCall, open_log
from ollm_lite.cli import main
from ollm_lite.errors import ConfigError


def lookup(city: str) -> str:
    """The weather of a city.

    Args:
        city: The city.
    """
    return f"sunny in {city}"


class Text(bytes):
    """Bytes stored as TEXT: text that is not (or not only) UTF-8."""


CALL_COLUMNS = [
    "id", "started", "started_ts", "day", "seconds", "first_token_seconds", "source",
    "script", "provider", "host", "model", "messages", "options", "text", "thinking",
    "tool_calls", "tool_results", "finish", "error_code", "error_message", "usage",
    "prompt_tokens", "completion_tokens", "cached", "session_id", "custom_id",
]  # fmt: skip
TURN_COLUMNS = ["call_id", "number", "request", "answer", "cache_key", "ok", "cached"]
#: The columns a ``LoggedCall`` field is read from (the others are for queries).
NOT_FIELDS = {"started_ts", "day", "prompt_tokens", "completion_tokens"}

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
KEYS = st.sampled_from(
    ["text", "thinking", "tool_calls", "finish", "usage", "error", "id", "function", "name",
     "arguments", "ok", "data", "code", "message", "details", "prompt_tokens", "extra",
     "role", "content", "messages", "options"]
)  # fmt: skip
SHAPED = st.recursive(
    JSON, lambda inner: st.dictionaries(KEYS, inner, max_size=4) | st.lists(inner, max_size=3),
    max_leaves=10,
)  # fmt: skip
VALUE = st.one_of(
    st.none(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(),
    st.text(max_size=30),
    st.binary(max_size=12),
    st.binary(max_size=12).map(Text),
    JSON.map(json.dumps),
    SHAPED.map(json.dumps),
    st.sampled_from(
        ["[" * 5000 + "]" * 5000, "2024-01-16T06:00:12", "0001-01-01T00:00:00+01:00",
         "9999-12-31T23:59:59-01:00", '{"text": "x", "finish": "stop"}',
         '{"text": "x", "tool_calls": [5], "finish": "stop"}', '"xy"', "NaN", "1e999"]
    ),
)  # fmt: skip


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[LoggedCall]]:
    """A log of two calls: a tool call and its answer (two turns), and a one-turn answer."""
    path = tmp_path_factory.mktemp("template") / "logs.db"
    call = ToolCall.from_arguments("c1", "lookup", {"city": "Oslo"})
    turns: list[Any] = [
        [ToolCallEvent(call), FinishEvent("tool", Usage(5, 2, 7))],
        [TextEvent("Sunny."), FinishEvent("stop", Usage(9, 3, 12))],
        "Paris",
    ]
    llm = ollm_lite.connect(ScriptedProvider(turns), model="m", log=str(path), cache=True)
    llm.run("Weather in Oslo?", tools=[lookup], temperature=0.2)
    llm.ask("Capital?")
    llm.close()
    with open_log(path) as log:
        calls = log.calls()
    return path, calls


def _damage(path: Path, table: str, column: str, rowid: int, value: object) -> bool:
    """Store ``value``; ``False`` when SQLite refuses it (a NOT NULL or key constraint)."""
    stored = "CAST(? AS TEXT)" if isinstance(value, Text) else "?"
    bound = bytes(value) if isinstance(value, Text) else value
    db = sqlite3.connect(path)
    try:
        with db:
            db.execute(f"UPDATE {table} SET {column} = {stored} WHERE rowid = ?", (bound, rowid))
        return True
    except sqlite3.IntegrityError:
        return False
    finally:
        db.close()


def _reads_as(call: LoggedCall, original: LoggedCall, changed: set[str]) -> bool:
    """Every field as it was, but those read from the changed column, which may also read
    as empty (``None``, ``[]``) or as what the column now holds, in the field's type."""
    for field in dataclasses.fields(LoggedCall):
        now, was = getattr(call, field.name), getattr(original, field.name)
        if field.name not in changed:
            if now != was:
                return False
        elif now not in (None, []) and not (type(now) is type(was) or was is None):
            return False
    return True


def _cli(*args: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, err.getvalue()


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    where=st.one_of(
        st.tuples(st.just("calls"), st.sampled_from(CALL_COLUMNS), st.integers(1, 2)),
        st.tuples(st.just("turns"), st.sampled_from(TURN_COLUMNS), st.integers(1, 3)),
    ),
    value=VALUE,
)
def test_any_value_in_any_column_reads_as_a_record_an_error_or_a_miss(
    template: tuple[Path, list[LoggedCall]],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    where: tuple[str, str, int],
    value: object,
) -> None:
    source, originals = template
    table, column, rowid = where
    path = tmp_path / "logs.db"
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    shutil.copy(source, path)
    assume(_damage(path, table, column, rowid, value))
    if table == "turns":
        changed = {"turns"}
    else:
        changed = set() if column in NOT_FIELDS else {column}
        if column == "id":
            changed.add("turns")  # found by the call's id
    with open_log(path) as log:
        calls = log.calls()
        assert len(calls) == 2
        for call in calls:
            assert any(_reads_as(call, original, changed) for original in originals), call
        for original in originals:
            try:
                assert log.get(str(original.id)) in calls
            except ConfigError:
                assert table == "calls" and column in ("id", "started")
        for by in ("model", "day", "host", "source", "script"):
            assert sum(s.calls for s in log.stats(by=by)) == 2  # type: ignore[arg-type]
    replay = ScriptedProvider.from_log(calls)
    with contextlib.suppress(ollm_lite.OllmError):
        ollm_lite.connect(replay, model="m").ask("Capital?")
    # the cache: a hit or a miss, never a failed call
    llm = ollm_lite.connect(ScriptedProvider(["Paris"]), model="m", log=str(path), cache=True)
    try:
        assert isinstance(llm.ask("Capital?"), str)
    finally:
        llm.close()
    # the CLI: never an [INTERNAL] error
    monkeypatch.setenv("OLLM_LOG", str(path))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for args in (("logs",), ("logs", "--json"), ("logs", "stats"), ("logs", "stats", "--json")):
        code, err = _cli(*args)
        assert code == 0 and "INTERNAL" not in err, err
    for original in originals:
        code, err = _cli("logs", "show", str(original.id))
        assert code in (0, 1, 2) and "INTERNAL" not in err, err
