"""Batch lines on record: each line of ``run_batch`` is one call, source
``batch:<input file's base name>``, with its ``custom_id``.

Batch lines are whole (non-streaming) requests, so ``first_token_seconds`` stays ``None``.
With ``cache=True`` a line identical to a logged one is answered from the log.
"""

from __future__ import annotations

import os
import threading
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ..client._run_call import Reply
from ..errors import Cancelled, OllmError
from ..types import ChatResult, ProviderRequest
from ._cache import cache_key
from ._records import tool_call_dict, tool_call_from_dict, usage_dict

if TYPE_CHECKING:
    from ._recorder import CallLogger

__all__ = ["batch_provider", "chat_line", "cli_batch_provider"]

_FINISH = {"stop": "complete", "length": "complete", "tool_calls": "tool_calls"}


def batch_provider(client: Any, input_path: Any) -> Any:
    """The provider a batch runs on: ``client``'s, logging each line when ``client`` logs."""
    logger: CallLogger | None = getattr(client, "call_log", None)
    provider = client.provider
    if logger is None:
        return provider
    return _LineLogging(provider, logger, f"batch:{os.path.basename(str(input_path))}")


def cli_batch_provider(provider: Any, config: Any, input_path: Any) -> Any:
    """``provider`` for ``ollm-lite batch run``: logging each line when ``OLLM_LOG`` or
    ``[log]`` turn the log on."""
    from ._hooks import client_logger

    logger = client_logger(None, None, config, provider)
    if logger is None:
        return provider
    return _LineLogging(provider, logger, f"batch:{os.path.basename(str(input_path))}")


def chat_line(
    provider: Any, request: ProviderRequest, custom_id: str, cancel: threading.Event
) -> ChatResult:
    """One batch line's answer (logged when the provider is a logging one)."""
    if isinstance(provider, _LineLogging):
        return provider.line(request, custom_id, cancel)
    result: ChatResult = provider.chat(replace(request, cancel=cancel))
    return result


class _LineLogging:
    """A provider whose batch lines are logged; everything else is the provider's."""

    def __init__(self, inner: Any, logger: CallLogger, source: str) -> None:
        self._inner = inner
        self._logger = logger
        self._source = source

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def line(self, request: ProviderRequest, custom_id: str, cancel: threading.Event) -> ChatResult:
        recorder = self._logger.begin(self._source, custom_id=custom_id, model=request.model)
        if request.headers:  # the client's headers: secrets, as in every logged call
            recorder.mask = self._logger.masker(list(request.headers.values()))
        if request.timeout is not None:  # the client's timeout: the line's deadline
            recorder.deadline = recorder.started + request.timeout
        described = recorder.request_dict(request)
        recorder.messages = described["messages"]
        recorder.options = dict(described["options"])
        key = cache_key(self._logger, described)
        answer: dict[str, Any] = {"text": "", "thinking": "", "tool_calls": [], "finish": None}
        turn = {
            "request": described,
            "answer": answer,
            "cached": False,
            "key": key,
            "live": (self._inner, replace(request, cancel=cancel)),  # to count its tokens
        }
        recorder.turns.append(turn)
        found = recorder.lookup(key) if self._logger.cache else None
        if found is not None:
            turn["answer"], turn["cached"] = found, True
            result = _result_of(found)
        else:
            try:
                result = self._inner.chat(replace(request, cancel=cancel))
            except OllmError as exc:
                cancelled = isinstance(exc, Cancelled)
                answer["finish"] = "cancelled" if cancelled else "error"
                if not cancelled:
                    answer["error"] = {"code": exc.code, "message": exc.message}
                finish = "cancelled" if cancelled else "error"
                recorder.finish(
                    Reply("", None, finish=finish, turns=1, error=None if cancelled else exc)
                )
                raise
            answer.update(
                text=result.content or "",
                thinking=result.thinking or "",
                tool_calls=[tool_call_dict(c) for c in result.tool_calls],
                finish="tool" if result.finish_reason == "tool_calls" else result.finish_reason,
                usage=usage_dict(result.usage),
            )
        recorder.finish(
            Reply(
                result.content or "",
                result.thinking,
                tool_calls=list(result.tool_calls),
                usage=result.usage if found is None else None,
                finish=_FINISH.get(result.finish_reason, result.finish_reason),
                turns=1,
            )
        )
        return result


def _result_of(answer: dict[str, Any]) -> ChatResult:
    calls = [tool_call_from_dict(c) for c in answer.get("tool_calls") or ()]
    finish = answer.get("finish")
    reason: Any = "tool_calls" if finish == "tool" else (finish or "stop")
    return ChatResult(
        answer.get("text") or None, reason, calls, None, answer.get("thinking") or None
    )
