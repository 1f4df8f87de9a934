"""The ``ollm-lite`` command line (also ``python -m ollm_lite``).

::

    ollm-lite [GLOBAL FLAGS] chat [PROMPT] [--system S] [--temperature T] [--max-tokens N]
                                  [--json] [--no-stream] [--show-thinking]
    ollm-lite models list | show NAME | pull NAME | rm NAME   [--json]
    ollm-lite health [--all] [--json]
    ollm-lite config show [--json] | validate
    ollm-lite batch run INPUT.jsonl -o OUTPUT.jsonl | make PROMPTS -o INPUT.jsonl  (_batch_cli)

Global flags (before or after the subcommand): ``--provider``, ``--host``, ``--api-key``,
``--model``, ``--config``, ``--timeout``, ``--debug``.

Exit codes: 0 success; 1 a runtime error, reported as one line on stderr (a traceback only with
``--debug``); 2 a usage error; 130 interrupted (Ctrl-C; a streamed partial answer stays on
stdout). The answer goes to stdout; everything else (thinking, warnings, errors) to stderr.
An empty (or blank) answer is an error: ``chat`` exits 1 with ``LLM_BAD_RESPONSE``, in every
output mode, so ``answer=$(ollm-lite chat ...) || ...`` never goes on with nothing. An answer is
at most ``--max-tokens`` long (default :data:`DEFAULT_MAX_TOKENS`), so a model that runs away
stops there instead of at the server's own limit.

Providers are imported only when a command needs one, so ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import logging
import os
import re
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from . import __version__, _mcp_cli
from ._batch_cli import add_batch_commands
from .config import (
    PROVIDER_ALIASES,
    PROVIDERS,
    Config,
    _url_problem,
    canonical_provider,
    config_path,
    load_config,
    redacted,
    validate_config,
)
from .errors import Cancelled, OllmError

if TYPE_CHECKING:
    from .providers.base import ProviderAdapter
    from .registry import ProviderRegistry
    from .types import ChatEvent, HealthStatus, ModelInfo

__all__ = ["build_parser", "main"]

logger = logging.getLogger(__name__)

PROG = "ollm-lite"
#: ``chat``'s answer-length limit without ``--max-tokens``: room for a long answer, a stop for
#: a runaway one.
DEFAULT_MAX_TOKENS = 1024
EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
_DIM, _RESET = "\x1b[2m", "\x1b[0m"


class _UsageError(Exception):
    """A usage problem found after parsing (exit 2)."""


# --------------------------------------------------------------------------- parser


def _provider_name(text: str) -> str:
    if canonical_provider(text)[0] not in PROVIDERS:
        raise argparse.ArgumentTypeError(
            f"unknown provider {text!r} (choose from {', '.join(PROVIDERS)}; aliases: "
            f"{', '.join(PROVIDER_ALIASES)})"
        )
    return text


def _url(text: str) -> str:
    problem = _url_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return text


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 10:
        raise argparse.ArgumentTypeError(f"must be between 0 and 10, got {text!r}")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {text!r}")
    return value


def _global_flags() -> argparse.ArgumentParser:
    # SUPPRESS keeps a flag given before the subcommand from being reset by the subparser's
    # default when the same flag is also accepted after it.
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("global options")
    add = group.add_argument
    add(
        "--provider",
        type=_provider_name,
        default=argparse.SUPPRESS,
        help="provider: local (Ollama, default), vllm, openai-compatible, gemini, or an alias "
        "(ollama, lmstudio, localai, kobold, llamacpp)",
    )
    add(
        "--host",
        type=_url,
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
        type=_positive_float,
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


def build_parser() -> argparse.ArgumentParser:
    """The ``ollm-lite`` argument parser (global flags accepted before or after commands)."""
    flags = _global_flags()
    parser = argparse.ArgumentParser(
        prog=PROG,
        parents=[flags],
        description="Chat with local and hosted LLM servers: Ollama, vLLM, OpenAI-compatible "
        "servers (LM Studio, llama.cpp, LocalAI, KoboldCpp) and Gemini.",
        epilog="exit codes: 0 ok, 1 error (one line on stderr; an empty answer is one), "
        "2 usage, 130 interrupted",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    chat = commands.add_parser(
        "chat", parents=[flags], help="stream an answer to stdout",
        description="Stream the answer to PROMPT to stdout. Without PROMPT (or with -) the "
        "prompt is read from stdin. Ctrl-C stops the answer (exit 130).",
    )  # fmt: skip
    chat.add_argument("prompt", nargs="?", metavar="PROMPT", help="the prompt, or - for stdin")
    chat.add_argument("--system", metavar="TEXT", help="system prompt")
    chat.add_argument("--temperature", type=_temperature, metavar="T")
    chat.add_argument(
        "--max-tokens",
        type=_positive_int,
        default=DEFAULT_MAX_TOKENS,
        metavar="N",
        help=f"longest answer in tokens (default {DEFAULT_MAX_TOKENS})",
    )
    chat.add_argument(
        "--json", action="store_true", help="one JSON object per event on stdout (for scripts)"
    )
    chat.add_argument("--no-stream", action="store_true", help="print the answer when complete")
    chat.add_argument(
        "--show-thinking", action="store_true", help="show the model's thinking (dimmed, stderr)"
    )
    chat.add_argument(
        "--tools", metavar="NAME[,NAME...]", type=_mcp_cli.parse_names, default=[],
        help="let the model use the tools of these MCP servers ([mcp.servers.NAME])",
    )  # fmt: skip
    chat.set_defaults(handler=_cmd_chat, usage_parser=chat)

    models = commands.add_parser("models", parents=[flags], help="list, show, pull, remove")
    model_commands = models.add_subparsers(dest="models_command", metavar="ACTION")
    models.set_defaults(handler=_missing(models), usage_parser=models)
    for name, helptext, handler in (
        ("list", "the models on the server (a table)", _cmd_models_list),
        ("show", "details of one model", _cmd_models_show),
        ("pull", "download a model (Ollama)", _cmd_models_pull),
        ("rm", "delete a model (Ollama)", _cmd_models_rm),
    ):
        sub = model_commands.add_parser(name, parents=[flags], help=helptext)
        if name != "list":
            sub.add_argument("name", metavar="NAME")
        if name in ("list", "show", "pull"):
            sub.add_argument("--json", action="store_true", help="JSON output")
        sub.set_defaults(handler=handler, usage_parser=sub)

    health = commands.add_parser("health", parents=[flags], help="check every configured provider")
    health.add_argument("--all", action="store_true", help="check every built-in provider")
    health.add_argument("--json", action="store_true", help="JSON output")
    health.set_defaults(handler=_cmd_health, usage_parser=health)

    config = commands.add_parser("config", parents=[flags], help="show or validate the config")
    config_commands = config.add_subparsers(dest="config_command", metavar="ACTION")
    config.set_defaults(handler=_missing(config), usage_parser=config)
    show = config_commands.add_parser(
        "show", parents=[flags], help="the merged configuration (keys redacted)"
    )
    show.add_argument("--json", action="store_true", help="JSON output")
    show.set_defaults(handler=_cmd_config_show, usage_parser=show)
    validate = config_commands.add_parser(
        "validate", parents=[flags], help="report every problem in the configuration"
    )
    validate.set_defaults(handler=_cmd_config_validate, usage_parser=validate)

    _mcp_cli.add_mcp_parser(commands, flags, _missing, _cmd_mcp_list)
    batch = add_batch_commands(commands, flags, _global_flags, _url)
    batch.set_defaults(handler=_missing(batch), usage_parser=batch)
    return parser


def _missing(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace, _Context], int]:
    def handler(args: argparse.Namespace, ctx: _Context) -> int:
        parser.print_usage(sys.stderr)
        raise _UsageError(f"{parser.prog}: choose an action")

    return handler


# --------------------------------------------------------------------------- context


class _Context:
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
        from ._connect import require_valid

        require_valid(self.config)

    @property
    def registry(self) -> ProviderRegistry:
        if self._registry is None:
            from .registry import default_registry

            self._registry = default_registry(self.config)
        return self._registry

    def provider(self, name: str | None = None) -> ProviderAdapter:
        return self.registry.require(name or self.config.provider)

    def say(self, text: str) -> None:
        """A line on stderr (status, warnings)."""
        self.err.write(text + "\n")
        self.err.flush()


# --------------------------------------------------------------------------- entry point


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI.

    Args:
        argv: Arguments without the program name (default: ``sys.argv[1:]``).

    Returns:
        The exit code: 0 ok, 1 runtime error, 2 usage error, 130 interrupted.
    """
    out, err = sys.stdout, sys.stderr
    for stream in (out, err):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:  # never die on an unencodable character in an answer
            with contextlib.suppress(ValueError, OSError):
                reconfigure(errors="replace")
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(argv)
        if unknown:  # reported with the usage of the command they were given to
            target: argparse.ArgumentParser = getattr(args, "usage_parser", parser)
            target.error(f"unrecognized arguments: {' '.join(unknown)}")
    except SystemExit as exc:  # argparse: --help/--version (0) or a usage error (2)
        return int(exc.code) if isinstance(exc.code, int) else EXIT_USAGE
    debug = bool(getattr(args, "debug", False))
    if debug:
        logging.basicConfig(
            level=logging.DEBUG, stream=err, format="%(asctime)s %(name)s %(message)s"
        )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(err)
        return EXIT_USAGE
    try:
        ctx = _Context(args, out, err)
        return int(handler(args, ctx))
    except _UsageError as exc:
        err.write(f"{PROG}: error: {exc}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.write(f"{PROG}: interrupted\n")
        return EXIT_INTERRUPTED
    except Cancelled:
        err.write(f"{PROG}: cancelled\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`| head`): stop quietly, and keep Python from complaining
        # about the unflushable stdout at exit.
        with contextlib.suppress(OSError, ValueError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, out.fileno())
        return EXIT_ERROR
    except OllmError as exc:
        if debug:
            traceback.print_exc(file=err)
        err.write(_error_line(exc.message, exc.code))
        return EXIT_ERROR
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            traceback.print_exc(file=err)
        hint = "" if debug else " (run with --debug for the traceback)"
        err.write(_error_line(f"unexpected {type(exc).__name__}: {exc}{hint}", "INTERNAL"))
        return EXIT_ERROR
    finally:
        with contextlib.suppress(Exception):
            out.flush()


def _error_line(message: str, code: str) -> str:
    flat = re.sub(r"\s*\n\s*", " ", message).strip()
    return f"{PROG}: error [{code}]: {flat}\n"


# --------------------------------------------------------------------------- cancellation


@contextlib.contextmanager
def _cancel_on_sigint(cancel: threading.Event) -> Iterator[None]:
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


# --------------------------------------------------------------------------- chat


def _read_prompt(args: argparse.Namespace, ctx: _Context) -> str:
    prompt: str | None = args.prompt
    if prompt is None or prompt == "-":
        stdin = sys.stdin
        if stdin is None:
            raise _UsageError("no PROMPT given and no stdin to read it from")
        if stdin.isatty():
            ctx.say("reading the prompt from stdin (finish with Ctrl-D)")
        prompt = stdin.read()
    if not prompt.strip():
        raise _UsageError("empty prompt: give PROMPT or pipe text on stdin")
    return prompt


def _chat_model(ctx: _Context, adapter: ProviderAdapter) -> str:
    """The configured model, else the server's only chat model (as ``connect()`` picks it)."""
    from ._connect import resolve_model

    return resolve_model(ctx.config.model, adapter)


class _Writer:
    """Streams answer text to stdout, remembering whether a line is left open."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.wrote = False
        self.at_line_start = True

    def text(self, value: str) -> None:
        if not value:
            return
        self.out.write(value)
        self.out.flush()
        self.wrote = True
        self.at_line_start = value.endswith("\n")

    def end(self) -> None:
        if self.wrote and not self.at_line_start:
            self.out.write("\n")
            self.out.flush()
            self.at_line_start = True


def _cmd_chat(args: argparse.Namespace, ctx: _Context) -> int:
    from .chat import ChatClient

    ctx.check_config()
    prompt = _read_prompt(args, ctx)
    adapter = ctx.provider()
    model = _chat_model(ctx, adapter)
    with _usage_on_unknown_server(), _mcp_cli.open_tools(args.tools, ctx.config) as tools:
        client = ChatClient(
            ctx.registry,
            model=model,
            context_limits=ctx.config.context_limits,
            tools=tools or None,
        )
        return _run_chat(args, ctx, client, prompt)


@contextlib.contextmanager
def _usage_on_unknown_server() -> Iterator[None]:
    try:
        yield
    except _mcp_cli.UnknownMcpServer as exc:
        raise _UsageError(exc.message) from exc


def _cmd_mcp_list(args: argparse.Namespace, ctx: _Context) -> int:
    with _usage_on_unknown_server():
        return _mcp_cli.list_tools(args.name, ctx.config, ctx.out)


def _run_chat(args: argparse.Namespace, ctx: _Context, client: Any, prompt: str) -> int:
    from .types import (
        ChatFinishEvent,
        ErrorEvent,
        ErrorInfo,
        GenerationOptions,
        TextEvent,
        ThinkingEvent,
        WarningEvent,
    )

    options = GenerationOptions(temperature=args.temperature, max_tokens=args.max_tokens)
    cancel = threading.Event()
    writer = _Writer(ctx.out)
    err_tty = _isatty(ctx.err)
    thinking_open = False
    text: list[str] = []
    thinking: list[str] = []
    error: ErrorInfo | None = None
    failure: BaseException | None = None
    reason = "error"
    streaming = not args.no_stream
    with _cancel_on_sigint(cancel):
        events = client.chat(prompt, system_prompt=args.system, options=options, cancel=cancel)
        try:
            for event in events:
                if args.json and streaming:
                    _emit_json(ctx.out, _event_json(event))
                if isinstance(event, TextEvent):
                    text.append(event.value)
                    if streaming and not args.json:
                        if thinking_open:
                            ctx.err.write("\n")
                            thinking_open = False
                        writer.text(event.value)
                elif isinstance(event, ThinkingEvent):
                    thinking.append(event.value)
                    if args.show_thinking and streaming and not args.json:
                        chunk = f"{_DIM}{event.value}{_RESET}" if err_tty else event.value
                        ctx.err.write(chunk)
                        ctx.err.flush()
                        thinking_open = True
                elif isinstance(event, WarningEvent):
                    if not args.json:
                        ctx.say(f"warning: {event.message}")
                elif isinstance(event, ErrorEvent):
                    error = event.error
                    failure = event.exception
                elif isinstance(event, ChatFinishEvent):
                    reason = event.reason
        except KeyboardInterrupt:  # a second Ctrl-C: keep the partial answer's line whole
            writer.end()
            raise
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
    if thinking_open:
        ctx.err.write("\n")
    if not streaming:
        if args.json:
            _emit_json(
                ctx.out,
                {
                    "type": "result",
                    "content": "".join(text),
                    "thinking": "".join(thinking) or None,
                    "reason": reason,
                    "error": _plain(error),
                },
            )
        else:
            if args.show_thinking and thinking:
                ctx.say("".join(thinking))
            writer.text("".join(text))
    writer.end()
    if reason == "cancelled" or cancel.is_set():
        ctx.say(f"{PROG}: cancelled")
        return EXIT_INTERRUPTED
    if error is not None:
        if getattr(args, "debug", False):
            _print_failure(ctx.err, failure)
        ctx.err.write(_error_line(error.message, error.code))
        return EXIT_ERROR
    if reason != "complete":
        ctx.err.write(_error_line(f"the chat ended with {reason}", "LLM_BAD_RESPONSE"))
        return EXIT_ERROR
    if not "".join(text).strip():
        ctx.err.write(_error_line("the model returned an empty answer", "LLM_BAD_RESPONSE"))
        return EXIT_ERROR
    return EXIT_OK


def _print_failure(err: TextIO, failure: BaseException | None) -> None:
    """The traceback behind an error event (``--debug``), or why there is none."""
    if failure is None:
        err.write("(no traceback: the error arrived as data from the server, not raised)\n")
    else:
        traceback.print_exception(failure, file=err)


def _plain(value: Any) -> Any:
    """Dataclasses (nested) as JSON-ready data."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {  # repr=False fields are internal (an ErrorEvent's exception)
            f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value) if f.repr
        }
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _event_json(event: ChatEvent) -> dict[str, Any]:
    data = _plain(event)
    return {"type": event.type, **data}


