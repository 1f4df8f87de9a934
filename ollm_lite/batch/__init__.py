"""Batches: thousands of requests from a JSONL file, resumable, each answered exactly once.

::

    summary = ollm_lite.run_batch("tickets.jsonl", "labels.jsonl", client=llm, progress=True)

The files are OpenAI's batch format (https://platform.openai.com/docs/guides/batch), as vLLM's
``run-batch`` (``vllm/entrypoints/openai/run_batch.py``) reads and writes it, so one input file
runs here against live servers and unchanged on a vLLM cluster or a hosted batch API. The
pieces: :mod:`._format` (lines in and out), :mod:`._translate` (bodies to provider requests
and answers back to OpenAI objects), :mod:`._output` (the resumable writer), :mod:`._runner`
(the thread pool), :mod:`._progress` (the CLI's progress line), :mod:`._make` (prompts to an
input file). Spreading the requests over several servers is :mod:`ollm_lite.fleet`'s job.

Resuming and stopping: every ``custom_id`` already in the output is skipped on the next run
(failed ones too, unless ``retry_failed``), and a half-written last line is detected and
written again. A Ctrl-C (on the main thread, where SIGINT has Python's default handler) stops
taking new requests and lets those in flight finish; a second Ctrl-C cancels them; either way
``KeyboardInterrupt`` is raised once the output is consistent.
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from .._cancel_link import LinkedEvent
from ..gate import batch_gate
from ._format import BatchFileError
from ._make import make_input
from ._progress import BatchProgressPrinter
from ._runner import Stops, run_file, sigint_stops
from ._summary import BatchSummary

__all__ = ["BatchFileError", "BatchSummary", "make_input", "run_batch"]

Progress = bool | Callable[[BatchSummary], None] | None


def run_batch(
    input_path: str | Any,
    output_path: str | Any,
    *,
    client: Any = None,
    concurrency: int | None = None,
    cancel: threading.Event | None = None,
    progress: Progress = None,
    retry_failed: bool = False,
) -> BatchSummary:
    """Run every request of a batch input file not yet answered in ``output_path``.

    Each finished request is appended to ``output_path`` at once as one line. Run it again
    after a crash, a reboot or a Ctrl-C and it carries on (see "Resuming and stopping" in
    :mod:`ollm_lite.batch`): every ``custom_id`` already in the output is skipped.

    Args:
        input_path: The JSONL input (``{custom_id, method, url, body}`` lines; ``url``
            ``/v1/chat/completions`` or ``/v1/embeddings``).
        output_path: The JSONL output (``{id, custom_id, response, error}``), created or resumed.
        client: A connected client (``ollm_lite.connect(...)``; a fleet with ``hosts=``);
            ``None`` connects with the configuration, as the CLI does. Its model (else the
            server's only chat model) is used for lines whose body has none, and its options
            (``connect(**options)``) wherever a line's body does not set the same thing:
            ``headers`` go with every request, ``timeout`` is each line's deadline.
        concurrency: Requests in flight (default: the fleet's capacity, else 4).
        cancel: Setting it interrupts the requests in flight (not written; the next run sends
            them again) and returns the summary so far.
        progress: ``None`` silent; ``True`` a progress line on stderr (a bar on a terminal);
            a callable receives the running :class:`BatchSummary` after each line.
        retry_failed: First rewrite the output without its failed lines (atomically), so
            they run again.

    Returns:
        The :class:`BatchSummary` of this run; its ``failed_in_output`` also counts the failed
        lines kept from earlier runs (nonzero: the output is not all answers yet).

    Raises:
        BatchFileError: ``CONFIG_INVALID`` before any request for an unreadable or invalid
            input (bad JSON, ``NaN`` included, a line over 16 MiB, missing or duplicate
            ``custom_id``, unsupported ``url``, a body that cannot be sent), an output that is
            not this input's, or a path that is no regular file.
        ConfigError: ``CONFIG_INVALID`` for a bad ``concurrency`` or an unwritable output.
        KeyboardInterrupt: after a Ctrl-C, once the lines in flight are written.
    """
    with _connected(client) as connected:
        return run_with_provider(
            batch_gate(connected, input_path),  # each line through the client's gate
            str(input_path),
            str(output_path),
            model=connected.model,
            resolve_model=_model_resolver(connected),
            options=getattr(connected, "options", None),
            concurrency=concurrency,
            cancel=cancel,
            progress=progress,
            retry_failed=retry_failed,
        )


@contextlib.contextmanager
def _connected(client: Any) -> Iterator[Any]:
    """``client``, else a client connected with the configuration (closed on leaving)."""
    if client is not None:
        yield client
        return
    from ..client import connect

    with connect() as default_client:
        yield default_client


def _model_resolver(client: Any) -> Callable[[], str] | None:
    resolve = getattr(client, "resolved_model", None)
    return resolve if callable(resolve) else None


def run_with_provider(
    provider: Any,
    input_path: str,
    output_path: str,
    *,
    model: str | None,
    concurrency: int | None = None,
    cancel: threading.Event | None = None,
    progress: Progress = None,
    retry_failed: bool = False,
    stops: Stops | None = None,
    resolve_model: Callable[[], str] | None = None,
    options: Mapping[str, Any] | None = None,
) -> BatchSummary:
    """:func:`run_batch` over a provider object (or fleet), a default model and default
    options (a client's, as :class:`~ollm_lite.client.Options`).

    With ``stops`` given (the CLI, which owns the process), Ctrl-C is always handled and
    reported in ``stops.interrupted`` instead of raising ``KeyboardInterrupt``.
    """
    own = stops is not None
    if stops is None:
        # the run sets its own event (leaving early, a second Ctrl-C); the caller's is only read
        stops = Stops(cancel=LinkedEvent(cancel))
    printer: BatchProgressPrinter | None = None
    callback: Callable[[BatchSummary], None] | None = None
    if progress is True:
        printer = BatchProgressPrinter(sys.stderr, hosts=_hosts_note(provider))
        callback = printer
    elif callable(progress):
        callback = progress
    with sigint_stops(stops, always=own):
        summary = run_file(
            provider,
            input_path,
            output_path,
            model=model,
            concurrency=concurrency,
            stops=stops,
            progress=callback,
            retry_failed=retry_failed,
            resolve_model=resolve_model,
            options=options,
        )
    if printer is not None:
        printer.finish(summary)
    if stops.interrupted and not own:
        raise KeyboardInterrupt
    return summary


def _hosts_note(provider: Any) -> Callable[[], str] | None:
    health = getattr(provider, "health_note", None)
    return health if callable(health) else None
