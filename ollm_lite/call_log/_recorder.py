"""Recording one call: its model turns as they run, the row when it ends.

A :class:`CallLogger` belongs to a client with the log on: it knows the log file, the
connection's secrets and whether to answer from the cache. :meth:`CallLogger.begin` starts a
:class:`Recorder` for one call. The gate (:mod:`ollm_lite.gate`), which every model request
passes, opens each turn's record with :meth:`Recorder.open_turn` and notes the answer into
it as it passes; the call's end hands its ``Reply`` to :meth:`Recorder.finish`, which builds
the row and commits it before the call returns. Nothing is written on the stream's path.
"""

from __future__ import annotations

import os
import secrets
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import fields, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..client._run_call import Reply
from ..types import (
    GenerationOptions,
    ProviderRequest,
    Usage,
)
from ..types._event_fold import add_usage
from ._answers import answer_result
from ._cache import cache_key, endpoint, lookup, servers
from ._masking import Masker, call_secrets, provider_secrets
from ._records import (
    message_dict,
    result_to_dict,
    tool_call_dict,
    usage_dict,
    usage_from_dict,
)
from ._usage import ESTIMATED, counted_usage
from ._writer import LogFile, LogWait

if TYPE_CHECKING:
    from ..client._prepare import Call

__all__ = ["CallLogger", "Recorder", "host_of", "new_id"]

#: Turn endings a cache may answer from (not an error, not a cancel).
_GOOD_FINISH = frozenset({"stop", "length", "tool", "tool_calls", "content_filter", "refusal"})


def new_id(now_ns: int | None = None) -> str:
    """A call id that sorts by time: microseconds since the epoch, then random digits."""
    stamp = (time.time_ns() if now_ns is None else now_ns) // 1000
    return f"{stamp:014x}{secrets.token_hex(5)}"


def host_of(base_url: str | None) -> str | None:
    """``scheme://host:port`` of a base URL (a fleet's ``", "``-joined list: each one)."""
    if not base_url:
        return None
    found = (endpoint(url) for url in base_url.split(", "))
    return ", ".join(e[0] for e in found if e is not None) or None


def generation_dict(options: GenerationOptions | None) -> dict[str, Any]:
    """The generation options that are set (``None`` fields and an empty ``extra_body`` left
    out)."""
    if options is None:
        return {}
    found = {f.name: getattr(options, f.name, None) for f in fields(options)}
    return {k: v for k, v in found.items() if v is not None and v != {}}


def request_identity(request: ProviderRequest) -> dict[str, Any]:
    """What identifies a model turn's request, as the log keeps it (never its headers,
    timeout or cancel): the cache's identity, and what a strict replay compares."""
    messages = _with_system(request.system_prompt, [message_dict(m) for m in request.messages])
    return {
        "model": request.model,
        "messages": messages,
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in request.tools or ()
        ],
        "tool_choice": request.tool_choice,
        "response_format": request.response_format,
        "think": request.think,
        "options": generation_dict(request.options),
    }


