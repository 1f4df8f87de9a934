"""Every argument of the log's API and CLI gives a result, or a ``ConfigError`` naming the
argument (the CLI: a usage error, exit 2): never a foreign exception."""

from __future__ import annotations

import contextlib
import math
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st
from support.log_support import cli, logging_client

from ollm_lite import ScriptedProvider
from ollm_lite.call_log import open_log
from ollm_lite.errors import ConfigError

HUGE = 10**400


def _one_call(path: Path) -> None:
    llm, _ = logging_client(path, "Paris")
    llm.ask("Capital of France?")
    llm.close()


@pytest.fixture(scope="module")
def log_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("arguments") / "logs.db"
    _one_call(path)
    return path


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda log: log.calls(search="\ud800abc"), "search"),
        (lambda log: log.calls(search="a\udcffb"), "search"),
        (lambda log: log.calls(model="m\ud800"), "model"),
        (lambda log: log.calls(model=5), "model"),
        (lambda log: log.calls(search=b"abc"), "search"),
        (lambda log: log.calls(search="\x00"), "search"),  # LIKE would end the pattern there
        (lambda log: log.get("\ud800"), "call_id"),
        (lambda log: log.calls(since=datetime.min), "since"),
        (lambda log: log.calls(until=datetime.min), "until"),
        (lambda log: log.calls(since=HUGE), "since"),
        (lambda log: log.calls(until=-HUGE), "until"),
        (lambda log: log.calls(since=math.nan), "since"),
        (lambda log: log.calls(limit=-1), "limit"),
        (lambda log: log.calls(limit=1.5), "limit"),
        (lambda log: log.stats(since=HUGE), "since"),
        (lambda log: log.stats(since=datetime.min), "since"),
        (lambda log: log.stats(by="week"), "by"),
        (lambda log: log.prune(older_than=HUGE), "older_than"),
        (lambda log: log.prune(older_than=math.inf), "older_than"),
        (lambda log: log.prune(older_than=-1), "older_than"),
        (lambda log: log.prune(older_than="7d"), "older_than"),
    ],
)
def test_a_bad_argument_is_a_config_error_naming_it(
    log_file: Path, call: object, argument: str
) -> None:
    with open_log(log_file) as log, pytest.raises(ConfigError) as caught:
        call(log)  # type: ignore[operator]
    assert caught.value.message.startswith(argument)
    with open_log(log_file) as log:
        assert len(log.calls()) == 1  # and nothing was removed


def test_arguments_at_the_edges_give_results(log_file: Path) -> None:
    with open_log(log_file) as log:
        assert len(log.calls(since=datetime.min.replace(tzinfo=UTC))) == 1
        assert len(log.calls(since=1e300)) == 1
        assert log.calls(until=1e300) == []
        assert len(log.calls(since=timedelta.max)) == 1
        assert len(log.calls(limit=HUGE)) == 1  # any greater limit means all
        assert log.calls(search="Paris\t") == []
        assert log.calls(model="") == []
        assert log.prune(older_than=1e300) == 0
        assert log.prune(older_than=timedelta.max) == 0
        assert len(log.calls()) == 1


@pytest.mark.parametrize(
    "path",
    ["a\x00b.db", "\ud800.db", pytest.param("x" * 5000, id="too-long"), "~no-such-user-x/logs.db"],
)
def test_a_path_that_cannot_name_a_file_is_a_config_error(path: str) -> None:
    with pytest.raises(ConfigError, match="path"):
        open_log(path)


ANY_TEXT = st.text(max_size=20)
ANY_NUMBER = st.one_of(
    st.integers(min_value=-(10**500), max_value=10**500),
    st.floats(allow_nan=True, allow_infinity=True),
)
ANY_TIME = st.one_of(
    ANY_NUMBER,
    st.datetimes(),
    st.datetimes(timezones=st.just(UTC)),
    st.timedeltas(),
    st.none(),
)


@settings(max_examples=150, deadline=None)
@given(
    since=ANY_TIME,
    until=ANY_TIME,
    model=st.one_of(st.none(), ANY_TEXT),
    search=st.one_of(st.none(), ANY_TEXT),
    call_id=ANY_TEXT,
    by=st.one_of(st.sampled_from(["model", "day", "host", "source", "script"]), ANY_TEXT),
    older_than=st.one_of(ANY_NUMBER, st.timedeltas()),
    limit=st.one_of(st.none(), st.integers(min_value=-5, max_value=10**30)),
)
def test_any_argument_gives_a_result_or_a_config_error(
    log_file: Path,
    since: object,
    until: object,
    model: str | None,
    search: str | None,
    call_id: str,
    by: str,
    older_than: object,
    limit: int | None,
) -> None:
    with open_log(log_file) as log:
        for query in (
            lambda: log.calls(since=since, until=until, model=model, search=search, limit=limit),  # type: ignore[arg-type]
            lambda: log.get(call_id),
            lambda: log.stats(by=by, since=since),  # type: ignore[arg-type]
            lambda: ScriptedProvider.from_log(log.calls(search=search)),
        ):
            with contextlib.suppress(ConfigError):
                query()
    # prune on a copy: the module's file keeps its call for the other examples
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "logs.db"
        copy.write_bytes(log_file.read_bytes())
        with open_log(copy) as log:
            with contextlib.suppress(ConfigError):
                assert log.prune(older_than=older_than) in (0, 1)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "args",
    [
        ("logs", "--since", "9" * 400 + "d"),
        ("logs", "--until", "9" * 400),
        ("logs", "list", "--since", "9" * 5000 + "s"),
        ("logs", "stats", "--since", "9" * 400 + "h"),
        ("logs", "prune", "--older-than", "9" * 400 + "d"),
        ("logs", "--since", "1000000000d"),
        ("logs", "--since", "٣d"),  # a digit, but not an ASCII one
        ("logs", "--search", "\udcff"),  # what Python makes of an argument that is not UTF-8
        ("logs", "show", "\udcff"),
        ("logs", "--model", "m\udcff"),
    ],
)
def test_the_cli_takes_a_bad_argument_as_a_usage_error(
    log_file: Path, tmp_path: Path, args: tuple[str, ...]
) -> None:
    done = cli(tmp_path, log_file, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "INTERNAL" not in done.stderr and "Traceback" not in done.stderr


def test_the_cli_takes_the_longest_duration(log_file: Path, tmp_path: Path) -> None:
    done = cli(tmp_path, log_file, "logs", "--since", "365000d", "--json")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count('"id"') == 1
