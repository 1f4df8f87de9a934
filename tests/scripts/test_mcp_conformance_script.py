"""scripts/mcp_conformance.py: the official MCP conformance suite (client mode, pinned) passes
every scenario ollm_lite's client claims, the sign-in (OAuth) scenarios included.

Node 22 and the suite are installed into the cache on first use (npm registry only); a
machine without npm, or whose registry cannot be reached, skips with a loud reason.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("scenario", mcp_conformance.SCENARIOS)
def test_scenario_passes(suite: Path, scenario: str) -> None:
    verdict = mcp_conformance.run_scenario(scenario, suite)
    assert verdict.passed, f"{scenario}: {verdict.summary}\n{verdict.output[-4000:]}"
