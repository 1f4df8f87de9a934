"""Many prompts over one client at once: ``Client.map`` and ``Client.map_unordered``.

Each prompt is one ``ask`` (same keywords, ``schema`` included) run on a thread pool with at
most ``concurrency`` calls in flight (default: the fleet's capacity, else 4). Prompts are taken
from the iterable only as slots free up, so a generator of a million prompts is fine. A failed
prompt never stops the others: it comes back as a :class:`~ollm_lite.Reply` with ``error`` set
and ``finish == "error"``. Leaving early (an exception, ``KeyboardInterrupt``, closing the
iterator) cancels the calls in flight; no thread outlives the call.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import replace
from typing import Any

from .._cancel_link import LinkedEvent
from ..client._options import check_names
from ..client._prepare import CallInputs
from ..client._run_call import Reply, call_reply, raise_for
from ..client._typed import answer_spec
from ..errors import OllmError
from ._runner import concurrency_for

__all__ = ["map_replies", "map_unordered"]

_ASK_KEYWORDS = ("system", "model", "schema", "images", "cancel")


def map_unordered(
    client: Any,
    prompts: Iterable[Any],
    *,
    concurrency: int | None = None,
    keywords: dict[str, Any],
) -> Iterator[tuple[int, Reply]]:
    """``(index, reply)`` for each prompt, as the answers finish.

    Raises:
        TypeError: an unknown keyword (at the call, before any request).
        ConfigError: ``CONFIG_INVALID`` for a bad ``concurrency``.
    """
    options = {k: v for k, v in keywords.items() if k not in _ASK_KEYWORDS}
    check_names(options, "map")
    asks = {k: keywords.get(k) for k in _ASK_KEYWORDS}
    spec = answer_spec(asks["schema"]) if asks["schema"] is not None else None
    workers = concurrency_for(client.provider, concurrency)
    return _pump(client, prompts, workers, asks, options, spec)


def _one(
    client: Any, prompt: Any, asks: dict[str, Any], options: dict[str, Any], spec: Any, stop: Any
) -> Reply:
    reply: Reply | None = None
    try:
        inputs = CallInputs(prompt, asks["system"], asks["model"], asks["images"], options)
        # stop follows the caller's cancel
        call = replace(client._begin(inputs), source="map")
        reply, folded = call_reply(client, call, stop, spec)
        raise_for(reply, folded, token_limit=True)
        return reply
    except OllmError as exc:
        if reply is None:
            reply = Reply("", None)
        reply.error = exc
        reply.finish = "error"
        return reply


def _pump(
    client: Any,
    prompts: Iterable[Any],
    workers: int,
    asks: dict[str, Any],
    options: dict[str, Any],
    spec: Any,
) -> Iterator[tuple[int, Reply]]:
    queue = enumerate(prompts)
    stop = LinkedEvent(asks["cancel"])  # set on leaving early; the caller's is only read
    running: dict[Future[Reply], int] = {}
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ollm-map")
    try:
        while True:
            while len(running) < workers:
                item = next(queue, None)
                if item is None:
                    break
                index, prompt = item
                running[pool.submit(_one, client, prompt, asks, options, spec, stop)] = index
            if not running:
                return
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                yield running.pop(future), future.result()
    finally:
        if running:
            stop.set()
        pool.shutdown(wait=True, cancel_futures=True)


def map_replies(
    client: Any,
    prompts: Iterable[Any],
    *,
    concurrency: int | None = None,
    keywords: dict[str, Any],
) -> list[Reply]:
    """Every prompt's :class:`Reply`, in input order (see :func:`map_unordered`)."""
    found: dict[int, Reply] = dict(
        map_unordered(client, prompts, concurrency=concurrency, keywords=keywords)
    )
    return [found[i] for i in range(len(found))]
