"""Token counting and context limits: will a request fit the model's context window?

:class:`TokenCounter` counts a request with the provider's own tokenizer where the provider has
one (``capabilities.token_counting``), else estimates ceil(characters / 4) over the system
prompt, the messages (text and tool calls) and the tool schemas. The model's limit comes from
explicit configuration, else from the provider (``context_length(model)``), else 4096.

The chat runtime checks every request before sending it: a :class:`TokenCheck` with
``warning`` (>= 90 % of the limit) becomes a ``WarningEvent("TOKEN_LIMIT_WARNING")``; one with
``exceeded`` (over the limit) stops the chat with ``TOKEN_LIMIT_EXCEEDED`` and sends nothing.

:meth:`TokenCounter.last_lines_that_fit` goes the other way: given lines of text (a log, a
transcript) and how a request is made from them, it keeps the most recent lines whose request
still fits the window with room left for the answer.

Invariants: counting never raises for a provider's failure (it falls back to the estimate);
the count of any request is a positive integer; the limit is always a positive integer.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from ._cancel_link import past_deadline
from .errors import ConfigError
from .providers.base import ProviderAdapter, approx_token_count, call_with_cancel
from .types import ProviderRequest

__all__ = ["FittedLines", "TokenCheck", "TokenCounter", "estimate_tokens"]

logger = logging.getLogger(__name__)


def estimate_tokens(text: str) -> int:
    """The fallback estimate for a text: ceil(len(text) / 4).

    Args:
        text: Any text.

    Returns:
        The estimated number of tokens (0 for the empty text).
    """
    return math.ceil(len(text) / 4)


@dataclass(frozen=True, slots=True)
class TokenCheck:
    """A request's size against its model's context window."""

    tokens: int
    """Tokens the request uses (counted or estimated)."""
    limit: int
    """The model's context window in tokens."""
    exact: bool
    """``True`` when the provider's tokenizer counted; ``False`` for the estimate."""

    @property
    def ratio(self) -> float:
        """``tokens / limit``."""
        return self.tokens / self.limit if self.limit > 0 else math.inf

    @property
    def warning(self) -> bool:
        """At least 90 % of the window is used (``ratio >= 0.9``)."""
        return self.ratio >= TokenCounter.WARNING_RATIO

    @property
    def exceeded(self) -> bool:
        """The request does not fit (``tokens > limit``)."""
        return self.tokens > self.limit


@dataclass(frozen=True, slots=True)
class FittedLines:
    """What :meth:`TokenCounter.last_lines_that_fit` kept."""

    text: str
    """The kept lines joined as they were given (``""`` when none fits)."""
    kept: int
    """How many of the last lines were kept."""
    total: int
    """How many lines were given."""
    check: TokenCheck | None
    """The size of the request made from the kept lines (``None`` when none was kept)."""

    @property
    def dropped(self) -> int:
        """How many of the first lines were left out."""
        return self.total - self.kept


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


