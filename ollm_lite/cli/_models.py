"""``ollm-lite models list | show NAME | pull NAME | rm NAME``: the models on a server.

``list`` prints a table, ``show`` one model's details, ``pull`` a progress bar (Ollama; a
redrawn line on a terminal, plain lines otherwise); ``--json`` prints JSON instead. The first
Ctrl-C stops a pull (exit 130).
"""

from __future__ import annotations

import argparse
import re
import threading
from typing import TYPE_CHECKING, Any

from ..errors import Cancelled
from ._common import (
    EXIT_OK,
    Context,
    cancel_on_sigint,
    emit_json,
    isatty,
    missing,
    plain,
    table,
)
from ._terminal_text import printable

if TYPE_CHECKING:
    from ..types import ModelInfo

__all__ = ["add_models_parser"]


def add_models_parser(commands: Any, flags: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``models list|show|pull|rm`` to the CLI's sub-commands; returns the ``models`` parser."""
    models: argparse.ArgumentParser = commands.add_parser(
        "models", parents=[flags], help="list, show, pull, remove"
    )
    model_commands = models.add_subparsers(dest="models_command", metavar="ACTION")
    models.set_defaults(handler=missing(models), usage_parser=models)
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
    return models


def _cmd_models_list(args: argparse.Namespace, ctx: Context) -> int:
    from ._pull_progress import human_bytes

    ctx.check_config()
    models = ctx.provider().list_models()
    if args.json:
        emit_json(ctx.out, [plain(m) for m in models])
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
    ctx.out.write(table(headers, rows))
    return EXIT_OK


def _when(stamp: str | None) -> str:
    if not stamp:
        return "-"
    # "2025-07-07T20:22:19.184789Z" -> "2025-07-07 20:22"
    match = re.match(r"(\d{4}-\d\d-\d\d)[T ](\d\d:\d\d)", stamp)
    return f"{match.group(1)} {match.group(2)}" if match else stamp


def _cmd_models_show(args: argparse.Namespace, ctx: Context) -> int:
    from ._pull_progress import human_bytes

    ctx.check_config()
    info: ModelInfo = ctx.provider().show_model(args.name)
    if args.json:
        emit_json(ctx.out, plain(info))
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
    rows = [(printable(k), " ".join(printable(v).split())) for k, v in rows]  # server text
    width = max(len(k) for k, _ in rows)
    ctx.out.write("".join(f"{k.ljust(width)}  {v}\n" for k, v in rows))
    return EXIT_OK


def _cmd_models_pull(args: argparse.Namespace, ctx: Context) -> int:
    from ..types import PullProgress
    from ._pull_progress import PullProgressPrinter

    ctx.check_config()
    adapter = ctx.provider()
    cancel = threading.Event()
    printer = PullProgressPrinter(ctx.out, tty=isatty(ctx.out))

    def on_progress(progress: PullProgress) -> None:
        if args.json:
            emit_json(ctx.out, plain(progress))
        else:
            printer(progress)

    with cancel_on_sigint(cancel):
        try:
            adapter.pull_model(args.name, on_progress=on_progress, cancel=cancel)
        finally:
            printer.close()
    if cancel.is_set():
        raise Cancelled("the pull was cancelled")
    if not args.json:
        ctx.out.write(f"pulled {args.name}\n")
    return EXIT_OK


def _cmd_models_rm(args: argparse.Namespace, ctx: Context) -> int:
    ctx.check_config()
    ctx.provider().delete_model(args.name)
    ctx.out.write(f"deleted {args.name}\n")
    return EXIT_OK