def _emit_json(out: TextIO, obj: Any) -> None:
    out.write(json.dumps(obj, ensure_ascii=False, default=_json_default) + "\n")
    out.flush()


def _json_default(value: Any) -> Any:
    """Dates and times as ISO 8601 (``2026-01-31T07:00:00+00:00``), anything else as text."""
    isoformat = getattr(value, "isoformat", None)
    return isoformat() if callable(isoformat) else str(value)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


# --------------------------------------------------------------------------- models


def _cmd_models_list(args: argparse.Namespace, ctx: _Context) -> int:
    from ._progress import human_bytes

    ctx.check_config()
    models = ctx.provider().list_models()
    if args.json:
        _emit_json(ctx.out, [_plain(m) for m in models])
        return EXIT_OK
    if not models:
        ctx.say(f"no models on {ctx.config.provider}")
        return EXIT_OK
    rows = [
        [
            m.name,
            human_bytes(m.size_bytes) if m.size_bytes is not None else "-",
            str(m.details.get("parameter_size") or "-"),
            str(m.details.get("quantization_level") or "-"),
            str(m.context_length) if m.context_length else "-",
            _when(m.modified_at),
        ]
        for m in models
    ]
    headers = ["NAME", "SIZE", "PARAMS", "QUANT", "CONTEXT", "MODIFIED"]
    ctx.out.write(_table(headers, rows))
    return EXIT_OK


