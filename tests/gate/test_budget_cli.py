"""``ollm-lite budget`` in subprocesses, and processes sharing one day budget."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

from support.log_support import ROOT, cli, logged, logging_client

from ollm_lite import FinishEvent, TextEvent, Usage


def _config(home: Path, text: str) -> None:
    folder = home / "config" / "ollm"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.toml").write_text(text)


def _spend(path: Path, calls: int, tokens: int = 10) -> None:
    turns = [[TextEvent("ok"), FinishEvent("stop", Usage(tokens, 0, tokens))]] * calls
    llm, _ = logging_client(path, *turns, prices={"m": {"input": 1000.0, "output": 0.0}})
    for i in range(calls):
        llm.ask(f"q{i}")
    llm.close()


def test_no_log_and_no_limits_exit_0(tmp_path: Path) -> None:
    done = cli(tmp_path, None, "budget", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "day": {"tokens": 0, "cost": 0.0, "requests": 0},
        "month": {"tokens": 0, "cost": 0.0, "requests": 0},
        "limit": None,
        "reached": False,
    }
    done = cli(tmp_path, None, "budget")
    assert done.returncode == 0 and "no [budget] limits" in done.stdout


def test_a_reached_day_limit_exits_1(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _spend(path, 2)
    _config(tmp_path, '[budget]\nrequests = 2\nper = "day"\n')
    done = cli(tmp_path, path, "budget", "--json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert report["day"] == {"tokens": 20, "cost": 0.02, "requests": 2}
    assert report["month"]["requests"] >= 2
    assert report["limit"] == {"tokens": None, "cost": None, "requests": 2, "per": "day"}
    assert report["reached"] is True
    done = cli(tmp_path, path, "budget")
    assert done.returncode == 1 and "a limit is reached" in done.stdout


def test_within_the_limits_exit_0(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _spend(path, 1)
    _config(tmp_path, '[budget]\ncost = 1.0\nper = "month"\n')
    done = cli(tmp_path, path, "budget", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["reached"] is False
    done = cli(tmp_path, path, "budget")
    assert done.returncode == 0 and "within the limits" in done.stdout


def test_the_cli_chat_passes_the_configured_budget(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    _config(tmp_path, '[budget]\nrequests = 0\nper = "day"\n')
    done = cli(tmp_path, path, "--host", "http://127.0.0.1:9", "--model", "m", "chat", "hi")
    assert done.returncode == 1
    assert "budget" in done.stderr and "Traceback" not in done.stderr
    [call] = logged(path)
    assert call.error_code == "LLM_BUDGET_EXCEEDED" and call.source == "cli"


_WORKER = textwrap.dedent(
    """
    import sys
    import ollm_lite
    from ollm_lite import Budget, BudgetExceeded, ScriptedProvider, ScriptedTurn, TextEvent
    turns = [ScriptedTurn([TextEvent("ok")], delay=0.005) for _ in range(200)]
    llm = ollm_lite.connect(ScriptedProvider(turns), model="m", log=sys.argv[1],
                            budget=Budget(requests=int(sys.argv[2]), per="day"))
    sent = 0
    while True:
        try:
            llm.ask(f"q{sent}")
        except BudgetExceeded:
            break
        sent += 1
    print(sent)
    """
)


def test_two_processes_on_one_log_overshoot_by_at_most_their_in_flight_requests(
    tmp_path: Path,
) -> None:
    """Each process has one request in flight at a time: together they pass the limit by at
    most one request each, and both stop."""
    path = tmp_path / "logs.db"
    limit = 12
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", _WORKER, str(path), str(limit)],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
            env={
                "PYTHONPATH": str(ROOT),
                "PATH": "/usr/bin:/bin",
                "HOME": str(tmp_path),
                "XDG_CONFIG_HOME": str(tmp_path / "config"),
                "XDG_DATA_HOME": str(tmp_path / "data"),
            },
        )
        for _ in range(2)
    ]
    sent = []
    for worker in workers:
        out, _ = worker.communicate(timeout=120)
        assert worker.returncode == 0
        sent.append(int(out.strip()))
    total = len([c for c in logged(path) if c.error_code is None])
    assert total == sum(sent)
    assert limit <= total <= limit + len(workers)
