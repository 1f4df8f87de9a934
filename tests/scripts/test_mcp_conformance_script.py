"""scripts/mcp_conformance.py: the official MCP conformance suite (client mode, pinned) passes
every scenario ollm_lite's client claims, the sign-in (OAuth) scenarios included.

Node 22 and the suite are installed into the cache on first use (npm registry only); a
machine without npm, or whose registry cannot be reached, skips with a loud reason.
"""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest
from support.mcp_support import alive, wait_gone

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import mcp_conformance  # scripts/ is not a package: found through the sys.path entry above

_OFFLINE_WORDS = ("network", "enotfound", "eai_again", "etimedout", "econnrefused", "timed out")


@pytest.fixture(scope="module")
def suite() -> Path:
    if shutil.which("npm") is None:
        pytest.skip("!!! npm is not on the PATH: the MCP conformance suite cannot be installed !!!")
    try:
        return mcp_conformance.install()
    except mcp_conformance.llamacpp.ScriptError as exc:
        if any(word in str(exc).lower() for word in _OFFLINE_WORDS):
            pytest.skip(f"!!! the npm registry is unreachable; suite not installed: {exc} !!!")
        raise


def test_the_scenarios_named_in_the_docs_are_the_ones_run() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "mcp.md").read_text()
    for scenario in mcp_conformance.SCENARIOS:
        assert f"`{scenario}`" in docs


# What the suite does to a client: starts it through a shell and, past its own timeout,
# signals only that shell. The grandchild writes its pid, then outlives its parent.
_LEAVES_A_CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    print(f"child {child.pid}", flush=True)
    if sys.argv[1] == "hang":
        time.sleep(120)
    """
)


@pytest.mark.parametrize("how", ["exits", "hang"])
def test_what_a_scenario_started_is_stopped_with_it(tmp_path: Path, how: str) -> None:
    log = tmp_path / "out.log"
    cmd = [sys.executable, "-c", _LEAVES_A_CHILD, how]
    bound = 120.0 if how == "exits" else 8.0
    code, timed_out = mcp_conformance.run_bounded(
        cmd, log, env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path, bound=bound
    )
    pid = int(log.read_text().split()[1])
    assert timed_out is (how == "hang")
    assert code == (0 if how == "exits" else -15)
    assert wait_gone(pid), f"the grandchild {pid} outlived the run"
    assert not alive(pid)


@pytest.mark.parametrize("scenario", mcp_conformance.SCENARIOS)
def test_scenario_passes(suite: Path, scenario: str) -> None:
    verdict = mcp_conformance.run_scenario(scenario, suite)
    assert verdict.passed, f"{scenario}: {verdict.summary}\n{verdict.output[-4000:]}"
