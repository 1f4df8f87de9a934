"""``ollm-lite logs``: read the call log from the command line, and ``chat --log/--no-log``.

``logs [list]`` lists the newest calls (a long answer shortened to one line), ``logs show ID``
prints one in full, ``logs stats`` sums them up by model, day, host or source, ``logs prune``
removes old ones for good, ``logs path`` prints the file, ``logs on|off`` sets ``[log]
enabled`` in the config file (keeping every other line). ``--json`` prints the field names of
``LoggedCall`` and ``CallStats`` as keys. A bad duration or an unknown id exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..call_log._settings import ENV_VAR, env_setting, log_path
from ..errors import ConfigError
from ._common import EXIT_OK, Context, UsageError, emit_json, table

if TYPE_CHECKING:
    from ..call_log._reader import CallLog
    from ..call_log._recorder import Recorder
    from ..providers.base import ProviderAdapter

__all__ = ["add_chat_log_flags", "add_logs_parser", "chat_recorder", "duration"]

_DURATION = re.compile(r"([1-9][0-9]*)([smhd]?)")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> int:
    """``D``: a positive whole number of seconds, or with ``s``, ``m``, ``h`` or ``d``."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: a positive whole number, optionally followed by "
            "s, m, h or d (3600, 30m, 12h, 7d)"
        )
    return int(match.group(1)) * _UNITS[match.group(2)]


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 1:
        raise argparse.ArgumentTypeError(f"invalid count {text!r}: a positive whole number")
    return value


def add_logs_parser(
    commands: Any, flags: argparse.ArgumentParser, missing: Any = None
) -> argparse.ArgumentParser:
    """Add ``logs`` to the CLI's sub-commands; returns its parser."""
    logs: argparse.ArgumentParser = commands.add_parser(
        "logs",
        parents=[flags],
        help="the call log: list, show, stats, prune, path, on, off",
        description="Read the call log (every call on record when logging is on).",
    )
    _list_flags(logs)
    logs.set_defaults(handler=_cmd_list, usage_parser=logs)
    actions = logs.add_subparsers(dest="logs_command", metavar="ACTION")
    listing = actions.add_parser("list", parents=[flags], help="the newest calls")
    _list_flags(listing)
    listing.set_defaults(handler=_cmd_list, usage_parser=listing)
    show = actions.add_parser("show", parents=[flags], help="one call in full")
    show.add_argument("id", metavar="ID")
    show.add_argument("--json", action="store_true", help="one JSON object")
    show.set_defaults(handler=_cmd_show, usage_parser=show)
    stats = actions.add_parser("stats", parents=[flags], help="calls, errors, tokens, times")
    stats.add_argument("--by", choices=("model", "day", "host", "source"), default="model")
    stats.add_argument("--since", type=duration, metavar="D", help="only the last D")
    stats.add_argument("--json", action="store_true", help="one JSON array")
    stats.set_defaults(handler=_cmd_stats, usage_parser=stats)
    prune = actions.add_parser("prune", parents=[flags], help="remove old calls for good")
    prune.add_argument("--older-than", type=duration, metavar="D", required=True)
    prune.set_defaults(handler=_cmd_prune, usage_parser=prune)
    path = actions.add_parser("path", parents=[flags], help="print the log file's path")
    path.set_defaults(handler=_cmd_path, usage_parser=path)
    for name, on in (("on", True), ("off", False)):
        switch = actions.add_parser(
            name, parents=[flags], help=f"turn logging {name} in the config file"
        )
        switch.set_defaults(handler=_cmd_switch, usage_parser=switch, switch_on=on)
    return logs


def _list_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", type=_count, default=20, metavar="N", help="how many (20)")
    parser.add_argument("--since", type=duration, metavar="D", help="only the last D")
    # --model M (only this model's calls) is the global flag of the same name
    parser.add_argument("--search", metavar="TEXT", help="prompt or answer contains TEXT")
    parser.add_argument("--errors", action="store_true", help="only failed calls")
    parser.add_argument("--json", action="store_true", help="one JSON array")


def _path(ctx: Context) -> Path:
    return log_path(None, ctx.config)


def _exists(ctx: Context) -> bool:
    from ..call_log._reader import log_exists

    return log_exists(_path(ctx))  # a FIFO or a path that cannot be looked at: ConfigError


def _open(ctx: Context) -> CallLog:
    from ..call_log._reader import CallLog

    return CallLog(_path(ctx))


def _nothing_yet(ctx: Context) -> bool:
    if _exists(ctx):
        return False
    ctx.out.write(
        f"nothing is logged yet ({_path(ctx)} does not exist); turn it on: ollm-lite logs on\n"
    )
    return True


