"""The tokens of a model turn, always: what the server reported, else counted, else estimated.

Some servers answer a streamed request without usage even when asked for it with
``stream_options: {"include_usage": true}`` (llama-cpp-python's server, LM Studio); any server
may leave a figure out. Such a turn is counted so that the call log, its ``stats`` and the
budgets still add it up:

* with the provider's tokenizer where it has one (``capabilities.token_counting``): the prompt
  is ``count_tokens(request)``, the answer ``count_tokens(request + answer) - prompt`` (so the
  chat template's own tokens around the answer are counted once, as a server counts them);
* else, or when the tokenizer fails or is slow, by the library's estimate ceil(characters / 4)
  over the same material (:func:`~ollm_lite.providers.base.approx_token_count`).

Either way the figure is marked ``usage.extra["estimated"] = True``; a figure the server gave is
kept as it is, and only the missing one is filled in. Counting never raises and never changes
a call's outcome. It runs once a turn has ended, never on the stream's path; a tokenizer look-up
over HTTP gets what is left of the call's deadline, at most :data:`COUNT_LIMIT` seconds, and a
tokenizer that failed is left alone for :data:`RETRY_AFTER` seconds (the estimate stands in).
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
import weakref
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from .._cancel_link import LinkedEvent
from ..errors import ConfigError
from ..providers.base import approx_token_count, call_with_cancel, request_chars
from ..types import ChatResult, Message, ProviderRequest, TextPart, Usage

if TYPE_CHECKING:
    from ._reader import CallLog

__all__ = [
    "COUNT_LIMIT",
    "ESTIMATED",
    "RETRY_AFTER",
    "counted_usage",
    "estimated_keys",
    "estimated_usage",
]

logger = logging.getLogger("ollm_lite.call_log")

#: The ``Usage.extra`` key that marks figures the library counted or estimated.
ESTIMATED = "estimated"
#: Longest a tokenizer look-up may hold up the end of a call (less when its deadline is nearer).
COUNT_LIMIT = 2.0
#: Seconds a provider whose tokenizer failed is not asked again.
RETRY_AFTER = 300.0
#: Less time than this left before the deadline: no look-up is started.
_MIN_LEFT = 0.05

_failed: weakref.WeakKeyDictionary[Any, float] = weakref.WeakKeyDictionary()
_failed_lock = threading.Lock()


def counted_usage(
    request: ProviderRequest,
    answer: ChatResult,
    provider: Any,
    *,
    deadline: float | None = None,
    tokenizer: bool = True,
) -> Usage | None:
    """The usage of one model turn: ``answer.usage`` when it gives both counts, else the counts
    it lacks from the provider's tokenizer or the estimate, marked ``extra["estimated"]``.

    Args:
        request: What the turn sent.
        answer: What came back (text, thinking and tool calls are counted; ``usage`` is what
            the server reported).
        provider: The provider the turn went to (its ``count_tokens`` is used where its
            capabilities say it has a tokenizer).
        deadline: ``time.monotonic()`` by which the call must end (``None``: no deadline);
            a look-up gets what is left of it, at most :data:`COUNT_LIMIT` seconds.
        tokenizer: ``False``: estimate without asking the provider (a cancelled call).

    Returns:
        The usage; ``None`` only when nothing could be counted. Never raises.
    """
    reported = answer.usage
    if _known(reported):
        return reported
    counts = None
    if tokenizer:
        counts = _tokenizer_counts(request, answer, provider, deadline)
    if counts is None:
        return estimated_usage(request, answer)
    return _merged(reported, *counts)


def estimated_usage(request: ProviderRequest, answer: ChatResult) -> Usage | None:
    """The figures ``answer.usage`` lacks, estimated at ceil(characters / 4) over the prompt
    (system prompt, messages, tool schemas) and the answer (text, thinking, tool calls), marked
    ``extra["estimated"]``. Never raises; ``None`` only when neither can be measured."""
    prompt: int | None
    try:
        prompt = approx_token_count(request)
    except Exception:  # a value json cannot write in a tool schema: its text alone
        prompt = _rough(request)
    try:
        completion = math.ceil(request_chars(_answer_only(request, answer)) / 4)
    except Exception:
        completion = math.ceil(len(answer.content or "") / 4) if answer.content else 0
    if prompt is None:
        return answer.usage
    return _merged(answer.usage, prompt, completion)


def _known(usage: Usage | None) -> bool:
    return usage is not None and _count(usage.prompt_tokens) and _count(usage.completion_tokens)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _merged(reported: Usage | None, prompt: int, completion: int) -> Usage:
    """The reported figures where given, the counted ones for the rest; marked estimated."""
    if reported is not None and _count(reported.prompt_tokens):
        prompt = reported.prompt_tokens  # type: ignore[assignment]
    if reported is not None and _count(reported.completion_tokens):
        completion = reported.completion_tokens  # type: ignore[assignment]
    extra = dict(reported.extra) if reported is not None else {}
    extra[ESTIMATED] = True
    return Usage(prompt, completion, prompt + completion, extra)


def _rough(request: ProviderRequest) -> int | None:
    try:
        chars = len(request.system_prompt or "") + sum(len(m.text) for m in request.messages)
    except Exception:
        return None
    return math.ceil(chars / 4)


def _answer_message(answer: ChatResult) -> Message:
    text = (answer.thinking or "") + (answer.content or "")
    return Message("assistant", [TextPart(text)], tool_calls=list(answer.tool_calls))


def _answer_only(request: ProviderRequest, answer: ChatResult) -> ProviderRequest:
    """A request holding only the answer (what the estimate of the answer measures)."""
    return ProviderRequest(request.model, [_answer_message(answer)])


def _tokenizer_counts(
    request: ProviderRequest, answer: ChatResult, provider: Any, deadline: float | None
) -> tuple[int, int] | None:
    """``(prompt, completion)`` by the provider's tokenizer, or ``None`` (no tokenizer, no time
    left, or it failed)."""
    capabilities = getattr(provider, "capabilities", None)
    if not getattr(capabilities, "token_counting", False) or _failed_lately(provider):
        return None
    now = time.monotonic()
    limit = now + COUNT_LIMIT if deadline is None else min(deadline, now + COUNT_LIMIT)
    if limit - now < _MIN_LEFT:
        return None
    cancel = LinkedEvent(request.cancel, deadline=limit)
    if cancel.is_set():
        return None
    try:
        asked = replace(request, cancel=cancel, timeout=None)
        prompt = call_with_cancel(provider, "count_tokens", asked, cancel=cancel)
        whole = replace(asked, messages=[*request.messages, _answer_message(answer)])
        both = call_with_cancel(provider, "count_tokens", whole, cancel=cancel)
    except Exception as exc:  # OllmError mostly; counting must never fail a call
        logger.debug(
            "token counting for the log failed (%s); using the estimate",
            getattr(exc, "code", type(exc).__name__),
        )
        _remember_failure(provider)
        return None
    if not (_count(prompt) and _count(both)):
        _remember_failure(provider)
        return None
    return prompt, max(0, both - prompt)


def _failed_lately(provider: Any) -> bool:
    with _failed_lock:
        try:
            when = _failed.get(provider)
        except TypeError:  # not weakly referable: never remembered
            return False
    return when is not None and time.monotonic() - when < RETRY_AFTER


def _remember_failure(provider: Any) -> None:
    with _failed_lock, contextlib.suppress(TypeError):  # not weakly referable: not kept
        _failed[provider] = time.monotonic()


def estimated_keys(log: CallLog, *, by: str, since: Any = None) -> set[str]:
    """The keys of ``log.stats(by=by, since=since)`` whose token sums include a counted or
    estimated figure (what ``logs stats`` marks with ``~``); cached calls add no tokens and
    do not count.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unknown ``by`` or a log that cannot be read.
    """
    from ._reader import _STATS_COLUMNS, _seconds_ago

    column = _STATS_COLUMNS.get(by)
    if column is None:
        raise ConfigError(f"by must be one of {', '.join(_STATS_COLUMNS)}, not {by!r}")
    # usage is compact JSON (no spaces), so the mark is this exact text
    sql = (
        f"SELECT DISTINCT coalesce({column}, '') AS key FROM calls "
        "WHERE cached = 0 AND instr(usage, ?) > 0"
    )
    params: list[Any] = [f'"{ESTIMATED}":true']
    if since is not None:
        sql += " AND started_ts >= ?"
        params.append(_seconds_ago(since, "since"))
    from ._rows import as_text

    return {as_text(row["key"]) or "" for row in log._query(sql, params)}
