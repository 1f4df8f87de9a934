"""Every log record of every logger, as text: what the secret canary tests search."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


class Records(logging.Handler):
    """Each record as ``name level message`` with its arguments and any traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record) + repr(record.args))


@contextlib.contextmanager
def captured_records() -> Iterator[Records]:
    """The root logger at DEBUG, recorded, for the block; put back as it was after."""
    root = logging.getLogger()
    handler = Records()
    old = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(old)
