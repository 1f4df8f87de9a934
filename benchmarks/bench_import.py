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
configuration, the chat runtime and token counting), and its target is what that costs over
``import requests`` alone. The fourth adds ``tool``: defining tools loads the JSON Schema and
docstring readers and :mod:`inspect`, which a chat without tools never loads.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from ._common import ROOT, Report, Settings, median
from ._server import ServerProcess

SECTION = "import"
SCRIPT = "ollm_lite as a chat script imports it"
TOOL_SCRIPT = "ollm_lite as a tool-using script imports it"
SCRIPT_OVER_REQUESTS = 25.0 / 81.0
"""Most that ``from ollm_lite import LocalProvider, ChatClient`` may cost over ``import
requests``, as a share of ``import requests``: 25 ms over requests' 81 ms on the reference
machine (2-core AMD EPYC, Python 3.11). A share, so that a busy machine, which slows both
imports alike, does not turn the figure into a miss."""

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
    report.target(
        "import ollm_lite / import requests",
        ms["ollm_lite"] / base,
        1.15,
        "x",
        f"{ms['ollm_lite']:.1f} vs {base:.1f} ms",
    )
    if SCRIPT in ms:
        own = ms[SCRIPT] - base
        report.target(
            "from ollm_lite import LocalProvider, ChatClient: its cost over requests ÷ requests",
            own / base,
            SCRIPT_OVER_REQUESTS,
            "x",
            f"{own:.1f} ms over {base:.1f} ms ({ms[SCRIPT]:.1f} ms in all)",
        )
    return report
