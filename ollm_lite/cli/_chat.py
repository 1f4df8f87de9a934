"""``ollm-lite chat``: stream an answer to stdout, and how it is shown.

The answer goes to stdout as it arrives (``--no-stream``: when complete; ``--json``: one JSON
object per event); thinking (``--show-thinking``, dimmed on a terminal), warnings and errors
go to stderr. An empty (or blank) answer is an error (exit 1, ``LLM_BAD_RESPONSE``) in every
output mode. The first Ctrl-C stops the answer cleanly (exit 130, the partial answer stays).
"""

from __future__ import annotations

import argparse
import sys
import threading
import traceback
from typing import TYPE_CHECKING, Any, TextIO

from . import _mcp as _mcp_cli
from ._common import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    PROG,
    Context,
    UsageError,
    cancel_on_sigint,
    emit_json,
    error_line,
    isatty,
    plain,
    positive_int_arg,
    temperature,
    usage_on_unknown_server,
)
from ._logs import add_chat_log_flags, chat_gate
from ._terminal_text import printable

if TYPE_CHECKING:
    from ..chat import ChatClient
    from ..chat._call_settings import CallSettings
    from ..config import Config
    from ..gate import GatedCall
    from ..providers.base import ProviderAdapter
    from ..types import ChatEvent
    from ..types._event_fold import Folded

__all__ = ["DEFAULT_MAX_TOKENS", "add_chat_parser", "chat_model", "chat_settings"]

#: ``chat``'s answer-length limit without ``--max-tokens``: room for a long answer, a stop for
#: a runaway one.
DEFAULT_MAX_TOKENS = 1024
_DIM, _RESET = "\x1b[2m", "\x1b[0m"


