"""An interactive chat you can interrupt: Ctrl-C stops the answer, not the program.

Each answer streams as it arrives. Ctrl-C (or ``--deadline`` seconds passing) sets a
``threading.Event``; the library then interrupts the HTTP read in progress, even when the server
is silent, the partial answer stays on screen and in the history, and you can type the next
message. Ctrl-C at the prompt, Ctrl-D or an empty line quits.

The provider, server and model come from the usual configuration. Against the quick-start
llama.cpp server (``start`` writes that configuration)::

    python3 scripts/llamacpp.py start
    python examples/cancellable_chat.py --deadline 20

Against Ollama::

    OLLM_PROVIDER=ollama OLLM_MODEL=llama3.2 python examples/cancellable_chat.py
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any, TextIO

import ollm_lite
from ollm_lite import OllmError, Session


def answer(
    chat: Session,
    text: str,
    cancel: threading.Event,
    deadline: float | None = None,
    out: TextIO = sys.stdout,
) -> str:
    """Stream one answer to ``out``; returns ``complete``, ``cancelled`` or ``error``.

    ``cancel`` may be set from anywhere (a signal handler, another thread); ``deadline``
    seconds set it automatically. The stream simply ends when it is set; the partial answer
    stays in the session's history.
    """
    timer = threading.Timer(deadline, cancel.set) if deadline else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    reason = "complete"
    try:
        for piece in chat.stream(text, cancel=cancel):
            out.write(piece)
            out.flush()
        if cancel.is_set():
            reason = "cancelled"
    except OllmError as exc:
        out.write(f"\n[error {exc.code}: {exc.message}]")
        reason = "error"
    finally:
        if timer is not None:
            timer.cancel()
    out.write(" [stopped]\n" if reason == "cancelled" else "\n")
    return reason


def _setter(cancel: threading.Event) -> Any:
    def on_sigint(signum: int, frame: Any) -> None:
        cancel.set()

    return on_sigint


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Chat; Ctrl-C stops the current answer.")
    parser.add_argument("--system", help="system prompt")
    parser.add_argument("--deadline", type=float, help="stop any answer after this many seconds")
    args = parser.parse_args(argv)
    chat = ollm_lite.connect().session(system=args.system)
    while True:
        try:
            text = input("you> ").strip()
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if not text:
            return 0
        cancel = threading.Event()
        previous = signal.signal(signal.SIGINT, _setter(cancel))
        try:
            answer(chat, text, cancel, args.deadline)
        finally:
            signal.signal(signal.SIGINT, previous)


if __name__ == "__main__":
    raise SystemExit(main())