class CallLogger:
    """The call log of one client: where it goes, what to mask, whether to cache.

    Args:
        path: The log file.
        cache: Answer identical model turns from the log.
        provider: The client's provider (its name, host and secrets).
        secrets: Other values never to store (configured keys, MCP env and header values).
    """

    def __init__(
        self, path: Path, *, cache: bool, provider: Any, secrets: Sequence[str] = ()
    ) -> None:
        self.path = Path(path)
        self.cache = cache
        self.file = LogFile(self.path)
        self.provider_name = str(getattr(provider, "name", "") or "")
        self.host = host_of(_base_url(provider))
        self.hosts = servers(_base_url(provider))  # the cache's identity: paths count
        self._secrets = [*provider_secrets(provider), *secrets]
        self._masker = Masker(self._secrets)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The connection's values never to store (for a saved session's masking)."""
        return tuple(self._secrets)

    def __repr__(self) -> str:
        return f"CallLogger(path={str(self.path)!r}, cache={self.cache})"

    def close(self) -> None:
        """Close the connections to the log (a later call opens new ones)."""
        self.file.close()

    def begin(
        self,
        source: str,
        call: Call | None = None,
        *,
        session_id: str | None = None,
        custom_id: str | None = None,
        model: str | None = None,
        deadline: float | None = None,
        headers: Sequence[str] = (),
    ) -> Recorder:
        """Start recording one call (``deadline``: ``time.monotonic()`` value the call must
        end by, when ``call`` does not carry it; ``headers``: the values of the headers its
        requests carry, never stored)."""
        recorder = Recorder(
            self, source, call, session_id=session_id, custom_id=custom_id, model=model
        )
        if deadline is not None:
            recorder.deadline = deadline
        if headers:
            recorder.mask = self.masker([*recorder.secret, *headers])
        return recorder

    def masker(self, extra: Sequence[str] = ()) -> Masker:
        """The masker of this connection's secrets and ``extra`` (a call's header values)."""
        if not extra:
            return self._masker
        return Masker([*self._secrets, *extra])


def _base_url(provider: Any) -> str | None:
    url = getattr(provider, "base_url", None)
    return url if isinstance(url, str) else None


class Recorder:
    """One call on its way to the log."""

    def __init__(
        self,
        logger: CallLogger,
        source: str,
        call: Call | None,
        *,
        session_id: str | None,
        custom_id: str | None,
        model: str | None,
    ) -> None:
        self.logger = logger
        self.source = source
        self.session_id = session_id
        self.custom_id = custom_id
        self.started_ns = time.time_ns()
        self.started = time.monotonic()
        self.first_token: float | None = None
        self.model = model or (call.model if call is not None else None)
        self.turns: list[dict[str, Any]] = []
        self.messages: list[dict[str, Any]] = []
        self.options: dict[str, Any] = {}
        secret: list[str] = []  # this call's own and its history's (masking.call_secrets)
        self.log_wait = LogWait()  # the call's look-ups and write share one allowance
        self.from_call = call is not None
        if call is not None:
            settings = call.settings
            secret = call_secrets(call)
            history = [*call.history, call.prompt]
            self.messages = _with_system(
                call.loop.get("system_prompt"), [message_dict(m) for m in history]
            )
            self.options = _options(call)
            self.deadline = settings.deadline
        self.secret = list(secret)
        self.mask = logger.masker(self.secret)
        self._lock = threading.Lock()
        self.done = False

    @property
    def deadline(self) -> float | None:
        """The call's deadline (``time.monotonic()``), which no wait for the log passes."""
        return self.log_wait.deadline

    @deadline.setter
    def deadline(self, value: float | None) -> None:
        self.log_wait.deadline = value

    def lookup(self, key: str) -> dict[str, Any] | None:
        """The logged answer to a turn of this identity (``None``: a miss, also when the log
        cannot be read in the time the call has left for it)."""
        return lookup(self.logger.file, key, self.log_wait)

    # ------------------------------------------------------------------ turns

    def open_turn(self, request: ProviderRequest, adapter: Any) -> dict[str, Any]:
        """The record of a new model turn of this call: its request (and cache key, when the
        log answers from itself) and an answer the gate fills as it arrives (``adapter``:
        the provider it goes to, which counts its tokens when the server reports none)."""
        described = self.request_dict(request)
        key = cache_key(self.logger, described) if self.logger.cache else None
        record: dict[str, Any] = {
            "request": described,
            "answer": {"text": "", "thinking": "", "tool_calls": [], "finish": None},
            "cached": False,
            "key": key,
            "live": (adapter, request),  # for counting its tokens when the server gave none
        }
        with self._lock:
            if not self.turns:
                self.model = request.model
                self.messages = described["messages"]
                if not self.from_call:  # the CLI's chat or a batch line: its first request
                    self.options = dict(described["options"])
            self.turns.append(record)
        return record

    def cached(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The logged answer to ``record``'s request when the cache has one (then the turn
        is marked answered from the log)."""
        key = record["key"]
        if key is None:
            return None
        found = self.lookup(key)
        if found is not None:
            record["answer"] = found
            record["cached"] = True
        return found

    def note_first_token(self) -> None:
        """The first piece of the answer arrived from the server now."""
        if self.first_token is None:
            self.first_token = time.monotonic() - self.started

    def request_dict(self, request: ProviderRequest) -> dict[str, Any]:
        """What identifies a model turn's request: :func:`request_identity`."""
        return request_identity(request)

    # ------------------------------------------------------------------ the end

    def finish(self, reply: Reply) -> bool:
        """Commit the call (``True`` once committed); never raises for the log's own trouble
        (it warns once)."""
        with self._lock:
            if self.done:
                return False
            self.done = True
        try:
            reply = self._counted(reply)
            row, turns, search = self._row(reply)
        except Exception:  # a value the log cannot represent must not fail the call
            import logging

            logging.getLogger("ollm_lite.call_log").debug("call not logged", exc_info=True)
            return False
        return self.logger.file.write(row, turns, search, self.log_wait)

    def drop_turn(self, record: dict[str, Any]) -> None:
        """Forget a turn whose request was never sent (a budget refused it, or its wait for
        the rate limit ended): it is no model turn."""
        with self._lock:
            self.turns = [turn for turn in self.turns if turn is not record]

    def write_budget(self) -> float:
        """Seconds a read of the log may wait for this call: what its allowance (its
        deadline's rest, at most 5 s for the whole call) has left."""
        return self.log_wait.left()

    def _counted(self, reply: Reply) -> Reply:
        """``reply`` whose usage counts every turn the server answered without usage (by
        the provider's tokenizer, else estimated: see :mod:`._usage`); each such turn's
        answer carries its figure."""
        estimated = False
        total: Usage | None = None
        for turn in self.turns:
            live = turn.pop("live", None)
            answer = turn["answer"]
            if turn["cached"] or live is None or answer.get("finish") == "error":
                total = add_usage(total, usage_from_dict(answer.get("usage")))
                continue
            adapter, request = live
            usage = counted_usage(
                request,
                answer_result(answer),
                adapter,
                deadline=self.deadline,
                tokenizer=answer.get("finish") != "cancelled" and reply.finish != "cancelled",
            )
            if usage is not None and usage.extra.get(ESTIMATED):
                estimated = True
                answer["usage"] = usage_dict(usage)
            total = add_usage(total, usage)
        if not estimated:
            return reply
        return replace(reply, usage=total)

    def _row(self, reply: Reply) -> tuple[dict[str, Any], list[tuple[Any, ...]], tuple[str, str]]:
        text_of, json_of = self.mask.text, self.mask.json
        ended = time.monotonic()
        started = datetime.fromtimestamp(self.started_ns / 1e9, UTC)
        call_id = new_id(self.started_ns)
        error = reply.error
        cached = bool(self.turns) and all(t["cached"] for t in self.turns)
        usage = reply.usage
        text = text_of(reply.text or "")
        row: dict[str, Any] = {
            "id": call_id,
            "started": started.isoformat(),
            "started_ts": self.started_ns / 1e9,
            "day": started.strftime("%Y-%m-%d"),
            "seconds": ended - self.started,
            "first_token_seconds": self.first_token,
            "source": self.source,
            "script": os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "",
            "provider": self.logger.provider_name,
            "host": self.logger.host,
            "model": self.model,
            "messages": json_of(self.messages),
            "options": json_of(self.options),
            "text": text,
            "thinking": text_of(reply.thinking) if reply.thinking else reply.thinking,
            "tool_calls": json_of([tool_call_dict(c) for c in reply.tool_calls]),
            "tool_results": json_of([result_to_dict(r) for r in reply.tool_results]),
            "finish": reply.finish,
            "error_code": getattr(error, "code", None) if error is not None else None,
            "error_message": text_of(str(getattr(error, "message", error)))
            if error is not None
            else None,
            "usage": json_of(usage_dict(usage)) if usage is not None else None,
            "prompt_tokens": usage.prompt_tokens if usage is not None else None,
            "completion_tokens": usage.completion_tokens if usage is not None else None,
            "cached": int(cached),
            "session_id": self.session_id,
            "custom_id": text_of(self.custom_id) if self.custom_id else self.custom_id,
            "cost": reply.cost,
        }
        turns = []
        for number, turn in enumerate(self.turns, 1):
            answer = turn["answer"]
            ok = answer.get("finish") in _GOOD_FINISH and "error" not in answer
            key = (
                turn["key"] if turn["key"] is not None else cache_key(self.logger, turn["request"])
            )
            turns.append(
                (
                    call_id,
                    number,
                    json_of(turn["request"]),
                    json_of(answer),
                    key,
                    int(ok and not turn["cached"]),
                    int(turn["cached"]),
                )
            )
        prompt = "\n".join(map(text_of, _texts(self.messages)))
        return row, turns, (prompt, text)


def _with_system(system: str | None, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, *messages] if system else messages


def _options(call: Call) -> dict[str, Any]:
    """The call's effective generation options (never its headers)."""
    settings = call.settings
    options = generation_dict(call.loop.get("options"))
    for name in ("think", "keep_alive", "timeout"):
        value = getattr(settings, name)
        if value is not None:
            options[name] = value
    if settings.tool_choice != "auto":
        options["tool_choice"] = settings.tool_choice
    return options


def _texts(messages: list[dict[str, Any]]) -> Iterator[str]:
    for message in messages:
        content = message.get("content")
        if isinstance(content, str):
            yield content
        elif isinstance(content, list):
            yield from (p["text"] for p in content if isinstance(p, dict) and "text" in p)