def add_chat_parser(commands: Any, flags: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``chat`` to the CLI's sub-commands; returns its parser."""
    chat: argparse.ArgumentParser = commands.add_parser(
        "chat", parents=[flags], help="stream an answer to stdout",
        description="Stream the answer to PROMPT to stdout. Without PROMPT (or with -) the "
        "prompt is read from stdin. Ctrl-C stops the answer (exit 130).",
    )  # fmt: skip
    chat.add_argument("prompt", nargs="?", metavar="PROMPT", help="the prompt, or - for stdin")
    chat.add_argument("--system", metavar="TEXT", help="system prompt")
    chat.add_argument("--temperature", type=temperature, metavar="T")
    chat.add_argument(
        "--max-tokens",
        type=positive_int_arg,
        default=None,
        metavar="N",
        help=f"longest answer in tokens (default {DEFAULT_MAX_TOKENS}, or max_tokens in the "
        "config's [options])",
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
    add_chat_log_flags(chat)
    chat.set_defaults(handler=_cmd_chat, usage_parser=chat)
    return chat


def _read_prompt(args: argparse.Namespace, ctx: Context) -> str:
    prompt: str | None = args.prompt
    if prompt is None or prompt == "-":
        stdin = sys.stdin
        if stdin is None:
            raise UsageError("no PROMPT given and no stdin to read it from")
        if stdin.isatty():
            ctx.say("reading the prompt from stdin (finish with Ctrl-D)")
        prompt = stdin.read()
    if not prompt.strip():
        raise UsageError("empty prompt: give PROMPT or pipe text on stdin")
    return prompt


def chat_model(ctx: Context, adapter: ProviderAdapter) -> str:
    """The configured model, else the server's only chat model (as ``connect()`` picks it)."""
    from ..config._connect import resolve_model

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


def _cmd_chat(args: argparse.Namespace, ctx: Context) -> int:
    from ..chat import ChatClient

    ctx.check_config()
    prompt = _read_prompt(args, ctx)
    adapter = ctx.provider()
    model = chat_model(ctx, adapter)
    way = chat_gate(args, ctx, adapter, model)  # the one way in, when anything is on
    with usage_on_unknown_server(), _mcp_cli.open_tools(args.tools, ctx.config) as tools:
        client = ChatClient(
            way if way is not None else ctx.registry,
            model=model,
            context_limits=ctx.config.context_limits,
            tools=tools or None,
        )
        return _run_chat(args, ctx, client, prompt, way)


def _run_chat(
    args: argparse.Namespace,
    ctx: Context,
    client: ChatClient,
    prompt: str,
    way: GatedCall | None = None,
) -> int:
    from ..chat._loop import ChatLoop
    from ..types._event_fold import EventFold

    settings = chat_settings(args, ctx.config)
    cancel = threading.Event()
    view = _ChatView(args, ctx)
    fold = EventFold()
    with cancel_on_sigint(cancel):
        events = ChatLoop(
            client,
            [],
            [],
            system_prompt=args.system,
            options=settings.generation,
            settings=settings,
            cancel=cancel,
        ).run(prompt, ())
        try:
            for event in events:
                fold.add(event)
                view.show(event)
        except KeyboardInterrupt:  # a second Ctrl-C: keep the partial answer's line whole
            view.writer.end()
            raise
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
    if way is not None:
        way.finish_fold(fold, cancelled=cancel.is_set())
    return view.finish(fold.result(), cancelled=cancel.is_set())


def chat_settings(args: argparse.Namespace, config: Config) -> CallSettings:
    """The generation options and reasoning switch of ``chat``: its flags over the
    configuration's ``[options]``, and :data:`DEFAULT_MAX_TOKENS` when neither sets
    ``max_tokens``."""
    from ..client._options import merge, resolve
    from ..config._connect import call_defaults

    flags = {"temperature": args.temperature, "max_tokens": args.max_tokens}
    defaults = merge({"max_tokens": DEFAULT_MAX_TOKENS}, call_defaults(config, {}))
    return resolve(merge(defaults, {k: v for k, v in flags.items() if v is not None}))


class _ChatView:
    """What ``chat`` shows of the events as they come, and its last words and exit code."""

    def __init__(self, args: argparse.Namespace, ctx: Context) -> None:
        self.args = args
        self.ctx = ctx
        self.writer = _Writer(ctx.out)
        self.streaming = not args.no_stream
        self.plain = self.streaming and not args.json  # text as it arrives, for people
        self.err_tty = isatty(ctx.err)
        self.thinking_open = False
        # Warnings that came while an answer line was open on stdout: printed once that line
        # ends, so that on one terminal a warning never runs on from the answer's last word.
        self.pending_warnings: list[str] = []

    def show(self, event: ChatEvent) -> None:
        from ..types import TextEvent, ThinkingEvent, WarningEvent

        args, err = self.args, self.ctx.err
        if args.json and self.streaming:
            emit_json(self.ctx.out, _event_json(event))
        if isinstance(event, TextEvent) and self.plain:
            if self.thinking_open:
                err.write("\n")
                self.thinking_open = False
            self.writer.text(event.value)
        elif isinstance(event, ThinkingEvent) and args.show_thinking and self.plain:
            err.write(f"{_DIM}{event.value}{_RESET}" if self.err_tty else event.value)
            err.flush()
            self.thinking_open = True
        elif isinstance(event, WarningEvent) and not args.json:
            if self.writer.at_line_start:
                self.ctx.say(f"warning: {event.message}")
            else:
                self.pending_warnings.append(event.message)

    def finish(self, folded: Folded, *, cancelled: bool) -> int:
        """Print what waited for the end (``--no-stream``); the exit code."""
        args, ctx = self.args, self.ctx
        reason, error = folded.finish or "error", folded.error
        if self.thinking_open:
            ctx.err.write("\n")
        if not self.streaming and args.json:
            emit_json(
                ctx.out,
                {
                    "type": "result",
                    "content": folded.text,
                    "thinking": folded.thinking or None,
                    "reason": reason,
                    "error": plain(error),
                },
            )
        elif not self.streaming:
            if args.show_thinking and folded.thinking:
                ctx.say(folded.thinking)
            self.writer.text(folded.text)
        self.writer.end()
        for message in self.pending_warnings:
            ctx.say(f"warning: {message}")
        if reason == "cancelled" or cancelled:
            ctx.say(f"{PROG}: cancelled")
            return EXIT_INTERRUPTED
        if error is not None:
            if getattr(args, "debug", False):
                _print_failure(ctx.err, folded.exception)
            ctx.err.write(error_line(error.message, error.code))
            return EXIT_ERROR
        if reason != "complete":
            ctx.err.write(error_line(f"the chat ended with {reason}", "LLM_BAD_RESPONSE"))
            return EXIT_ERROR
        if not folded.text.strip():
            ctx.err.write(error_line("the model returned an empty answer", "LLM_BAD_RESPONSE"))
            return EXIT_ERROR
        return EXIT_OK


def _print_failure(err: TextIO, failure: BaseException | None) -> None:
    """The traceback behind an error event (``--debug``), or why there is none."""
    if failure is None:
        err.write("(no traceback: the error arrived as data from the server, not raised)\n")
    else:
        err.write(printable("".join(traceback.format_exception(failure))))


def _event_json(event: ChatEvent) -> dict[str, Any]:
    data = plain(event)
    return {"type": event.type, **data}
