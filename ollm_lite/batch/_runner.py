"""Running a batch file against one provider (or a fleet): the thread pool and its stops.

The whole input is read (a stream of bounded lines) and translated first, so a bad line stops
the run before any request is sent. Then at most ``concurrency`` requests are in flight; each
finished request becomes one output line at once (see :mod:`._output` for the exactly-once
rules). Work is handed to the pool a request at a time, never all at once, so a stop takes
effect immediately:

* ``stop`` (first Ctrl-C): no new request starts; those in flight finish and are written.
* ``cancel`` (a second Ctrl-C, or the caller's ``cancel`` event): requests in flight are
  interrupted (the HTTP read included) and not written; the next run sends them again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any

from .._cancel_link import LinkedEvent
from ..client._options import resolve
from ..errors import BadResponse, Cancelled, ConfigError, OllmError
from ..gate import chat_line
from ..providers.base import ProviderAdapter, call_with_cancel
from ..types import ProviderRequest
from ._format import BatchFileError, error_line, parse_input, raise_problems, success_line
from ._output import OutputFile, open_regular
from ._summary import BatchSummary
from ._translate import BodyProblem, ChatJob, Job, chat_completion, embeddings_list, job_for

__all__ = ["DEFAULT_CONCURRENCY", "Stops", "concurrency_for", "load_jobs", "run_file"]

logger = logging.getLogger(__name__)

#: Requests in flight when neither the caller nor the provider (a fleet's capacity) says.
DEFAULT_CONCURRENCY = 4
_POLL_S = 0.2


@dataclass(slots=True)
class Stops:
    """The two ways a run ends early."""

    stop: threading.Event = field(default_factory=threading.Event)
    """Take no new work; let requests in flight finish."""
    cancel: threading.Event = field(default_factory=threading.Event)
    """Interrupt requests in flight as well."""
    interrupted: bool = False
    """A Ctrl-C asked for the stop (the caller re-raises ``KeyboardInterrupt``)."""


@contextlib.contextmanager
def sigint_stops(stops: Stops, *, always: bool) -> Iterator[None]:
    """While inside: the first Ctrl-C sets ``stops.stop``, the second ``stops.cancel``.

    Only on the main thread, never when SIGINT is ignored (a process started by ``nohup`` or
    as a background job must not stop on a Ctrl-C meant for its terminal), and (unless
    ``always``) only when SIGINT still has Python's default handler, so an application's own
    handling is never replaced behind its back.
    """
    main = threading.current_thread() is threading.main_thread()
    current = signal.getsignal(signal.SIGINT) if main else None
    if (
        not main
        or current is signal.SIG_IGN
        or (not always and current is not signal.default_int_handler)
    ):
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        stops.interrupted = True
        if stops.stop.is_set():
            logger.warning("second interrupt: cancelling the requests in flight")
            stops.cancel.set()
        else:
            logger.warning("interrupt: no new requests; waiting for those in flight")
            stops.stop.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        # None: a handler installed from C; the default is the closest we can restore.
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


def load_jobs(
    input_path: str,
    default_model: str | None,
    resolve_model: Callable[[], str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> list[Job]:
    """Read, validate and translate the whole input file.

    ``resolve_model`` is asked (once) for the default model only when a line has none and
    ``default_model`` is ``None`` (a client that finds its model on the server). ``options``
    are the client's defaults (``connect(**options)``), applied where a line's body does not
    set the same thing.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` for an unreadable file, bad JSON, missing or
            duplicate ``custom_id``, an unsupported ``url`` or a body that cannot be sent.
        ConfigError: ``CONFIG_INVALID`` for a bad default option.
    """
    defaults = resolve(options) if options else None
    fd = open_regular(str(input_path), os.O_RDONLY | getattr(os, "O_BINARY", 0), "batch input")
    try:
        with open(fd, "rb") as f:
            items = parse_input(f, str(input_path))
    except OSError as exc:
        raise BatchFileError(
            f"cannot read batch input {input_path}: {exc.strerror or exc}",
            details={"path": str(input_path)},
        ) from exc
    jobs: list[Job] = []
    problems: list[dict[str, Any]] = []
    needs_model = any("model" not in item.body for item in items)
    if default_model is None and resolve_model is not None and needs_model:
        default_model = resolve_model()
    for item in items:
        try:
            jobs.append(job_for(item, default_model, defaults))
        except BodyProblem as exc:
            problems.append({"line": item.line, "message": str(exc)})
    raise_problems(str(input_path), problems)
    return jobs


def _execute(provider: ProviderAdapter, job: Job, cancel: threading.Event) -> dict[str, Any] | None:
    """One request → its output record; ``None`` when it was cancelled (not to be written)."""
    try:
        if isinstance(job, ChatJob):
            result = chat_line(provider, job.request, job.custom_id, cancel)  # through the gate
            line = success_line(job.custom_id, chat_completion(result, job.request.model))
            return _masked(provider, job.request, line)
        waits: threading.Event = cancel  # with the line's deadline, when the client sets one
        if job.timeout is not None:
            waits = LinkedEvent(cancel, deadline=time.monotonic() + job.timeout)
        vectors = call_with_cancel(provider, "embed", job.texts, job.model, cancel=waits)
        return success_line(job.custom_id, embeddings_list(vectors, job.model))
    except OllmError as exc:
        if isinstance(exc, Cancelled) and cancel.is_set():
            return None
        logger.debug("batch line %s failed: %s", job.custom_id, exc.code)
        return error_line(job.custom_id, exc)
    except Exception as exc:  # a provider bug must not lose the line nor stop the batch
        logger.exception("batch line %s: unexpected error from the provider", job.custom_id)
        error = BadResponse(f"unexpected {type(exc).__name__} from the provider: {exc}")
        return error_line(job.custom_id, error)


def _masked(provider: Any, request: ProviderRequest, line: dict[str, Any]) -> dict[str, Any]:
    """A success line as the output file keeps it: the connection's secrets (its keys, the
    client's headers) masked where the server's answer echoed them, as in the call log."""
    from ..call_log._masking import Masker, provider_secrets

    secrets = [*provider_secrets(provider), *request.headers.values()]
    if not secrets:
        return line
    masked: dict[str, Any] = Masker(secrets).value(line)
    return masked


def run_file(
    provider: ProviderAdapter,
    input_path: str,
    output_path: str,
    *,
    model: str | None,
    concurrency: int | None,
    stops: Stops,
    progress: Callable[[BatchSummary], None] | None,
    retry_failed: bool,
    resolve_model: Callable[[], str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> BatchSummary:
    """Run every request of ``input_path`` not yet in ``output_path``; see :func:`run_batch`."""
    started = time.monotonic()
    jobs = load_jobs(input_path, model, resolve_model, options)
    workers = concurrency_for(provider, concurrency)
    if _same_file(input_path, output_path):
        raise BatchFileError(
            f"the output {output_path} is the input file; choose another output",
            details={"path": str(output_path)},
        )
    try:
        out, resume = OutputFile.open(
            str(output_path), known_ids={j.custom_id for j in jobs}, retry_failed=retry_failed
        )
    except OSError as exc:
        raise BatchFileError(
            f"cannot open batch output {output_path}: {exc.strerror or exc}",
            details={"path": str(output_path)},
        ) from exc
    present = resume.ids
    pending = [job for job in jobs if job.custom_id not in present]
    counts = {"done": 0, "failed": 0}
    skipped = len(jobs) - len(pending)
    failed_before = len(resume.failed_ids)

    def summary() -> BatchSummary:
        return BatchSummary(
            len(jobs),
            counts["done"],
            counts["failed"],
            skipped,
            time.monotonic() - started,
            failed_before + counts["failed"],
        )

    logger.info(
        "batch %s: %d request(s), %d already in %s, %d to run, concurrency %d",
        input_path, len(jobs), skipped, output_path, len(pending), workers,
    )  # fmt: skip
    with out:
        _pump(provider, pending, out, workers, stops, counts, lambda: _report(progress, summary()))
    return summary()


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # ValueError: a NUL in a path
        return False


def _report(progress: Callable[[BatchSummary], None] | None, summary: BatchSummary) -> None:
    if progress is not None:
        progress(summary)


def concurrency_for(provider: Any, concurrency: int | None) -> int:
    """Requests in flight: ``concurrency``, else the provider's (a fleet's) capacity, else 4.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when ``concurrency`` is not a positive integer.
    """
    if concurrency is None:
        capacity = getattr(provider, "capacity", None)
        return capacity if isinstance(capacity, int) and capacity > 0 else DEFAULT_CONCURRENCY
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
    return concurrency


def _pump(
    provider: ProviderAdapter,
    pending: list[Job],
    out: OutputFile,
    workers: int,
    stops: Stops,
    counts: dict[str, int],
    report: Callable[[], None],
) -> None:
    queue = iter(pending)
    running: dict[Future[dict[str, Any] | None], Job] = {}
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ollm-batch")
    try:
        while True:
            while not stops.stop.is_set() and not stops.cancel.is_set() and len(running) < workers:
                job = next(queue, None)
                if job is None:
                    break
                running[pool.submit(_execute, provider, job, stops.cancel)] = job
            if not running:
                return
            finished, _ = wait(running, timeout=_POLL_S, return_when=FIRST_COMPLETED)
            for future in finished:
                del running[future]
                record = future.result()
                if record is None:
                    continue
                try:
                    record = out.append(record)
                except OSError as exc:
                    raise ConfigError(
                        f"cannot write to batch output {out.path}: {exc.strerror or exc}"
                    ) from exc
                counts["failed" if record["error"] is not None else "done"] += 1
                report()
    finally:
        if running:  # leaving early (an error, the caller's exception): interrupt the rest
            stops.cancel.set()
        pool.shutdown(wait=True, cancel_futures=True)