class TokenCounter:
    """Counts requests and knows each model's context window.

    Thread-safe: one counter may serve several chats.
    """

    WARNING_RATIO: ClassVar[float] = 0.9
    DEFAULT_LIMIT: ClassVar[int] = 4096

    def __init__(
        self,
        provider: ProviderAdapter,
        *,
        context_limits: Mapping[str, int] | None = None,
        default_limit: int = DEFAULT_LIMIT,
    ) -> None:
        """Count for ``provider``.

        Args:
            provider: The provider requests go to (its tokenizer and context lengths are used).
            context_limits: Explicit context windows by model name; they win over the provider.
            default_limit: The window when neither the configuration nor the provider says.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when a limit is not a positive integer.
        """
        limits = dict(context_limits or {})
        bad = {model: n for model, n in limits.items() if not _positive_int(n)}
        if bad:
            raise ConfigError(
                f"context limits must be positive integers: {bad!r}",
                details={"context_limits": {k: repr(v) for k, v in bad.items()}},
            )
        if not _positive_int(default_limit):
            raise ConfigError(f"default_limit must be a positive integer, not {default_limit!r}")
        self.provider = provider
        self.context_limits = limits
        self.default_limit = default_limit
        self._cache: dict[str, int | None] = {}
        self._lock = threading.Lock()

    def count(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> tuple[int, bool]:
        """Tokens ``request`` uses.

        The provider's ``count_tokens`` when its capabilities say it has a tokenizer; the
        estimate (ceil(characters / 4), at least 1) when it has none, fails, or answers
        something other than a positive integer (no real request is zero tokens long).
        ``cancel`` is passed to a provider whose ``count_tokens`` takes it: setting it
        interrupts the call (the estimate is used then).

        Returns:
            ``(tokens, exact)``; ``exact`` is ``True`` when the provider counted.
        """
        capabilities = getattr(self.provider, "capabilities", None)  # a minimal custom adapter
        if getattr(capabilities, "token_counting", False):
            try:
                counted = call_with_cancel(self.provider, "count_tokens", request, cancel=cancel)
            except Exception as exc:  # OllmError mostly; a tokenizer failing must not stop a chat
                logger.debug(
                    "%s: token counting failed (%s); using the estimate",
                    self.provider.name,
                    getattr(exc, "code", type(exc).__name__),
                )
            else:
                if _positive_int(counted):
                    return counted, True
                logger.debug("%s: token count %r ignored", self.provider.name, counted)
        return max(1, approx_token_count(request)), False

    def limit(self, model: str, *, cancel: threading.Event | None = None) -> int:
        """The context window of ``model`` in tokens.

        Explicit ``context_limits`` first, then ``provider.context_length(model)`` (asked once
        per model; a failure or a cancelled call is ignored and asked again next time), then
        ``default_limit``. ``cancel`` is passed to a provider whose ``context_length`` takes it.
        """
        explicit = self.context_limits.get(model)
        if explicit is not None:
            return explicit
        with self._lock:
            known = model in self._cache
            cached = self._cache.get(model)
        if not known:
            cached = self._ask_provider(model, cancel)
        return cached if cached is not None else self.default_limit

    def _ask_provider(self, model: str, cancel: threading.Event | None) -> int | None:
        try:
            length = call_with_cancel(self.provider, "context_length", model, cancel=cancel)
        except Exception as exc:  # unreachable server, unsupported: fall back, retry later
            logger.debug(
                "%s: context length of %s unknown (%s)",
                self.provider.name,
                model,
                getattr(exc, "code", type(exc).__name__),
            )
            return None
        value = length if _positive_int(length) else None
        if cancel is not None and (cancel.is_set() or past_deadline(cancel)):
            return value  # perhaps cut short (cancelled, or the call's deadline): not remembered
        with self._lock:
            self._cache[model] = value
        return value

    def last_lines_that_fit(
        self,
        lines: Sequence[str],
        make_request: Callable[[str], ProviderRequest],
        *,
        reserve: int = 0,
    ) -> FittedLines:
        """The most recent ``lines`` whose request fits the window with ``reserve`` to spare.

        Binary search over how many of the last lines to keep (about log2(len(lines))
        counts, each one call of the provider's tokenizer where it has one): the result is
        the longest tail whose request counts at most ``limit - reserve`` tokens.

        Args:
            lines: The lines, oldest first, each with its line ending if it had one.
            make_request: Builds the request that would be sent for a text (the joined
                lines): system prompt, instructions and all.
            reserve: Tokens to leave for the answer (typically its ``max_tokens``).

        Returns:
            A :class:`FittedLines`; ``kept`` is 0 when not even the last line fits.

        Raises:
            ConfigError: ``CONFIG_INVALID`` when ``reserve`` is negative or not an integer.
        """
        if not isinstance(reserve, int) or isinstance(reserve, bool) or reserve < 0:
            raise ConfigError(f"reserve must be a non-negative integer, not {reserve!r}")
        lines = list(lines)

        def fits(kept: int) -> TokenCheck | None:
            check = self.check(make_request("".join(lines[len(lines) - kept :])))
            return check if check.tokens + reserve <= check.limit else None

        best: tuple[int, TokenCheck | None] = (0, None)
        low, high = 1, len(lines)
        while low <= high:
            middle = (low + high) // 2
            check = fits(middle)
            if check is None:
                high = middle - 1
            else:
                best = (middle, check)
                low = middle + 1
        kept, check = best
        text = "".join(lines[len(lines) - kept :]) if kept else ""
        return FittedLines(text=text, kept=kept, total=len(lines), check=check)

    def check(
        self, request: ProviderRequest, *, cancel: threading.Event | None = None
    ) -> TokenCheck:
        """Count ``request`` and compare it with its model's window.

        ``cancel`` interrupts the provider calls this may make (see :meth:`count`).

        Returns:
            A :class:`TokenCheck`; ``warning`` and ``exceeded`` say what the runtime must do.
        """
        tokens, exact = self.count(request, cancel=cancel)
        limit = self.limit(request.model, cancel=cancel)
        check = TokenCheck(tokens=tokens, limit=limit, exact=exact)
        logger.debug(
            "%s/%s: %d of %d tokens (%s)",
            self.provider.name,
            request.model,
            check.tokens,
            check.limit,
            "counted" if exact else "estimated",
        )
        return check
