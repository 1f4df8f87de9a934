"""The ``ollm-lite`` command line (also ``python -m ollm_lite``).

::

    ollm-lite [GLOBAL FLAGS] chat [PROMPT] [--system S] [--temperature T] [--max-tokens N]
                                  [--json] [--no-stream] [--show-thinking]
    ollm-lite models list | show NAME | pull NAME | rm NAME   [--json]
    ollm-lite health [--all] [--json]
    ollm-lite config show [--json] | validate
    ollm-lite batch run INPUT.jsonl -o OUTPUT.jsonl | make PROMPTS -o INPUT.jsonl  (_batch)
    ollm-lite logs [list] | show ID | stats | prune | path | on | off  (_logs)
    ollm-lite budget [--json]                                        (_budget)

Global flags (before or after the subcommand): ``--provider``, ``--host``, ``--api-key``,
``--model``, ``--config``, ``--timeout``, ``--debug``.

Exit codes: 0 success; 1 a runtime error, reported as one line on stderr (a traceback only with
``--debug``); 2 a usage error; 130 interrupted (Ctrl-C; a streamed partial answer stays on
stdout). The answer goes to stdout; everything else (thinking, warnings, errors) to stderr.
An empty (or blank) answer is an error: ``chat`` exits 1 with ``LLM_BAD_RESPONSE``, in every
output mode, so ``answer=$(ollm-lite chat ...) || ...`` never goes on with nothing. An answer is
at most ``--max-tokens`` long (default 1024), so a
model that runs away stops there instead of at the server's own limit.

Providers are imported only when a command needs one, so ``--help`` stays fast.

Each command group (chat, models, config and health, mcp, batch) lives in a module of its own
in this package, beside what they share; this module puts the parser together and turns what
a command raises into an exit code.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import TextIO

from .. import __version__
from ..errors import Cancelled, OllmError
from . import _mcp as _mcp_cli
from ._batch import add_batch_commands
from ._budget import add_budget_parser
from ._chat import add_chat_parser
from ._common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    PROG,
    Context,
    UsageError,
    error_line,
    global_flags,
    missing,
    url_text,
    usage_on_unknown_server,
)
from ._config import add_config_parser, add_health_parser
from ._logs import add_logs_parser
from ._models import add_models_parser
from ._terminal_text import PrintableFormatter, printable

__all__ = ["build_parser", "main"]

logger = logging.getLogger(__name__)

Handler = Callable[[argparse.Namespace, Context], int]


def build_parser() -> argparse.ArgumentParser:
    """The ``ollm-lite`` argument parser (global flags accepted before or after commands)."""
    flags = global_flags()
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
    add_chat_parser(commands, flags)
    add_models_parser(commands, flags)
    add_health_parser(commands, flags)
    add_config_parser(commands, flags)
    _mcp_cli.add_mcp_parser(
        commands, flags, missing, _cmd_mcp_list, _cmd_mcp_login, _cmd_mcp_logout
    )
    add_logs_parser(commands, flags)
    add_budget_parser(commands, flags)
    batch = add_batch_commands(commands, flags, global_flags, url_text)
    batch.set_defaults(handler=missing(batch), usage_parser=batch)
    return parser


def _cmd_mcp_list(args: argparse.Namespace, ctx: Context) -> int:
    with usage_on_unknown_server():
        return _mcp_cli.list_tools(args.name, ctx.config, ctx.out)


def _cmd_mcp_login(args: argparse.Namespace, ctx: Context) -> int:
    with usage_on_unknown_server():
        return _mcp_cli.login(args.name, ctx.config, ctx.err)


def _cmd_mcp_logout(args: argparse.Namespace, ctx: Context) -> int:
    with usage_on_unknown_server():
        return _mcp_cli.logout(args.name, ctx.config, ctx.err)


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
    if getattr(args, "debug", False):
        # Records quote servers (an MCP server's stderr): printed without control characters.
        to_err = logging.StreamHandler(err)
        to_err.setFormatter(PrintableFormatter("%(asctime)s %(name)s %(message)s"))
        logging.basicConfig(level=logging.DEBUG, handlers=[to_err])
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help(err)
        return EXIT_USAGE
    return _run(handler, args, out, err)


def _run(handler: Handler, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run one command; what it raises becomes one line on stderr and an exit code."""
    debug = bool(getattr(args, "debug", False))
    try:
        ctx = Context(args, out, err)
        return int(handler(args, ctx))
    except UsageError as exc:
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
            err.write(printable(traceback.format_exc()))
        err.write(error_line(exc.message, exc.code))
        return EXIT_ERROR
    except Exception as exc:  # a bug: still one line unless --debug
        if debug:
            err.write(printable(traceback.format_exc()))
        hint = "" if debug else " (run with --debug for the traceback)"
        err.write(error_line(f"unexpected {type(exc).__name__}: {exc}{hint}", "INTERNAL"))
        return EXIT_ERROR
    finally:
        with contextlib.suppress(Exception):
            out.flush()
