"""Summarise a log file (or any text on stdin) with a local model: a script for cron.

Reads FILE (the last ``--lines`` lines) or stdin, asks the configured model for a short
summary and prints it, or appends it with a time stamp to ``--out``. Exit codes follow
``ollm-lite``: 0 ok, 1 error (one line on stderr, so cron's mail says what went wrong).

The provider, server and model come from the usual configuration (flags are not needed):
``~/.config/ollm/config.toml`` and the environment variables ``OLLM_PROVIDER``, ``OLLM_MODEL``,
``OLLAMA_HOST``, ``OPENAI_COMPATIBLE_HOST``...

Against the quick-start llama.cpp server::

    python3 scripts/llamacpp.py start --server py   # prints {"base_url": ..., "pid": ...}
    OLLM_PROVIDER=llamacpp OPENAI_COMPATIBLE_HOST=http://127.0.0.1:PORT OLLM_MODEL=gemma3-270m \\
        python examples/cron_summarise.py /var/log/dpkg.log --lines 100

Against Ollama (after ``ollama pull llama3.2``)::

    OLLM_MODEL=llama3.2 python examples/cron_summarise.py /var/log/syslog

A crontab entry (every morning at 07:00)::

    0 7 * * * OLLM_MODEL=llama3.2 python3 /path/to/cron_summarise.py /var/log/syslog --out ~/s.txt
"""

from __future__ import annotations

import argparse
import sys
from collections import deque
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from ollm_lite import ChatClient, OllmError, default_registry, load_config

SYSTEM = (
    "You summarise logs for a busy administrator. Answer with at most five short bullet "
    "points: errors and warnings first, then anything unusual. No preamble."
)


def tail(path: Path | None, lines: int) -> str:
    """The last ``lines`` lines of ``path`` (stdin when ``None``)."""
    if path is None:
        return "".join(deque(sys.stdin, maxlen=lines))
    with path.open(encoding="utf-8", errors="replace") as handle:
        return "".join(deque(handle, maxlen=lines))


def summarise(text: str, client: ChatClient) -> str:
    """The model's summary of ``text``.

    Raises:
        OllmError: whatever the provider reported (its stable ``code`` says what).
    """
    result = client.conversation(system_prompt=SYSTEM).run(f"Summarise this log:\n\n{text}")
    if result.phase != "completed" or result.text is None:
        error = result.error
        raise OllmError(error.message if error else f"the summary ended: {result.phase}")
    return result.text.strip()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Summarise a log with a local model.")
    parser.add_argument("file", nargs="?", type=Path, help="the log (default: stdin)")
    parser.add_argument("--lines", type=int, default=200, help="how many last lines to read")
    parser.add_argument("--out", type=Path, help="append the summary to this file")
    args = parser.parse_args(argv)
    try:
        text = tail(args.file, args.lines)
        if not text.strip():
            print("cron_summarise: nothing to summarise", file=sys.stderr)
            return 0
        config = load_config()
        client = ChatClient(default_registry(config), model=config.model)
        summary = summarise(text, client)
    except (OllmError, OSError) as exc:
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
