"""Text from servers made safe to print on a terminal.

What an MCP server or a model server says (tool descriptions, error messages, a stderr
tail) reaches the CLI's output; escape sequences in it would clear the screen, retitle the
window, recolour the terminal or hide text. :func:`printable` removes ANSI escape sequences
whole (CSI and OSC, 7- and 8-bit forms) and every other control character: C0 but tab and
line feed, DEL and C1 (ECMA-48). A model's streamed answer is printed as it is.
Standard library only.
"""

from __future__ import annotations

import logging
import re

__all__ = ["PrintableFormatter", "printable"]

_SEQUENCES = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]"  # CSI ... final byte
    r"|(?:\x1b\]|\x9d)[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"  # OSC ... BEL or ST
    r"|\x1b[ -/]*[0-~]?"  # any other escape
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` without escape sequences and control characters (tab and line feed kept)."""
    if text.isprintable():
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text))


class PrintableFormatter(logging.Formatter):
    """A formatter whose records (message and traceback) are :func:`printable`."""

    def format(self, record: logging.LogRecord) -> str:
        return printable(super().format(record))
