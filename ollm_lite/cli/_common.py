"""What every ``ollm-lite`` command shares: exit codes, argument types, the global flags, the
per-command :class:`Context`, one-line errors, Ctrl-C handling and JSON/table output.

The command groups live in modules of their own (``_chat``, ``_models``, ``_config``,
``_mcp``, ``_batch``); :mod:`ollm_lite.cli` puts them together.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import re
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from ..config import (
    PROVIDER_ALIASES,
    PROVIDERS,
    Config,
    canonical_provider,
    load_config,
)
from ..config._check import url_problem as _url_problem
from . import _mcp as _mcp_cli
from ._terminal_text import printable

if TYPE_CHECKING:
    from ..providers.base import ProviderAdapter
    from ..registry import ProviderRegistry

__all__ = [
    "EXIT_ERROR",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "PROG",
    "Context",
    "UsageError",
    "cancel_on_sigint",
    "emit_json",
    "error_line",
    "global_flags",
    "isatty",
    "missing",
    "plain",
    "positive_float",
    "positive_int_arg",
    "provider_name",
    "table",
    "temperature",
    "url_text",
    "usage_on_unknown_server",
]

PROG = "ollm-lite"
_N = TypeVar("_N", int, float)
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A usage problem found after parsing (exit 2)."""


# --------------------------------------------------------------------------- arguments


def provider_name(text: str) -> str:
    """A provider name or alias (argparse ``type=``)."""
    if canonical_provider(text)[0] not in PROVIDERS:
        raise argparse.ArgumentTypeError(
            f"unknown provider {text!r} (choose from {', '.join(PROVIDERS)}; aliases: "
            f"{', '.join(PROVIDER_ALIASES)})"
        )
    return text


def url_text(text: str) -> str:
    """A server's base URL (argparse ``type=``)."""
    problem = _url_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def positive_float(text: str) -> float:
    """A finite number above 0 (argparse ``type=``)."""
    value = _number(text, float, "a number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def temperature(text: str) -> float:
    """A sampling temperature, 0 to 10 (argparse ``type=``)."""
    value = _number(text, float, "a number")
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"must be between 0 and 10, got {text!r}")
    return value


def positive_int_arg(text: str) -> int:
    """A whole number of at least 1 (argparse ``type=``)."""
    value = _number(text, int, "an integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def _number(text: str, kind: Callable[[str], _N], what: str) -> _N:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not {what}: {text!r}") from None


def global_flags() -> argparse.ArgumentParser:
    """A parent parser holding the flags every command accepts."""
    # SUPPRESS keeps a flag given before the subcommand from being reset by the subparser's
    # default when the same flag is also accepted after it.
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("global options")
    add = group.add_argument
    add(
        "--provider",
        type=provider_name,
        default=argparse.SUPPRESS,
        help="provider: local (Ollama, default), vllm, openai-compatible, gemini, anthropic, "
        "or an alias (ollama, lmstudio, localai, kobold, llamacpp, claude)",
    )
    add(
        "--host",
        type=url_text,
        default=argparse.SUPPRESS,
        metavar="URL",
        help="base URL of the selected provider's server",
    )
    add(
        "--api-key",
        default=argparse.SUPPRESS,
        metavar="KEY",
        help="API key for the selected provider (prefer the environment variables)",
    )
    add("--model", default=argparse.SUPPRESS, help="model name (default: config / $OLLM_MODEL)")
    add(
        "--config",
        default=argparse.SUPPRESS,
        metavar="PATH",
        help="config file (default: $OLLM_CONFIG, else ~/.config/ollm/config.toml)",
    )
    add(
        "--timeout",
        type=positive_float,
        default=argparse.SUPPRESS,
        metavar="SECONDS",
        help="longest wait for the server between bytes",
    )
    add(
        "--debug",
        action="store_true",
        default=argparse.SUPPRESS,
        help="log requests to stderr and show tracebacks",
    )
    return flags  # fmt: skip


