"""Summarise a log file (or any text on stdin) with a local model: a script for cron.

Reads FILE (at most the last ``--lines`` lines) or stdin, keeps the most recent lines that fit
the model's context window with room for the answer (the library counts them with the server's
own tokenizer where it has one), asks the configured model for a short summary and prints it,
or appends it with a time stamp to ``--out``. Exit codes follow ``ollm-lite``: 0 ok, 1 error
(one line on stderr with the error's code, so cron's mail says what went wrong) -- an empty
summary is an error too.

The provider, server and model come from the usual configuration (flags are not needed):
``~/.config/ollm/config.toml`` and the environment variables ``OLLM_PROVIDER``, ``OLLM_MODEL``,
``OLLAMA_HOST``, ``OPENAI_COMPATIBLE_HOST``...

Against the quick-start llama.cpp server (``start`` writes that configuration)::

    python3 scripts/llamacpp.py start
    python examples/cron_summarise.py /var/log/dpkg.log

Against Ollama (after ``ollama pull llama3.2``)::

    OLLM_PROVIDER=ollama OLLM_MODEL=llama3.2 python examples/cron_summarise.py /var/log/syslog

A crontab entry (every morning at 07:00)::

    0 7 * * * python3 /path/to/cron_summarise.py /var/log/syslog --out ~/summaries.txt
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

import ollm_lite
from ollm_lite import Client, Message, OllmError, ProviderRequest
from ollm_lite.errors import BadResponse
from ollm_lite.tokens import FittedLines, TokenCounter

SYSTEM = (
    "You summarise logs for a busy administrator. Answer with at most five short bullet "
    "points: errors and warnings first, then anything unusual. No preamble."
)
PROMPT = "Summarise this log:\n\n"
#: Room left in the window for the summary (also its length limit).
ANSWER_TOKENS = 256


def tail(path: Path | None, lines: int) -> list[str]:
    """The last ``lines`` lines of ``path`` (stdin when ``None``)."""
    if path is None:
        return list(deque(sys.stdin, maxlen=lines))
    with path.open(encoding="utf-8", errors="replace") as handle:
        return list(deque(handle, maxlen=lines))


def fit(lines: list[str], llm: Client) -> FittedLines:
    """The most recent ``lines`` whose request fits the model's window with the answer.

    Raises:
        OllmError: not even the last line fits (or the server cannot be asked).
    """
    model = llm.resolved_model()
    counter = TokenCounter(llm.provider, context_limits=llm.context_limits)

    def request(text: str) -> ProviderRequest:
        return ProviderRequest(model, [Message.system(SYSTEM), Message.user(PROMPT + text)])

    fitted = counter.last_lines_that_fit(lines, request, reserve=ANSWER_TOKENS)
    if lines and not fitted.kept:
        raise OllmError(f"not even the last line fits {model}'s context window")
    return fitted


def summarise(text: str, llm: Client) -> str:
    """The model's summary of ``text``.

    Raises:
        OllmError: whatever the provider reported (its stable ``code`` says what), or an
            empty summary (``LLM_BAD_RESPONSE``): a blank report must not look like success.
    """
    summary = llm.ask(PROMPT + text, system=SYSTEM, max_tokens=ANSWER_TOKENS, temperature=0.2)
    if not summary.strip():
        raise BadResponse("the model returned an empty summary")
    return summary.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Summarise a log with a local model.")
    parser.add_argument("file", nargs="?", type=Path, help="the log (default: stdin)")
    parser.add_argument(
        "--lines",
        type=int,
        default=200,
        help="read at most this many last lines (fewer if the model's window is smaller)",
    )
    parser.add_argument("--out", type=Path, help="append the summary to this file")
    args = parser.parse_args(argv)
    try:
        lines = tail(args.file, args.lines)
        if not "".join(lines).strip():
            print("cron_summarise: nothing to summarise", file=sys.stderr)
            return 0
        with ollm_lite.connect() as llm:
            fitted = fit(lines, llm)
            if fitted.dropped:
                print(
                    f"cron_summarise: the model's window holds the last {fitted.kept} of "
                    f"{fitted.total} lines; summarising those",
                    file=sys.stderr,
                )
            summary = summarise(fitted.text, llm)
    except OllmError as exc:
        print(f"cron_summarise: error [{exc.code}]: {exc.message}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"cron_summarise: error: {exc}", file=sys.stderr)
        return 1
    if args.out is None:
        print(summary)
    else:
        stamp = datetime.now().isoformat(timespec="seconds")
        with args.out.open("a", encoding="utf-8") as handle:
            handle.write(f"## {stamp} {args.file or 'stdin'}\n{summary}\n\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