def _when(stamp: str | None) -> str:
    if not stamp:
        return "-"
    # "2025-07-07T20:22:19.184789Z" -> "2025-07-07 20:22"
    match = re.match(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d)", stamp)
    return f"{match.group(1)} {match.group(2)}" if match else stamp


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
             for row in [headers, *rows]]  # fmt: skip
    return "\n".join(lines) + "\n"


def _cmd_models_show(args: argparse.Namespace, ctx: _Context) -> int:
    from ._progress import human_bytes

    ctx.check_config()
    info: ModelInfo = ctx.provider().show_model(args.name)
    if args.json:
        _emit_json(ctx.out, _plain(info))
        return EXIT_OK
    rows: list[tuple[str, str]] = [("name", info.name)]
    if info.size_bytes is not None:
        rows.append(("size", human_bytes(info.size_bytes)))
    if info.modified_at:
        rows.append(("modified", _when(info.modified_at)))
    if info.kind:
        rows.append(("kind", info.kind))
    if info.context_length:
        rows.append(("context length", str(info.context_length)))
    if info.capabilities:
        rows.append(("capabilities", ", ".join(info.capabilities)))
    for key, value in info.details.items():
        if isinstance(value, str | int | float) and not isinstance(value, bool):
            rows.append((key.replace("_", " "), str(value)))
        elif isinstance(value, list) and all(isinstance(v, str) for v in value):
            rows.append((key.replace("_", " "), ", ".join(value)))
    width = max(len(k) for k, _ in rows)
    ctx.out.write("".join(f"{k.ljust(width)}  {v}\n" for k, v in rows))
    return EXIT_OK


