"""The stdio transport: an MCP server as a child process speaking JSON lines on stdin/stdout.

MCP specification, Basic > Transports > stdio: the client launches the server as a
subprocess; messages are newline-delimited JSON-RPC on the server's stdin and stdout; the
server may write anything to stderr (logging), and nothing but MCP messages to stdout.
Shutdown (Basic > Lifecycle > Shutdown, stdio): close the server's stdin, wait for it to exit,
send SIGTERM if it does not, then SIGKILL.

Threads, all daemons: a reader (stdout → :class:`~ollm_lite.mcp.jsonrpc.LineSplitter` →
the session's callback), a writer (a queue, so the reader never blocks on a full stdin pipe
while it answers a ping) and a drain for stderr (each line logged at DEBUG on
``ollm_lite.mcp.stdio``; the last lines go into the error when the server dies). The values
of ``env`` are secrets (:mod:`ollm_lite.http.secrets`): a server printing them finds them
masked in those log records and errors. The server
runs in a process group of its own, so closing also ends what it started, and Ctrl-C in a
terminal reaches the script, not the server, which the script closes itself.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import queue
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from ..errors import BadResponse, ConfigError, ConnectionFailed, OllmError
from ..http.secrets import Redactor
from .jsonrpc import (
    MAX_MESSAGE_BYTES,
    LineSplitter,
    Message,
    OnClose,
    OnMessage,
    Oversized,
    encode_message,
)

__all__ = ["StdioTransport"]

logger = logging.getLogger(__name__)

#: Seconds the server gets to exit after its stdin closes, then again after SIGTERM.
CLOSE_GRACE_S = 2.0
TERM_GRACE_S = 3.0
_STDERR_TAIL = 20
_READ_SIZE = 1 << 16


class StdioTransport:
    """One server subprocess; :meth:`start` launches it, :meth:`close` ends it for sure."""

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        if isinstance(command, str | bytes) or not command:
            raise ConfigError(
                'an MCP stdio command must be a non-empty list of strings, e.g. ["mcp-server-time"]'
            )
        if not all(isinstance(part, str) for part in command):
            raise ConfigError(f"every part of the MCP command must be a str: {list(command)!r}")
        self.command = list(command)
        self.env = dict(env or {})
        self.redact = Redactor(v for v in self.env.values() if isinstance(v, str))
        self.cwd = None if cwd is None else os.fspath(cwd)
        self.max_message_bytes = max_message_bytes
        self.describe = f"MCP server {self.command[0]!r}"
        self.pid: int | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._outbox: queue.Queue[bytes | None] = queue.Queue()
        self._stderr_tail: collections.deque[str] = collections.deque(maxlen=_STDERR_TAIL)
        self._threads: list[threading.Thread] = []
        self._closed = threading.Event()
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ life cycle

    def start(self, on_message: OnMessage, on_close: OnClose) -> None:
        """Launch the server and its reader, writer and stderr threads.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when the command or ``cwd`` cannot be used.
        """
        env = {**os.environ, **self.env}
        try:
            proc = subprocess.Popen(
                self.command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
                cwd=self.cwd,
                start_new_session=True,
                bufsize=0,
            )
        except (OSError, ValueError, TypeError) as exc:  # TypeError: a non-str env value
            raise ConfigError(
                f"cannot start the MCP server {self.command!r}: {exc}; check the command "
                "(is the server installed and on the PATH?) and cwd",
                details={"command": self.command, "cwd": self.cwd},
            ) from exc
        self._proc = proc
        self.pid = proc.pid
        logger.debug("started %s as pid %d", self.command, proc.pid)
        self._spawn(self._read_stdout, proc, on_message, on_close, name="ollm-mcp-reader")
        self._spawn(self._write_stdin, proc, name="ollm-mcp-writer")
        self._spawn(self._drain_stderr, proc, name="ollm-mcp-stderr")

    def _spawn(self, target: Callable[..., None], *args: object, name: str) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        self._threads.append(thread)
        thread.start()

    def send(self, message: Message) -> None:
        """Queue one message for the server's stdin.

        Raises:
            ConnectionFailed: ``CONNECTION_FAILED`` when the server is closed or gone.
        """
        if self._closed.is_set():
            raise ConnectionFailed(f"{self.describe} is closed")
        self._outbox.put(encode_message(message))

    def abandon(self, request_id: object) -> None:
        """Nothing to do on stdio: the session sends ``notifications/cancelled`` itself."""

    def close(self) -> None:
        """End the server: close stdin, wait, SIGTERM, wait, SIGKILL; join every thread."""
        with self._lock:
            if self._closed.is_set() and self._proc is None:
                return
            self._closed.set()
            proc, self._proc = self._proc, None
        self._outbox.put(None)  # the writer closes stdin once what is queued is written
        if proc is not None:
            _stop_process(proc, self.describe)
        for thread in self._threads:
            if thread is not threading.current_thread():
                thread.join(timeout=TERM_GRACE_S)
        if proc is not None:
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()

    # ------------------------------------------------------------------ threads

    def _read_stdout(
        self, proc: subprocess.Popen[bytes], on_message: OnMessage, on_close: OnClose
    ) -> None:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        splitter = LineSplitter(self.max_message_bytes)
        from .jsonrpc import parse_message  # local: keeps the hot loop's globals short

        while True:
            try:
                chunk = os.read(fd, _READ_SIZE)
            except OSError:
                chunk = b""
            lines = splitter.feed(chunk) if chunk else splitter.flush()
            for line in lines:
                if isinstance(line, Oversized):
                    on_message(line)
                    continue
                try:
                    on_message(parse_message(line))
                except BadResponse as exc:
                    on_message(exc)
            if not chunk:
                break
        on_close(self._exit_error(proc))

    def _exit_error(self, proc: subprocess.Popen[bytes]) -> OllmError:
        if self._closed.is_set():
            return ConnectionFailed(f"{self.describe} was closed")
        code = _peek_exit_code(proc, 1.0)
        tail = self.redact("\n".join(self._stderr_tail))
        how = "closed its stdout" if code is None else f"exited with code {code}"
        return ConnectionFailed(
            f"{self.describe} {how}" + (f"; its last stderr lines:\n{tail}" if tail else ""),
            details={"command": self.command, "exit_code": code, "stderr": tail},
        )

    def _write_stdin(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None
        stdin = proc.stdin
        while True:
            data = self._outbox.get()
            if data is None:
                break
            try:
                stdin.write(data)
            except (OSError, ValueError):  # the server is gone: the reader reports it
                break
        with contextlib.suppress(OSError, ValueError):
            stdin.close()

    def _drain_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        stderr = proc.stderr
        assert stderr is not None
        # ``close`` shuts the pipe after its grace even when something that left the server's
        # process group still holds it open and writes: the read then fails, which ends this.
        with contextlib.suppress(OSError, ValueError):
            for raw in iter(lambda: stderr.readline(65536), b""):
                line = self.redact(raw.decode("utf-8", "replace").rstrip())
                if line:
                    self._stderr_tail.append(line)
                    logger.debug("%s stderr: %s", self.describe, line)


def _wait_exit_code(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def _peek_exit_code(proc: subprocess.Popen[bytes], timeout: float) -> int | None:
    """The exit code once the process exited (waiting up to ``timeout``), without reaping it."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:
        return _wait_exit_code(proc, timeout)
    deadline = time.monotonic() + timeout
    while proc.returncode is None:
        try:
            info = waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            break
        if info is not None:
            if info.si_code == os.CLD_EXITED:
                return int(info.si_status)
            return -int(info.si_status)  # killed by a signal, as Popen.returncode says it
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
    return proc.returncode


def _stop_process(proc: subprocess.Popen[bytes], describe: str) -> None:
    """Wait for the server to exit after its stdin closed; SIGTERM, then SIGKILL its group."""
    if _exited_within(proc, CLOSE_GRACE_S):
        _kill_group(proc, signal.SIGKILL)  # whatever it started and left behind
    else:
        logger.debug("%s did not exit after stdin closed: SIGTERM", describe)
        _kill_group(proc, signal.SIGTERM)
        if not _exited_within(proc, TERM_GRACE_S):
            logger.debug("%s ignored SIGTERM: SIGKILL", describe)
        _kill_group(proc, signal.SIGKILL)
    proc.wait()


def _exited_within(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Whether the process exited, without reaping it (its pid keeps naming its group)."""
    deadline = time.monotonic() + timeout
    waitid = getattr(os, "waitid", None)
    while True:
        if proc.returncode is not None:
            return True
        if waitid is None:
            return _wait_exit_code(proc, max(0.0, deadline - time.monotonic())) is not None
        try:
            if waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)


def _kill_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    if proc.returncode is not None:
        return  # reaped: its pid may belong to someone else now
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