def _one_line(text: str, limit: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    from ..call_log._records import call_to_json

    if not _exists(ctx):
        if args.json:
            emit_json(ctx.out, [])
            return EXIT_OK
        _nothing_yet(ctx)
        return EXIT_OK
    with _open(ctx) as log:
        calls = log.calls(
            since=args.since,
            model=getattr(args, "model", None),
            search=args.search,
            errors=args.errors,
            limit=args.n,
        )
    if args.json:
        emit_json(ctx.out, [call_to_json(c) for c in calls])
        return EXIT_OK
    if not calls:
        ctx.say("no calls match")
        return EXIT_OK
    rows = [
        [
            c.id,
            c.started.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S"),
            c.model or "",
            c.source,
            f"{c.seconds:.2f}s",
            c.error_code or c.finish,
            _one_line(c.text),
        ]
        for c in calls
    ]
    ctx.out.write(table(["ID", "STARTED (UTC)", "MODEL", "SOURCE", "TIME", "END", "ANSWER"], rows))
    return EXIT_OK


def _cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    from ..call_log._records import call_to_json

    if not _exists(ctx):
        raise UsageError(f"no call {args.id!r}: nothing is logged yet")
    with _open(ctx) as log:
        try:
            call = log.get(args.id)
        except ConfigError as exc:
            if "no call" in exc.message:
                raise UsageError(exc.message) from exc
            raise
    if args.json:
        emit_json(ctx.out, call_to_json(call))
        return EXIT_OK
    data = call_to_json(call)
    lines = [f"{key}: {data[key]}" for key in ("id", "started", "source", "script", "provider",
             "host", "model", "finish", "seconds", "first_token_seconds", "cached",
             "session_id", "custom_id", "error_code", "error_message", "usage", "options")
             if data[key] is not None]  # fmt: skip
    lines.append("")
    for message in call.messages:
        content = message.get("content")
        shown = content if isinstance(content, str) else str(content)
        lines.append(f"[{message.get('role')}] {shown}")
    for tool_call in call.tool_calls:
        lines.append(f"[tool call] {tool_call.name} {tool_call.arguments}")
    if call.thinking:
        lines += ["", "[thinking]", call.thinking]
    lines += ["", "[answer]", call.text]
    ctx.out.write("\n".join(lines) + "\n")
    return EXIT_OK


def _no_model_filter(args: argparse.Namespace, command: str, what: str) -> None:
    """``--model`` filters ``logs list`` only; here it would be quietly ignored (for ``prune``:
    every model's calls removed while the user meant one), so it is a usage error."""
    if getattr(args, "model", None) is not None:
        raise UsageError(f"--model does not apply to 'logs {command}': it {what}")


def _cmd_stats(args: argparse.Namespace, ctx: Context) -> int:
    from ..call_log._records import stats_to_json

    _no_model_filter(args, "stats", "sums every model (its rows are per model with --by model)")

    if not _exists(ctx):
        if args.json:
            emit_json(ctx.out, [])
        else:
            _nothing_yet(ctx)
        return EXIT_OK
    with _open(ctx) as log:
        stats = log.stats(by=args.by, since=args.since)
        if args.json:
            emit_json(ctx.out, [stats_to_json(s) for s in stats])
            return EXIT_OK
        from ..call_log._usage import estimated_keys

        rough = estimated_keys(log, by=args.by, since=args.since)  # sums marked "~"
    rows = [
        [s.key or "-", str(s.calls), str(s.errors), str(s.cached),
         _tokens(s.prompt_tokens, s.key in rough), _tokens(s.completion_tokens, s.key in rough),
         f"{s.seconds_p50:.2f}", f"{s.seconds_p95:.2f}"]
        for s in stats
    ]  # fmt: skip
    headers = [args.by.upper(), "CALLS", "ERRORS", "CACHED", "PROMPT", "COMPLETION", "P50 S"]
    ctx.out.write(table([*headers, "P95 S"], rows))
    return EXIT_OK


def _tokens(count: int, estimated: bool) -> str:
    """A token sum; ``~`` before it when it includes counted or estimated figures."""
    return f"~{count}" if estimated else str(count)


def _cmd_prune(args: argparse.Namespace, ctx: Context) -> int:
    _no_model_filter(args, "prune", "removes every model's calls older than the age given")
    if not _exists(ctx):
        ctx.say("nothing is logged yet: nothing to prune")
        return EXIT_OK
    with _open(ctx) as log:
        removed = log.prune(older_than=args.older_than)
    ctx.say(f"removed {removed} call{'' if removed == 1 else 's'}")
    return EXIT_OK


def _cmd_path(args: argparse.Namespace, ctx: Context) -> int:
    ctx.out.write(f"{_path(ctx)}\n")
    return EXIT_OK


def _cmd_switch(args: argparse.Namespace, ctx: Context) -> int:
    from ..config import config_path

    on: bool = args.switch_on
    file, _ = config_path(ctx.config_arg)
    set_enabled(file, on)
    ctx.say(f"logging {'on' if on else 'off'} in {file} ([log] enabled = {str(on).lower()})")
    setting = env_setting(os.environ)
    if setting is not None and (setting is not False) != on:
        ctx.say(
            f"note: {ENV_VAR}={os.environ.get(ENV_VAR)} is set and wins over the config file: "
            f"logging stays {'off' if on else 'on'} while it is"
        )
    return EXIT_OK


_ENABLED = re.compile(r"^\s*enabled\s*=")
_DOTTED_LOG = re.compile(r"^\s*log\s*\.")
_DOTTED_ENABLED = re.compile(r"^\s*log\s*\.\s*enabled\s*=")


def set_enabled(file: Path, on: bool) -> None:
    """Set ``[log] enabled`` in ``file``, keeping every other line (created when missing).

    The edited text is checked by reading it back: it must differ from the file in
    ``log.enabled`` alone.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when the file cannot be read, parsed or written, or
            holds ``log`` in a form a line edit cannot change alone (an inline table).
    """
    import tomllib

    try:
        text = file.read_bytes().decode("utf-8") if file.exists() else ""
        before = tomllib.loads(text)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read the config file {file}: {exc}") from exc
    newline = "\r\n" if "\r\n" in text else "\n"
    lines = text.splitlines()
    value = f"enabled = {'true' if on else 'false'}"
    for edited in (*_in_log_table(lines, value), _as_dotted_key(lines, value)):
        if edited is not None and _only_enabled_changed(before, edited, on):
            _write(file, newline.join(edited) + newline)
            return
    raise ConfigError(
        f"cannot set [log] enabled in {file} without changing anything else: set it by hand"
    )


def _header(line: str) -> tuple[str, ...] | None:
    """The table a ``[header]`` line opens (an array's ends with ``"[]"``); ``None`` for
    another line."""
    import tomllib

    if not line.lstrip().startswith("["):
        return None
    try:
        node: Any = tomllib.loads(line.strip() + "\n")
    except tomllib.TOMLDecodeError:
        return None
    keys: list[str] = []
    while isinstance(node, dict) and len(node) == 1:
        key, node = next(iter(node.items()))
        keys.append(key)
    return (*keys, "[]") if isinstance(node, list) else tuple(keys)


def _in_log_table(lines: list[str], value: str) -> list[list[str]]:
    """``lines`` with ``enabled`` set under the ``[log]`` header (added at the end when there
    is none): its ``enabled`` line replaced, else (or when that line was no key, but text in a
    multi-line string) one added under the header."""
    start = next((i for i, line in enumerate(lines) if _header(line) == ("log",)), None)
    if start is None:
        tail = [""] if lines and lines[-1].strip() else []
        return [[*lines, *tail, "[log]", value]]
    end = next((i for i in range(start + 1, len(lines)) if _header(lines[i])), len(lines))
    found = next((i for i in range(start + 1, end) if _ENABLED.match(lines[i])), None)
    added = [*lines[: start + 1], value, *lines[start + 1 :]]
    if found is None:
        return [added]
    return [[*lines[:found], value, *lines[found + 1 :]], added]


def _as_dotted_key(lines: list[str], value: str) -> list[str] | None:
    """``lines`` with ``log.enabled`` set where the file uses dotted ``log.`` keys at the top."""
    dotted = f"log.{value}"
    found = next((i for i, line in enumerate(lines) if _DOTTED_ENABLED.match(line)), None)
    if found is not None:
        return [*lines[:found], dotted, *lines[found + 1 :]]
    first = next((i for i, line in enumerate(lines) if _DOTTED_LOG.match(line)), None)
    return None if first is None else [*lines[:first], dotted, *lines[first:]]


def _only_enabled_changed(before: dict[str, Any], edited: list[str], on: bool) -> bool:
    import tomllib

    try:
        after = tomllib.loads("\n".join(edited) + "\n")
    except tomllib.TOMLDecodeError:
        return False
    table, was = after.get("log"), before.get("log", {})
    if not isinstance(table, dict) or table.get("enabled") is not on or not isinstance(was, dict):
        return False
    rest = {k: v for k, v in table.items() if k != "enabled"}
    kept = {k: v for k, v in was.items() if k != "enabled"}
    others = {k: v for k, v in after.items() if k != "log"}
    return rest == kept and others == {k: v for k, v in before.items() if k != "log"}


def _write(file: Path, text: str) -> None:
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        temp = file.with_name(f".{file.name}.{os.getpid()}.tmp")
        temp.write_bytes(text.encode("utf-8"))
        if file.exists():
            os.chmod(temp, file.stat().st_mode & 0o777)
        os.replace(temp, file)
    except OSError as exc:
        raise ConfigError(f"cannot write the config file {file}: {exc}") from exc


# --------------------------------------------------------------------------- chat


def add_chat_log_flags(chat: argparse.ArgumentParser) -> None:
    """``chat --log/--no-log``: log this exchange, or not, whatever the config says."""
    chat.add_argument(
        "--log",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="keep this exchange in the call log (default: as OLLM_LOG / [log] say)",
    )


def chat_recorder(
    args: argparse.Namespace, ctx: Context, adapter: ProviderAdapter, model: str
) -> Recorder | None:
    """The recorder of a CLI ``chat`` exchange (``None``: not logged)."""
    from ..call_log._hooks import client_logger

    logger = client_logger(getattr(args, "log", None), None, ctx.config, adapter)
    if logger is None:
        return None
    return logger.begin("cli", model=model)