def _cmd_models_pull(args: argparse.Namespace, ctx: _Context) -> int:
    from ._progress import PullProgressPrinter
    from .types import PullProgress

    ctx.check_config()
    adapter = ctx.provider()
    cancel = threading.Event()
    printer = PullProgressPrinter(ctx.out, tty=_isatty(ctx.out))

    def on_progress(progress: PullProgress) -> None:
        if args.json:
            _emit_json(ctx.out, _plain(progress))
        else:
            printer(progress)

    with _cancel_on_sigint(cancel):
        try:
            adapter.pull_model(args.name, on_progress=on_progress, cancel=cancel)
        finally:
            printer.close()
    if cancel.is_set():
        raise Cancelled("the pull was cancelled")
    if not args.json:
        ctx.out.write(f"pulled {args.name}\n")
    return EXIT_OK


def _cmd_models_rm(args: argparse.Namespace, ctx: _Context) -> int:
    ctx.check_config()
    ctx.provider().delete_model(args.name)
    ctx.out.write(f"deleted {args.name}\n")
    return EXIT_OK


# --------------------------------------------------------------------------- health


def _cmd_health(args: argparse.Namespace, ctx: _Context) -> int:
    from concurrent.futures import ThreadPoolExecutor

    ctx.check_config()
    names = list(PROVIDERS) if args.all else _configured(ctx.config)

    def check(name: str) -> HealthStatus:
        from datetime import UTC, datetime

        from .types import ErrorInfo, HealthStatus

        try:
            return ctx.provider(name).health()
        except Exception as exc:  # a provider that cannot even be built is "fail"
            info = (
                exc.to_info()
                if isinstance(exc, OllmError)
                else ErrorInfo(f"{type(exc).__name__}: {exc}", "PROVIDER_NOT_FOUND")
            )
            return HealthStatus(
                ok=False,
                provider=name,
                base_url="-",
                checked_at=datetime.now(UTC),
                latency_ms=None,
                error=info,
            )

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        results = list(pool.map(check, names))
    if args.json:
        _emit_json(ctx.out, [_health_json(n, r) for n, r in zip(names, results, strict=True)])
    else:
        rows = [
            [
                name,
                "ok" if r.ok else "fail",
                f"{r.latency_ms:.0f} ms" if r.latency_ms is not None else "-",
                r.version or "-",
                r.base_url,
                "" if r.error is None else _one_line(f"{r.error.code}: {r.error.message}"),
            ]
            for name, r in zip(names, results, strict=True)
        ]
        ctx.out.write(_table(["PROVIDER", "STATUS", "LATENCY", "VERSION", "URL", "ERROR"], rows))
    return EXIT_OK if all(r.ok for r in results) else EXIT_ERROR


