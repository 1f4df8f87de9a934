"""``ollm-lite batch run`` and ``ollm-lite batch make``: batch files from the command line.

::

    ollm-lite batch make PROMPTS.txt|PROMPTS.csv -o INPUT.jsonl [--column NAME]
                         [--id-column NAME] [--model M] [--system S]
    ollm-lite batch run INPUT.jsonl -o OUTPUT.jsonl [--concurrency N] [--per-host N]
                                                    [--host URL]... [--retry-failed]

``run`` resumes whenever OUTPUT exists; ``--host`` repeated names a fleet (one server per
URL, same provider kind and model). Progress goes to stderr: a redrawn bar on a terminal,
a plain line every few seconds otherwise (cron logs). Exit codes: 0 every line answered; 1
the output holds failed lines once the run ends, this run's or kept from an earlier one (all
written first; stderr says how many and that ``--retry-failed`` reruns them); 2 an invalid
input file or usage (nothing sent); 130 interrupted (the first Ctrl-C lets requests in flight
finish, a second cancels them).
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    PROG,
    error_line,
    positive_int_arg,
)
from ._terminal_text import PrintableFormatter, printable

if TYPE_CHECKING:
    from ..providers.base import ProviderAdapter

__all__ = ["add_batch_commands"]

Handler = Callable[[argparse.Namespace, Any], int]


def add_batch_commands(
    commands: Any,
    flags: argparse.ArgumentParser,
    new_flags: Callable[[], argparse.ArgumentParser],
    url: Callable[[str], str],
) -> argparse.ArgumentParser:
    """Add ``batch run`` / ``batch make`` to the CLI's subcommands.

    Args:
        commands: The main parser's subparsers action.
        flags: The global flags parent parser.
        new_flags: Builds a fresh copy of it (``run`` replaces the copy's ``--host`` by a
            repeatable one; replacing it in the shared parser would change every command).
        url: The CLI's URL validator (argparse ``type=``).
    """
    batch: argparse.ArgumentParser = commands.add_parser(
        "batch", parents=[flags], help="run a JSONL batch file (OpenAI / vLLM batch format)"
    )
    actions = batch.add_subparsers(dest="batch_command", metavar="ACTION")
    run = actions.add_parser(
        "run",
        parents=[new_flags()],
        conflict_handler="resolve",
        help="run INPUT.jsonl, appending answers to OUTPUT.jsonl (resumes)",
        description="Send every request of INPUT.jsonl not yet answered in OUTPUT.jsonl; "
        "each answer is appended as one line as soon as it arrives. Run it again to resume. "
        "Exit: 0 all answered, 1 the output holds failed lines (--retry-failed reruns them), "
        "2 invalid input, 130 interrupted.",
    )
    run.add_argument("input", metavar="INPUT.jsonl")
    run.add_argument("-o", "--output", required=True, metavar="OUTPUT.jsonl")
    run.add_argument("--concurrency", type=positive_int_arg, metavar="N", help="requests in flight")
    run.add_argument(
        "--per-host", type=positive_int_arg, metavar="N",
        help="requests in flight per server (default: the server's slots, else 4)",
    )  # fmt: skip
    run.add_argument(
        "--host", dest="hosts", action="append", type=url, metavar="URL",
        help="a server's base URL; repeat to spread the batch over several servers",
    )  # fmt: skip
    run.add_argument(
        "--retry-failed", action="store_true", help="run the lines that failed before again"
    )
    run.set_defaults(handler=_cmd_run, usage_parser=run)
    make = actions.add_parser(
        "make",
        parents=[flags],
        help="turn a text file (one prompt a line) or a CSV column into INPUT.jsonl",
    )
    make.add_argument("prompts", metavar="PROMPTS.txt|PROMPTS.csv")
    make.add_argument("-o", "--output", required=True, metavar="INPUT.jsonl")
    make.add_argument("--column", metavar="NAME", help="the CSV column holding the prompts")
    make.add_argument(
        "--id-column", metavar="NAME",
        help="the CSV column holding each line's custom_id (each row needs its own)",
    )  # fmt: skip
    make.add_argument("--system", metavar="TEXT", help="a system message for every line")
    make.set_defaults(handler=_cmd_make, usage_parser=make)
    return batch


def _hosts(args: argparse.Namespace) -> list[str]:
    hosts: list[str] = list(getattr(args, "hosts", None) or ())
    single = getattr(args, "host", None)
    if not hosts and isinstance(single, str):
        hosts = [single]
    return hosts


def _member_builder(ctx: Any, *, member: bool = True) -> Callable[[str], ProviderAdapter]:
    """Builds the configured provider at another base URL (same kind, key, timeout); a
    fleet ``member`` fails fast (no retries of its own: the fleet routes)."""
    from ..config import load_config
    from ..config._connect import fleet_member
    from ..registry import default_registry

    args = ctx.args

    def build(host: str) -> ProviderAdapter:
        overrides = {
            "provider": getattr(args, "provider", None),
            "model": getattr(args, "model", None),
            "base_url": host,
            "api_key": getattr(args, "api_key", None),
            "timeout": getattr(args, "timeout", None),
        }
        config = load_config(ctx.config_arg, overrides=overrides)
        built = default_registry(config).require(config.provider)
        return fleet_member(built) if member else built

    return build


def _provider(args: argparse.Namespace, ctx: Any) -> ProviderAdapter:
    from ..fleet import Fleet, fleet_from_hosts

    hosts = _hosts(args)
    per_host = args.per_host
    if len(hosts) > 1 or (hosts and per_host is not None):
        return fleet_from_hosts(_member_builder(ctx), hosts, per_host=per_host)
    if hosts:
        return _member_builder(ctx, member=False)(hosts[0])
    if per_host is not None:
        from ..config._connect import fleet_member
        from ..registry import default_registry

        built = default_registry(ctx.config).require(ctx.config.provider)
        return Fleet([fleet_member(built)], per_host=per_host)
    provider: ProviderAdapter = ctx.provider()
    return provider


def _cmd_run(args: argparse.Namespace, ctx: Any) -> int:
    from ..batch import BatchFileError, run_with_provider
    from ..batch._progress import BatchProgressPrinter
    from ..batch._runner import Stops
    from ..config._connect import call_defaults
    from ..gate import cli_batch_gate

    ctx.check_config()
    provider = cli_batch_gate(_provider(args, ctx), ctx.config, args.input)  # the one way in
    note = getattr(provider, "health_note", None)
    printer = BatchProgressPrinter(ctx.err, hosts=note if callable(note) else None)
    stops = Stops()
    handler = _fleet_log(ctx, printer.tty)
    try:
        summary = run_with_provider(
            provider,
            args.input,
            args.output,
            model=ctx.config.model,
            concurrency=args.concurrency,
            progress=printer,
            retry_failed=args.retry_failed,
            stops=stops,
            resolve_model=lambda: _server_model(ctx, provider),
            options=call_defaults(ctx.config, {}),  # the config's [options]
        )
    except BatchFileError as exc:
        ctx.err.write(error_line(exc.message, exc.code))
        return EXIT_USAGE
    finally:
        close = getattr(provider, "close", None)
        if callable(close):
            close()
        if handler is not None:
            for name in _SHOWN_LOGGERS:
                logging.getLogger(name).removeHandler(handler)
    printer.finish(summary)
    left = summary.remaining
    output = printable(args.output)  # the status lines quote it: no escapes on the terminal
    ctx.say(
        f"batch: {summary.done} done, {summary.failed} failed, {summary.skipped} already in "
        f"{output}" + (f", {left} not run" if left else "") + f" ({summary.seconds:.1f} s)"
    )
    if stops.interrupted:
        ctx.say("ollm-lite: interrupted; run the same command again to resume")
        return EXIT_INTERRUPTED
    if summary.failed_in_output:
        kept = summary.failed_in_output - summary.failed
        ctx.say(
            f"ollm-lite: {summary.failed_in_output} line(s) of {output} hold an error"
            + (f" ({kept} from an earlier run)" if kept else "")
            + "; run the same command with --retry-failed to run them again"
        )
        return EXIT_ERROR
    return EXIT_OK


#: Loggers whose INFO lines a batch run shows: fleet health, interrupts, output repairs.
_SHOWN_LOGGERS = ("ollm_lite.fleet", "ollm_lite.batch._runner", "ollm_lite.batch._output")


def _fleet_log(ctx: Any, tty: bool) -> logging.Handler | None:
    """Show fleet health, interrupts and output repairs on stderr (``--debug``: everything)."""
    if ctx.debug:
        return None
    handler = logging.StreamHandler(ctx.err)
    handler.setFormatter(_LogFormatter("\r\x1b[2K" if tty else ""))
    handler.setLevel(logging.INFO)
    for name in _SHOWN_LOGGERS:
        shown = logging.getLogger(name)
        shown.addHandler(handler)
        if shown.getEffectiveLevel() > logging.INFO:
            shown.setLevel(logging.INFO)
    return handler


class _LogFormatter(PrintableFormatter):
    """``ollm-lite: message`` without control characters (it may quote a path or a server),
    after ``clear``: on a terminal, the sequence clearing the progress bar's line (redrawn
    after)."""

    def __init__(self, clear: str) -> None:
        super().__init__(f"{PROG}: %(message)s")
        self.clear = clear

    def format(self, record: logging.LogRecord) -> str:
        return self.clear + super().format(record)


def _server_model(ctx: Any, provider: ProviderAdapter) -> str:
    """The model for lines without one, as ``ollm-lite chat`` picks it."""
    from ._chat import chat_model

    return chat_model(ctx, provider)


def _cmd_make(args: argparse.Namespace, ctx: Any) -> int:
    from ..batch import BatchFileError, make_input

    try:
        count = make_input(
            args.prompts,
            args.output,
            column=args.column,
            model=getattr(args, "model", None),
            system=args.system,
            id_column=args.id_column,
        )
    except BatchFileError as exc:
        ctx.err.write(error_line(exc.message, exc.code))
        return EXIT_USAGE
    ctx.say(f"wrote {count} request(s) to {printable(args.output)}")
    return EXIT_OK