def missing(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace, Context], int]:
    """The handler of a command group given no action: its usage, then exit 2."""

    def handler(args: argparse.Namespace, ctx: Context) -> int:
        parser.print_usage(sys.stderr)
        raise UsageError(f"{parser.prog}: choose an action")

    return handler


# --------------------------------------------------------------------------- context


class Context:
    """What every command needs: the configuration, the registry, the output streams."""

    def __init__(self, args: argparse.Namespace, out: TextIO, err: TextIO) -> None:
        self.args = args
        self.out = out
        self.err = err
        self.debug = bool(getattr(args, "debug", False))
        overrides = {
            "provider": getattr(args, "provider", None),
            "model": getattr(args, "model", None),
            "base_url": getattr(args, "host", None),
            "api_key": getattr(args, "api_key", None),
            "timeout": getattr(args, "timeout", None),
        }
        self.config_arg: str | None = getattr(args, "config", None)
        self.config: Config = load_config(self.config_arg, overrides=overrides)
        self._registry: ProviderRegistry | None = None

    def check_config(self) -> None:
        """Stop with the first problem (and a pointer to ``config validate``) if any."""
        from ..config._connect import require_valid

        require_valid(self.config)

    @property
    def registry(self) -> ProviderRegistry:
        """The providers of the configuration (built on first use)."""
        if self._registry is None:
            from ..registry import default_registry

            self._registry = default_registry(self.config)
        return self._registry

    def provider(self, name: str | None = None) -> ProviderAdapter:
        """The named provider, else the configured one."""
        return self.registry.require(name or self.config.provider)

    def say(self, text: str) -> None:
        """A line on stderr (status, warnings)."""
        self.err.write(text + "\n")
        self.err.flush()


@contextlib.contextmanager
def usage_on_unknown_server() -> Iterator[None]:
    """An MCP server name without a ``[mcp.servers.NAME]`` table as a usage error."""
    try:
        yield
    except _mcp_cli.UnknownMcpServer as exc:
        raise UsageError(exc.message) from exc


# --------------------------------------------------------------------------- output


def error_line(message: str, code: str) -> str:
    """``ollm-lite: error [CODE]: message`` on one line, without control characters (the
    message may quote a server)."""
    flat = printable(re.sub(r"\s*\n\s*", " ", message).strip())
    return f"{PROG}: error [{code}]: {flat}\n"


@contextlib.contextmanager
def cancel_on_sigint(cancel: threading.Event) -> Iterator[None]:
    """First Ctrl-C sets ``cancel`` (a clean stop); a second one raises KeyboardInterrupt.

    A process started with SIGINT ignored (``nohup``, a background job without job control)
    keeps ignoring it: whoever started it chose so, and a terminal's Ctrl-C is not meant for it.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        yield
        return

    def on_sigint(signum: int, frame: Any) -> None:
        if cancel.is_set():
            raise KeyboardInterrupt
        cancel.set()

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        # None: a handler installed from C; the default is the closest we can restore.
        signal.signal(signal.SIGINT, signal.default_int_handler if previous is None else previous)


def plain(value: Any) -> Any:
    """Dataclasses (nested) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {  # repr=False fields are internal (an ErrorEvent's exception)
            f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr
        }
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def emit_json(out: TextIO, obj: Any) -> None:
    """One JSON document on one line of ``out``."""
    out.write(json.dumps(obj, ensure_ascii=False, default=_json_default) + "\n")
    out.flush()


def _json_default(value: Any) -> Any:
    """Dates and times as ISO 8601 (``2026-01-31T07:00:00+00:00``), anything else as text."""
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else str(value)


def isatty(stream: TextIO) -> bool:
    """Whether ``stream`` is a terminal (False for anything that cannot say)."""
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def table(headers: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns, two spaces apart, under ``headers``; cells (model names, server
    versions and errors) without line breaks or control characters."""
    rows = [[" ".join(printable(cell).split()) for cell in row] for row in rows]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in [headers, *rows]]  # fmt: skip
    return "\n".join(lines) + "\n"