def _health_json(name: str, status: HealthStatus) -> dict[str, Any]:
    """One provider's health for ``--json``: latency to 0.1 ms, an ISO 8601 time stamp."""
    data: dict[str, Any] = {"name": name, **_plain(status)}
    if status.latency_ms is not None:
        data["latency_ms"] = round(status.latency_ms, 1)
    data["checked_at"] = status.checked_at.isoformat()
    return data


def _configured(config: Config) -> list[str]:
    """The selected provider first, then every other provider the configuration mentions."""
    names = [canonical_provider(config.provider)[0]]
    names += [n for n in PROVIDERS if n in config.providers and n not in names]
    return names


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --------------------------------------------------------------------------- config


def _cmd_config_show(args: argparse.Namespace, ctx: _Context) -> int:
    config = ctx.config
    data = redacted(config)
    if args.json:
        _emit_json(ctx.out, {"source": config.source, **data})
        return EXIT_OK
    file, _ = config_path(ctx.config_arg)
    lines = [f"# file: {config.source}" if config.source else f"# file: {file} (not found)"]
    lines.append("# precedence: flags > environment > file > defaults")

    def line(key: str, value: Any, path: str) -> str:
        origin = config.origins.get(path)
        text = f"{key} = {_toml_value(value)}"
        return f"{text}  # {origin}" if origin else text

    lines.append(line("provider", data["provider"], "provider"))
    if "model" in data:
        lines.append(line("model", data["model"], "model"))
    for name, values in data.get("providers", {}).items():
        lines += ["", f"[providers.{_toml_key(name)}]"]
        lines += [line(k, v, f"providers.{name}.{k}") for k, v in values.items()]
    if data.get("context_limits"):
        lines += ["", "[context_limits]"]
        lines += [
            line(_toml_key(k), v, f"context_limits.{k}") for k, v in data["context_limits"].items()
        ]
    ctx.out.write("\n".join(lines) + "\n")
    for issue in validate_config(config):
        ctx.say(f"warning: {issue}")
    return EXIT_OK


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _cmd_config_validate(args: argparse.Namespace, ctx: _Context) -> int:
    issues = validate_config(ctx.config)
    where = ctx.config.source or "no config file (defaults and environment)"
    if not issues:
        ctx.out.write(f"ok: {where}\n")
        return EXIT_OK
    ctx.out.write(f"{where}: {len(issues)} problem{'s' if len(issues) > 1 else ''}\n")
    ctx.out.write("".join(f"  {issue}\n" for issue in issues))
    return EXIT_ERROR
