"""``ollm-lite logs``: read the call log from the command line, and ``chat --log/--no-log``.

``logs [list]`` lists the newest calls, one line each (the start in local time with its
weekday, the model, the seconds, a cached mark, the answer or the error shortened to the
line), ``logs show ID`` prints one in full (``ID``: any unique prefix of an id), ``logs
stats`` sums them up by model, day, host, source or script and ends with a total row, ``logs
prune`` removes old ones for good, ``logs path`` prints the file, ``logs on|off`` sets
``[log] enabled`` in the config file (keeping every other line). ``--json`` prints the field
names of ``LoggedCall`` and ``CallStats`` as keys. A bad duration or argument, an unknown id
or an ambiguous prefix exits 2.

Everything printed from the log goes through the printable path (:func:`printable`): a stored
answer or error may quote a server, escape sequences included.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..call_log._settings import ENV_VAR, env_setting, log_path
from ..errors import ConfigError
from ._common import EXIT_OK, Context, UsageError, emit_json, table
from ._terminal_text import PrintableFormatter, printable

if TYPE_CHECKING:
    from ..call_log._reader import CallLog
    from ..call_log._records import CallStats, LoggedCall
    from ..gate import GatedCall
    from ..providers.base import ProviderAdapter

__all__ = ["add_chat_log_flags", "add_logs_parser", "chat_gate", "duration"]

_DURATION = re.compile(r"([1-9][0-9]{0,11})([smhd]?)", re.ASCII)
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}
#: The longest ``D``: 1000 years (a longer one reaches past the dates a clock can name).
MAX_DURATION = 1000 * 365 * 86400


def duration(text: str) -> int:
    """``D``: a positive whole number of seconds, or with ``s``, ``m``, ``h`` or ``d``; at
    most :data:`MAX_DURATION`."""
    match = _DURATION.fullmatch(text.strip())
    seconds = int(match.group(1)) * _UNITS[match.group(2)] if match else 0
    if match is None or seconds > MAX_DURATION:
        raise argparse.ArgumentTypeError(
            f"invalid duration {_shortened(text)!r}: a positive whole number, optionally "
            "followed by s, m, h or d (3600, 30m, 12h, 7d), of at most 1000 years"
        )
    return seconds


def _shortened(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


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
    show.add_argument("id", metavar="ID", help="a call's id, or any unique prefix of one")
    show.add_argument("--json", action="store_true", help="one JSON object")
    show.set_defaults(handler=_cmd_show, usage_parser=show)
    stats = actions.add_parser("stats", parents=[flags], help="calls, errors, tokens, times")
    stats.add_argument(
        "--by", choices=("model", "day", "host", "source", "script"), default="model"
    )
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
    parser.add_argument("--until", type=duration, metavar="D", help="only calls before D ago")
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


@contextlib.contextmanager
def _usage_on_bad_argument() -> Iterator[None]:
    """A ``ConfigError`` the log raises for an argument (text it cannot search for) as a
    usage error."""
    try:
        yield
    except ConfigError as exc:
        if isinstance(exc.details, dict) and "argument" in exc.details:
            raise UsageError(exc.message) from exc
        raise


@contextlib.contextmanager
def _warnings_shown(ctx: Context) -> Iterator[None]:
    """The log's warnings (a damaged row) on stderr while the log is read (with ``--debug``
    every record already is)."""
    if ctx.debug:
        yield
        return
    handler = logging.StreamHandler(ctx.err)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(PrintableFormatter("ollm-lite: warning: %(message)s"))
    logger = logging.getLogger("ollm_lite.call_log")
    logger.addHandler(handler)
    try:
        yield
    finally:
        logger.removeHandler(handler)


def _field(value: object) -> str:
    """A stored value on one line of the terminal ("?" for one that cannot be read)."""
    return "?" if value is None else " ".join(printable(str(value)).split())


def _one_line(text: str | None, limit: int = 60) -> str:
    flat = _field(text if text is not None else "")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _local(started: datetime | None) -> str:
    """When a call started, in local time with its weekday (``Tue 2026-01-13 07:00:12``)."""
    return "?" if started is None else started.astimezone().strftime("%a %Y-%m-%d %H:%M:%S")


def _seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f}"


def _cmd_list(args: argparse.Namespace, ctx: Context) -> int:
    from ..call_log._records import call_to_json

    if not _exists(ctx):
        if args.json:
            emit_json(ctx.out, [])
            return EXIT_OK
        _nothing_yet(ctx)
        return EXIT_OK
    with _open(ctx) as log, _usage_on_bad_argument(), _warnings_shown(ctx):
        calls = log.calls(
            since=args.since,
            until=args.until,
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
    headers = ["ID", "STARTED", "MODEL", "SOURCE", "SECONDS", "CACHED", "END", "ANSWER OR ERROR"]
    ctx.out.write(table(headers, [_list_row(c) for c in calls]))
    return EXIT_OK


def _list_row(call: LoggedCall) -> list[str]:
    failed = call.error_code is not None
    return [
        _field(call.id),
        _local(call.started),
        _field(call.model or ""),
        _field(call.source),
        _seconds(call.seconds),
        "cached" if call.cached else "",
        _field(call.error_code if failed else call.finish),
        _one_line(call.error_message if failed else call.text),
    ]


def _find(log: CallLog, prefix: str) -> str:
    """The one id that starts with ``prefix``.

    Raises:
        UsageError: no id, or more than one, starts so.
    """
    if not prefix:
        raise UsageError("no call '': give a call's id or the first characters of one")
    with _usage_on_bad_argument():
        ids = log._ids(prefix)
    if not ids:
        raise UsageError(f"no call {prefix!r} in the call log {log.path}")
    if len(ids) > 1:
        raise UsageError(
            f"{prefix!r} starts more than one call id ({ids[0]}, {ids[1]} ...): give more of it"
        )
    return ids[0]


def _cmd_show(args: argparse.Namespace, ctx: Context) -> int:
    from ..call_log._records import call_to_json

    if not _exists(ctx):
        raise UsageError(f"no call {args.id!r}: nothing is logged yet")
    with _open(ctx) as log, _warnings_shown(ctx):
        call = log.get(_find(log, args.id))
    if args.json:
        emit_json(ctx.out, call_to_json(call))
        return EXIT_OK
    ctx.out.write(printable("\n".join(_shown(call)) + "\n"))
    return EXIT_OK


def _shown(call: LoggedCall) -> list[str]:
    """``call`` in full, for reading: one ``field: value`` line each, then the options and
    the usage as ``key = value`` lines, the messages, the tool calls and the answer."""
    fields: list[tuple[str, object]] = [
        ("id", call.id),
        ("started", _local(call.started) + (" (local time)" if call.started else "")),
        ("source", call.source),
        ("script", call.script),
        ("provider", call.provider),
        ("host", call.host),
        ("model", call.model),
        ("finish", call.finish),
        ("seconds", _seconds(call.seconds)),
        ("first_token_seconds", None if call.first_token_seconds is None
         else _seconds(call.first_token_seconds)),
        ("cached", None if call.cached is None else ("yes" if call.cached else "no")),
        ("session_id", call.session_id),
        ("custom_id", call.custom_id),
        ("error_code", call.error_code),
        ("error_message", call.error_message),
    ]  # fmt: skip
    lines = [f"{name}: {_field(value)}" for name, value in fields if value is not None]
    if call.usage is not None:
        usage = {
            "prompt_tokens": call.usage.prompt_tokens,
            "completion_tokens": call.usage.completion_tokens,
            "total_tokens": call.usage.total_tokens,
            **call.usage.extra,
        }
        lines += ["usage:", *_settings(usage)]
    if call.options:
        lines += ["options:", *_settings(call.options)]
    lines.append("")
    for message in call.messages:
        content = message.get("content")
        shown = content if isinstance(content, str) else _value(content)
        lines.append(f"[{_field(message.get('role'))}] {shown}")
    for tool_call in call.tool_calls:
        lines.append(f"[tool call] {_field(tool_call.name)} {tool_call.arguments}")
    if call.thinking:
        lines += ["", "[thinking]", call.thinking]
    lines += ["", "[answer]", call.text if call.text is not None else "?"]
    return lines


def _settings(values: dict[str, Any]) -> list[str]:
    """``  key = value`` lines, values as JSON (``temperature = 0.2``, ``stop = ["\\n"]``)."""
    return [f"  {_field(key)} = {_field(_value(value))}" for key, value in values.items()]


def _value(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _no_model_filter(args: argparse.Namespace, command: str, what: str) -> None:
    """``--model`` filters ``logs list`` only; here it would be quietly ignored (for ``prune``:
    every model's calls removed while the user meant one), so it is a usage error."""
    if getattr(args, "model", None) is not None:
        raise UsageError(f"--model does not apply to 'logs {command}': it {what}")


#: The columns of ``logs stats``: a header and how a row's cell is made from the group's
#: figures and whether its token sums include counted or estimated figures. A column added
#: here shows in every row and in the total row.
_STATS_TABLE: list[tuple[str, Callable[[CallStats, bool], str]]] = [
    ("CALLS", lambda s, rough: str(s.calls)),
    ("ERRORS", lambda s, rough: str(s.errors)),
    ("CACHED", lambda s, rough: str(s.cached)),
    ("PROMPT", lambda s, rough: _tokens(s.prompt_tokens, rough)),
    ("COMPLETION", lambda s, rough: _tokens(s.completion_tokens, rough)),
    ("P50 S", lambda s, rough: f"{s.seconds_p50:.2f}"),
    ("P95 S", lambda s, rough: f"{s.seconds_p95:.2f}"),
]


def _stats_row(
    key: str,
    stats: CallStats,
    rough: bool,
    columns: list[tuple[str, Callable[[CallStats, bool], str]]],
) -> list[str]:
    return [key, *(cell(stats, rough) for _, cell in columns)]


def _cmd_stats(args: argparse.Namespace, ctx: Context) -> int:
    from ..call_log._records import stats_to_json

    _no_model_filter(args, "stats", "sums every model (its rows are per model with --by model)")

    if not _exists(ctx):
        if args.json:
            emit_json(ctx.out, [])
        else:
            _nothing_yet(ctx)
        return EXIT_OK
    with _open(ctx) as log, _warnings_shown(ctx):
        stats, total = log._grouped(args.by, args.since)
        if args.json:
            emit_json(ctx.out, [stats_to_json(s) for s in stats])
            return EXIT_OK
        from ..call_log._usage import estimated_keys

        rough = estimated_keys(log, by=args.by, since=args.since)  # sums marked "~"
    if not stats:
        ctx.say("no calls match")
        return EXIT_OK
    columns = list(_STATS_TABLE)
    if any(s.cost is not None for s in stats):  # a cost column once any call has a cost
        columns.append(("COST", lambda s, rough: "-" if s.cost is None else f"{s.cost:.4f}"))
    rows = [
        _stats_row("?" if s.key is None else s.key or "-", s, s.key in rough, columns)
        for s in stats
    ]
    rows.append(_stats_row("total", total, bool(rough), columns))
    ctx.out.write(table([args.by.upper(), *(header for header, _ in columns)], rows))
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


def chat_gate(
    args: argparse.Namespace, ctx: Context, adapter: ProviderAdapter, model: str
) -> GatedCall | None:
    """The way in of a CLI ``chat`` exchange through the gate (``None``: nothing to pass)."""
    from ..gate import configured_gate

    gate = configured_gate(adapter, ctx.config, getattr(args, "log", None))
    return None if gate is None else gate.call("cli", model=model)
