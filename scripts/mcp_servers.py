#!/usr/bin/env python3
"""Install real Model Context Protocol servers for ollm_lite's MCP tests and examples.

Three reference servers, pinned, from the package registries, cached beside the llama.cpp
builds (the cache root of ``scripts/llamacpp.py``: ``$OLLM_LITE_CACHE``, else
``$XDG_CACHE_HOME/ollm-lite``, else ``~/.cache/ollm-lite``), under ``mcp/``:

* ``time``: PyPI ``mcp-server-time`` in a virtual environment of its own;
* ``git``: PyPI ``mcp-server-git`` in a virtual environment of its own;
* ``everything``: npm ``@modelcontextprotocol/server-everything`` in a folder of its own (the
  reference server that exercises every protocol feature).

Each install is built in a temporary folder, renamed into place and marked ``.complete`` under
the same lock as the llama.cpp builds, so concurrent test sessions wait for one another and
re-runs reuse what is complete. Every install command is bounded (:data:`INSTALL_BOUND_S`, or
``$OLLM_LITE_INSTALL_TIMEOUT_S``): past it, it is stopped and the error names its log.

npm runs *in* the folder (``cwd``, with a ``package.json`` of its own) rather than with
``--prefix``: ``--prefix`` also moves npm's global configuration file to
``<prefix>/etc/npmrc`` (https://docs.npmjs.com/cli/configuring-npm/npmrc, "Global config
file"), which would drop a machine's own settings (a ``cafile``, a proxy, a registry mirror).
npm logs at ``--loglevel=http``, so the progress lines show each registry request as it goes.

Usage::

    python3 scripts/mcp_servers.py install [--server time|git|everything|all]
    python3 scripts/mcp_servers.py command NAME     # prints the server's command as JSON

After ``install``, ``<cache root>/mcp/bin`` holds ``mcp-server-time``, ``mcp-server-git`` and
``mcp-server-everything``: put it on ``PATH`` to start the servers by their usual names.

Standard library only (plus ``npm`` on the PATH for the npm server).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))

import llamacpp  # the same folder: the cache layout and lock are shared

ServerName = Literal["time", "git", "everything"]
SERVER_NAMES: tuple[ServerName, ...] = ("time", "git", "everything")

TIME_VERSION = "2026.10.19"
GIT_VERSION = "2026.10.19"
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_PACKAGE = "@modelcontextprotocol/server-everything"
#: The longest one install command may run (seconds); each takes well under a minute.
INSTALL_BOUND_S = 600.0


class ScriptError(llamacpp.ScriptError):
    """A failure this script explains in one line (exit code 1)."""


def say(message: str) -> None:
    """Progress for people, on stderr (``command`` keeps stdout to one JSON line)."""
    print(f"[mcp_servers] {message}", file=sys.stderr, flush=True)


@dataclass(frozen=True)
class McpServerBuild:
    """One pinned server: its cached folder and how to install and run it."""

    name: ServerName
    version: str
    kind: Literal["pypi", "npm"]
    package: str
    module: str = ""
    """For PyPI servers: the module ``python -m`` runs."""

    @property
    def build(self) -> llamacpp.Build:
        spec = (
            f"{self.package}=={self.version}"
            if self.kind == "pypi"
            else f"{self.package}@{self.version}"
        )
        return llamacpp.Build(
            f"{self.package.replace('/', '+')}-{self.version}",
            spec,
            False,
            bound_s=INSTALL_BOUND_S,
        )


BUILDS: dict[ServerName, McpServerBuild] = {
    "time": McpServerBuild("time", TIME_VERSION, "pypi", "mcp-server-time", "mcp_server_time"),
    "git": McpServerBuild("git", GIT_VERSION, "pypi", "mcp-server-git", "mcp_server_git"),
    "everything": McpServerBuild("everything", EVERYTHING_VERSION, "npm", EVERYTHING_PACKAGE),
}


def _npm_steps(server: McpServerBuild) -> Callable[[Path, Path], None]:
    def steps(tmp: Path, log: Path) -> None:
        npm = shutil.which("npm")
        if npm is None:
            raise ScriptError("npm is not on the PATH: install Node.js (20 or newer) and npm")
        tmp.mkdir(parents=True)
        # npm's project root is the nearest folder with a package.json: this one.
        manifest = {"name": f"ollm-lite-mcp-{server.name}", "private": True}
        (tmp / "package.json").write_text(json.dumps(manifest) + "\n")
        spec = server.build.requirement
        llamacpp._run_logged(
            [npm, "install", "--no-audit", "--no-fund", "--loglevel=http", spec],
            log,
            cwd=tmp,
            bound=llamacpp.install_bound(server.build),
        )

    return steps


def install(names: Sequence[ServerName] = SERVER_NAMES) -> dict[ServerName, Path]:
    """Install (or reuse) the named servers; returns each one's folder.

    Raises:
        ScriptError: an install failed (the log's tail is in the message).
    """
    root = mcp_root()
    out: dict[ServerName, Path] = {}
    for name in names:
        server = BUILDS[name]
        steps = (
            llamacpp.pip_venv_steps(server.build) if server.kind == "pypi" else _npm_steps(server)
        )
        path, seconds = llamacpp.ensure_build(root, server.build, steps)
        if seconds is not None:
            say(f"installed {server.build.requirement} in {llamacpp.duration_text(seconds)}")
        out[name] = path
        _write_shim(root, name)
    return out


#: The name each server's own package gives its command.
EXECUTABLES: dict[ServerName, str] = {
    "time": "mcp-server-time",
    "git": "mcp-server-git",
    "everything": "mcp-server-everything",
}


def _write_shim(root: Path, name: ServerName) -> None:
    """``<root>/bin/<command>``: put that folder on PATH to run the servers by their names."""
    folder = root / "bin"
    folder.mkdir(parents=True, exist_ok=True)
    shim = folder / EXECUTABLES[name]
    parts = command(name, root)
    if name == "everything":
        parts = parts[:-1]  # its first argument picks the transport; stdio when none is given
    argv = " ".join(shlex.quote(part) for part in parts)
    tmp = shim.with_name(f".{shim.name}.{os.getpid()}")
    tmp.write_text(f'#!/bin/sh\nexec {argv} "$@"\n')
    tmp.chmod(0o755)
    os.replace(tmp, shim)


def mcp_root() -> Path:
    """Where the servers live: ``<cache root>/mcp`` (builds in its ``servers/`` folder)."""
    return llamacpp.cache_root() / "mcp"


def command(name: ServerName, root: Path | None = None) -> list[str]:
    """The command line that starts the installed server ``name`` over stdio.

    Raises:
        ScriptError: the server is not installed.
    """
    server = BUILDS[name]
    folder = server.build.path(mcp_root() if root is None else root)
    if not (folder / ".complete").is_file():
        raise ScriptError(
            f"{folder} is not installed: run `python3 scripts/mcp_servers.py install`"
        )
    if server.kind == "pypi":
        return [str(llamacpp.venv_python(folder)), "-m", server.module]
    node = shutil.which("node") or "node"
    entry = folder / "node_modules" / EVERYTHING_PACKAGE / "dist" / "index.js"
    return [node, str(entry), "stdio"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="mcp_servers.py", description="Real MCP servers for ollm_lite (pinned, cached)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="install or reuse the servers")
    p_install.add_argument("--server", choices=[*SERVER_NAMES, "all"], default="all")
    p_command = sub.add_parser("command", help="print a server's stdio command as JSON")
    p_command.add_argument("name", choices=list(SERVER_NAMES))
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            names = SERVER_NAMES if args.server == "all" else (args.server,)
            for name, path in install(names).items():
                say(f"{name}: {path}")
        else:
            print(json.dumps(command(args.name)))
    except llamacpp.ScriptError as exc:
        say(f"error: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PIP_DISABLE_PIP_VERSION_CHECK", "1")
    sys.exit(main())
