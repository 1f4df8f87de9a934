"""Many processes and threads write one log: none is lost. A ``kill -9`` right after a call
returned loses nothing; a kill in the middle of writes leaves a file that opens cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from support.log_support import count_rows, logged

import ollm_lite

ROOT = Path(__file__).resolve().parents[2]

_WRITER = textwrap.dedent(
    """
    import sys, threading
    import ollm_lite
    from ollm_lite import ScriptedProvider

    path, name, threads, calls = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    def work(t):
        llm = ollm_lite.connect(ScriptedProvider([f"{name}-{t}-{i}" for i in range(calls)]),
                                model="m", log=path)
        for i in range(calls):
            assert llm.ask(f"q {name} {t} {i}") == f"{name}-{t}-{i}"

    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    print("done", flush=True)
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def test_processes_times_threads_lose_no_row(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    processes, threads, calls = 3, 4, 10
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _WRITER, str(path), f"p{n}", str(threads), str(calls)],
            env=_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    for child in children:
        _out, err = child.communicate(timeout=120)
        assert child.returncode == 0, err
        assert "cannot be written" not in err, err
    assert count_rows(path) == processes * threads * calls
    texts = {c.text for c in logged(path)}
    assert texts == {
        f"p{n}-{t}-{i}" for n in range(processes) for t in range(threads) for i in range(calls)
    }


_KILLED = textwrap.dedent(
    """
    import os, signal, sys
    import ollm_lite
    from ollm_lite import ScriptedProvider

    llm = ollm_lite.connect(ScriptedProvider(["kept"]), model="m", log=sys.argv[1])
    llm.ask("remember me")
    os.kill(os.getpid(), signal.SIGKILL)
    """
)


def test_kill_9_right_after_a_call_returned_loses_nothing(tmp_path: Path) -> None:
    path = tmp_path / "logs.db"
    done = subprocess.run(
        [sys.executable, "-c", _KILLED, str(path)], env=_env(), capture_output=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL
    [call] = logged(path)
    assert call.text == "kept"


_ENDLESS = textwrap.dedent(
    """
    import sys
    import ollm_lite
    from ollm_lite import ScriptedProvider

    llm = ollm_lite.connect(ScriptedProvider(["x" * 5000] * 100000), model="m", log=sys.argv[1])
    print("started", flush=True)
    while True:
        llm.ask("again " * 200)
    """
)


def test_a_kill_in_the_middle_of_writes_leaves_a_file_that_opens_cleanly(
    tmp_path: Path,
) -> None:
    path = tmp_path / "logs.db"
    child = subprocess.Popen(
        [sys.executable, "-c", _ENDLESS, str(path)], env=_env(), stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "started"
        for _ in range(400):  # until some rows are in (bounded: never hangs)
            with ollm_lite.open_log(path) as log:
                if len(log.calls(limit=20)) >= 20 or child.poll() is not None:
                    break
            time.sleep(0.05)
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    with ollm_lite.open_log(path) as log:
        calls = log.calls(limit=None)
        assert len(calls) >= 1
        assert all(c.text == "x" * 5000 for c in calls)
        assert log.stats()[0].calls == len(calls)
    # and it is still writable
    llm = ollm_lite.connect(ollm_lite.ScriptedProvider(["after"]), model="m", log=str(path))
    llm.ask("after the crash")
    assert logged(path)[-1].text == "after"
