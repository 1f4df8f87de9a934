"""scripts/mcp_servers.py: pinned installs in the cache, the command lines, the PATH shims.

The installs themselves run once per cache (the MCP suite's fixtures use the same function);
here the empty-cache behaviour runs in a temporary cache root, and the shims are checked to
start the real servers by their usual names.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import http.server
import io
import json
import os
import shlex
import shutil
import ssl
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))

import mcp_servers  # scripts/ is not a package: found through the sys.path entry above

SCRIPT = Path(mcp_servers.__file__)


def test_versions_are_pinned() -> None:
    for build in mcp_servers.BUILDS.values():
        assert build.version and build.version[0].isdigit()
        assert build.version in build.build.requirement


def test_command_of_a_server_not_installed_says_how_to_install(tmp_path: Path) -> None:
    env = {**os.environ, "OLLM_LITE_CACHE": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "command", "time"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 1
    assert "mcp_servers.py install" in done.stderr


def test_install_writes_commands_and_shims() -> None:
    try:
        folders = mcp_servers.install(["time"])
    except mcp_servers.llamacpp.ScriptError as exc:  # pragma: no cover - offline machines
        pytest.skip(f"!!! PyPI unreachable, mcp-server-time not installed: {exc} !!!")
    assert (folders["time"] / ".complete").is_file()
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "command", "time"], capture_output=True, text=True
    )
    command = json.loads(done.stdout)
    assert command == mcp_servers.command("time") and Path(command[0]).is_file()
    shim = mcp_servers.mcp_root() / "bin" / "mcp-server-time"
    assert os.access(shim, os.X_OK)
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}})  # fmt: skip
    answer = subprocess.run(
        [str(shim)], input=line + "\n", capture_output=True, text=True, timeout=60
    )
    assert json.loads(answer.stdout.splitlines()[0])["result"]["serverInfo"]["name"] == "mcp-time"


# --------------------------------------------------------------------------- npm's settings


def _tiny_package(name: str, version: str) -> bytes:
    """An npm package tarball (``package/package.json`` only), gzipped."""
    manifest = json.dumps({"name": name, "version": version}).encode()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/package.json")
        info.size = len(manifest)
        tar.addfile(info, io.BytesIO(manifest))
    return buffer.getvalue()


@contextlib.contextmanager
def _https_registry(cert: Path, key: Path, name: str, version: str) -> Iterator[tuple[str, list]]:
    """A loopback HTTPS npm registry serving one package; yields its URL and the paths asked."""
    tarball = _tiny_package(name, version)
    asked: list[str] = []

    class Registry(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            base = f"https://127.0.0.1:{self.server.server_address[1]}"
            if self.path == f"/{name}":
                dist = {
                    "tarball": f"{base}/{name}/-/{name}-{version}.tgz",
                    "shasum": hashlib.sha1(tarball).hexdigest(),
                    "integrity": "sha512-"
                    + base64.b64encode(hashlib.sha512(tarball).digest()).decode(),
                }
                body = json.dumps({
                    "name": name, "dist-tags": {"latest": version},
                    "versions": {version: {"name": name, "version": version, "dist": dist}},
                }).encode()  # fmt: skip
                kind = "application/json"
            elif self.path == f"/{name}/-/{name}-{version}.tgz":
                body, kind = tarball, "application/octet-stream"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}/", asked
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def test_npm_install_keeps_the_machines_global_npmrc(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A machine whose global npmrc names a ``cafile`` (its registry sits behind a private CA):
    the install reads that file as npm itself would, and so trusts the registry. Here the
    registry is a loopback HTTPS server with a self-signed certificate that only the global
    npmrc names; the machine's global prefix is set the way npm finds it, ``$PREFIX``."""
    npm, openssl = shutil.which("npm"), shutil.which("openssl")
    if npm is None or openssl is None:
        pytest.skip("!!! npm or openssl is not on the PATH: npm's settings are not checked !!!")
    cert, key = tmp_path / "ca.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert,
         "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    machine = tmp_path / "machine"
    (machine / "etc").mkdir(parents=True)
    (machine / "etc" / "npmrc").write_text(f"cafile={cert}\n")
    (tmp_path / "home").mkdir()
    for name in list(os.environ):  # this test's npm settings only
        if name.lower().startswith("npm_config_") or name in ("NODE_EXTRA_CA_CERTS",):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PREFIX", str(machine))
    monkeypatch.setenv("npm_config_cache", str(tmp_path / "npm-cache"))
    monkeypatch.setenv("npm_config_fetch_retries", "0")
    monkeypatch.setenv("npm_config_update_notifier", "false")
    server = mcp_servers.McpServerBuild("everything", "1.0.3", "npm", "ollm-tiny")
    folder, log = tmp_path / "installed", tmp_path / "install.log"
    with _https_registry(cert, key, "ollm-tiny", "1.0.3") as (url, asked):
        monkeypatch.setenv("npm_config_registry", url)
        mcp_servers._npm_steps(server)(folder, log)
    installed = json.loads((folder / "node_modules" / "ollm-tiny" / "package.json").read_text())
    assert installed["version"] == "1.0.3"
    assert "/ollm-tiny/-/ollm-tiny-1.0.3.tgz" in asked
    assert "npm http fetch GET 200" in log.read_text()  # npm's own log, for the progress line


def test_a_hung_npm_install_ends_at_its_bound_with_an_error_naming_its_log(
    tmp_path: Path,
) -> None:
    """An npm that never finishes (a registry retried for ever): the install stops it and
    whatever it started at the bound, exits 1 with the log's name, and marks nothing complete."""
    fake = tmp_path / "bin"
    fake.mkdir()
    pid_file = tmp_path / "sleep.pid"
    (fake / "npm").write_text(
        "#!/bin/sh\n"
        'echo "npm http fetch GET https://registry.example/x attempt 1 failed with EHOSTDOWN"\n'
        f"sleep 300 & echo $! > {shlex.quote(str(pid_file))}\n"
        "wait\n"
    )
    (fake / "npm").chmod(0o755)
    cache = tmp_path / "cache"
    env = {
        **os.environ,
        "PATH": f"{fake}{os.pathsep}{os.environ.get('PATH', '')}",
        "OLLM_LITE_CACHE": str(cache),
        "OLLM_LITE_INSTALL_TIMEOUT_S": "2",
    }
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "install", "--server", "everything"],
        env=env, capture_output=True, text=True, timeout=120,  # only a bound against a hang
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    build = mcp_servers.BUILDS["everything"].build
    log = mcp_servers.llamacpp.build_log(cache / "mcp", build)
    assert "did not finish in 2 s" in done.stderr and str(log) in done.stderr
    assert "attempt 1 failed with EHOSTDOWN" in log.read_text()
    assert not build.complete(cache / "mcp")
    sleeper = int(pid_file.read_text())
    deadline = time.monotonic() + 30  # generous: only a bound against a hang
    while mcp_servers.llamacpp._alive(sleeper) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not mcp_servers.llamacpp._alive(sleeper)
