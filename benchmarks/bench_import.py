"""Import time of ollm_lite beside ``requests``, ``ollama`` and ``openai``.

Each figure is the median over fresh interpreters of the time the ``import`` statement itself
takes (interpreter start-up excluded), measured inside the child with ``time.perf_counter``.
Modules are measured in turn, round after round. Bytecode is cached in a private
``PYTHONPYCACHEPREFIX`` that an untimed first round fills, so every module is measured from
``.pyc`` files as an installed package would be (this environment sets
``PYTHONDONTWRITEBYTECODE``, which would otherwise make ollm_lite compile from source each time).

``import ollm_lite`` loads the package root only (every public name is resolved on first use);
the second ollm_lite row also touches a provider class, which loads ``requests`` and the
transport; the third is what a script that chats really pays,
``from ollm_lite import LocalProvider, ChatClient`` (the HTTP stack, the Ollama provider, the
configuration, the chat runtime and token counting). The fourth adds ``tool``: defining tools
loads the JSON Schema and docstring readers, which a chat without tools never loads. These rows
have no target.

The target is timed differently, as a whole process from outside (interpreter start-up
included, as a user waits for it): the script path,
``python -c "import ollm_lite; ollm_lite.connect; import ollm_lite.providers.ollama,
ollm_lite.providers.openai_compat, requests"``, against ``python -c "import requests"``, run
after run in pairs (``Settings.process_runs``, 15 in a full run), each pair's ratio of the
children's CPU time (user + system: on a shared machine the wall clock moves by tens of per
cent, the work does not); the median ratio may be no larger than
``python -c "import ollama"``'s, measured the same way. Wall-clock ratios are reported beside it.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import tempfile
import time

from ._common import ROOT, Report, Settings, median
from ._server import ServerProcess

SECTION = "import"
SCRIPT = "ollm_lite as a chat script imports it"
TOOL_SCRIPT = "ollm_lite as a tool-using script imports it"
PROCESS = "the script path, whole process"
"""The import-only row that selects the whole-process measurement."""
PROCESS_SCRIPT = (
    "import ollm_lite; ollm_lite.connect; "
    "import ollm_lite.providers.ollama, ollm_lite.providers.openai_compat, requests"
)
"""What a script that calls ``ollm_lite.connect`` (or ``ask``) imports before its first request."""
PROCESS_PEER = "import ollama"
"""The yardstick: the script path may cost no more, over ``import requests``, than this."""

#: Label → statements timed in a fresh interpreter.
STATEMENTS: dict[str, str] = {
    "requests": "import requests",
    "ollm_lite": "import ollm_lite",
    "ollm_lite + a provider class": (
        "import ollm_lite; ollm_lite.OpenAICompatibleProvider; ollm_lite.LocalProvider"
    ),
    SCRIPT: "from ollm_lite import LocalProvider, ChatClient",
    TOOL_SCRIPT: "from ollm_lite import LocalProvider, ChatClient, tool",
    "ollama": "import ollama",
    "openai": "import openai",
    "litellm": "import litellm",
}

_PROBE = (
    "import time, sys\n"
    "t = time.perf_counter()\n"
    "try:\n"
    "    exec(sys.argv[1])\n"
    "except ImportError:\n"
    "    print('missing'); raise SystemExit\n"
    "print(time.perf_counter() - t)\n"
)


def time_import(statement: str, env: dict[str, str]) -> float | None:
    """Seconds the statement takes in a fresh interpreter; ``None`` if a module is missing."""
    out = subprocess.run(
        [sys.executable, "-c", _PROBE, statement],
        cwd=str(ROOT),
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    return None if out == "missing" else float(out)


def run(settings: Settings, server: ServerProcess | None = None) -> Report:
    """Median import time per module; the ``import ollm_lite`` target."""
    report = Report(SECTION)
    with tempfile.TemporaryDirectory(prefix="ollm-bench-pyc-") as cache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = cache
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        wanted = {
            label: stmt
            for label, stmt in STATEMENTS.items()
            if not settings.import_only or label in settings.import_only
        }
        present = {
            label: stmt for label, stmt in wanted.items() if time_import(stmt, env) is not None
        }  # also fills the bytecode cache
        times: dict[str, list[float]] = {label: [] for label in present}
        for _ in range(settings.import_runs):
            for label, stmt in present.items():
                value = time_import(stmt, env)
                if value is not None:
                    times[label].append(value)
    ms = {label: median(values) * 1e3 for label, values in times.items()}
    base = ms["requests"]
    for label, value in ms.items():
        report.add(f"import {label}", value, "ms", f"{value / base:.2f}x requests")
    for label in wanted:
        if label not in present:
            report.notes.append(f"{label} is not installed: no figure")
    if not settings.import_only or PROCESS in settings.import_only:
        _whole_process(report, settings.process_runs)
    return report


def _run_child(statement: str, env: dict[str, str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of ``python -c statement``, start to exit."""
    start = time.perf_counter()
    child = subprocess.Popen(
        [sys.executable, "-c", statement],
        cwd=str(ROOT),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _, status, usage = os.wait4(child.pid, 0)
    wall = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        raise RuntimeError(f"python -c {statement!r} exited {child.returncode}")
    return usage.ru_utime + usage.ru_stime, wall


def _paired(statement: str, env: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    """Per pair, ``statement``'s CPU and wall time over ``import requests``'s (run in turn)."""
    cpu: list[float] = []
    wall: list[float] = []
    for _ in range(runs):
        a_cpu, a_wall = _run_child(statement, env)
        b_cpu, b_wall = _run_child("import requests", env)
        cpu.append(a_cpu / b_cpu)
        wall.append(a_wall / b_wall)
    return cpu, wall


def _whole_process(report: Report, runs: int) -> None:
    """The script path's import against ``import ollama``'s, each over ``import requests``."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    with contextlib.suppress(RuntimeError):  # bytecode written once, outside the figures
        for statement in (PROCESS_SCRIPT, "import requests", PROCESS_PEER):
            _run_child(statement, {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"})
    ratios: dict[str, float] = {}
    for label, statement in ((PROCESS, PROCESS_SCRIPT), ("import ollama", PROCESS_PEER)):
        try:
            cpu, wall = _paired(statement, env, runs)
        except RuntimeError:
            report.notes.append(f"{statement}: not installed, no whole-process figure")
            continue
        ratios[label] = median(cpu)
        report.add(
            f"{label} / import requests, whole process (CPU)",
            median(cpu),
            "x",
            f"median of {runs} pairs; wall clock {median(wall):.2f}x",
        )
    if PROCESS in ratios and "import ollama" in ratios:
        report.target(
            "script path import / import requests, whole process: no more than import ollama's",
            ratios[PROCESS],
            ratios["import ollama"],
            "x",
            f"median of {runs} pairs of CPU time; import ollama {ratios['import ollama']:.2f}x",
        )
