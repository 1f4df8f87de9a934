"""Turning a list of prompts into a batch input file (``ollm-lite batch make``).

A ``.csv`` file is read as a table with a header row: the prompt is the column named by
``column`` (default: a column called ``prompt``, else the only column), and a ``custom_id``
column, when there is one, gives the ids. Any other file is plain text, one prompt a line
(blank lines skipped). Ids default to ``prompt-<line number>``: stable, so regenerating the
input from the same prompts keeps resuming the same output.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import tempfile
from collections.abc import Iterable
from typing import Any

from ._format import CHAT_URL, BatchFileError

__all__ = ["make_input", "prompts_from"]


def prompts_from(path: str, *, column: str | None = None) -> list[tuple[str, str]]:
    """``(custom_id, prompt)`` pairs from a text or CSV file.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` for an unreadable file, an unknown column or no
            prompts at all.
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise BatchFileError(
            f"cannot read prompts from {path}: {exc}", details={"path": path}
        ) from exc
    if path.lower().endswith(".csv"):
        pairs = _from_csv(text, path, column)
    else:
        if column is not None:
            raise BatchFileError(
                f"--column applies to a .csv file, and {path} is read as text (one prompt a line)",
                details={"path": path},
            )
        pairs = [
            (f"prompt-{n}", line.rstrip("\r"))
            for n, line in enumerate(text.split("\n"), start=1)
            if line.strip()
        ]
    if not pairs:
        raise BatchFileError(f"{path} holds no prompts", details={"path": path})
    return pairs


def _from_csv(text: str, path: str, column: str | None) -> list[tuple[str, str]]:
    reader = csv.DictReader(io.StringIO(text))
    fields = reader.fieldnames or []
    if column is None:
        if "prompt" in fields:
            column = "prompt"
        elif len([f for f in fields if f != "custom_id"]) == 1:
            column = next(f for f in fields if f != "custom_id")
        else:
            raise BatchFileError(
                f"{path} has several columns ({', '.join(fields)}): choose one with --column",
                details={"path": path},
            )
    if column not in fields:
        raise BatchFileError(
            f"{path} has no column {column!r} (columns: {', '.join(fields) or 'none'})",
            details={"path": path},
        )
    pairs = []
    seen: set[str] = set()
    for row in reader:
        prompt = row.get(column) or ""
        if not prompt.strip():
            continue
        row_id = (row.get("custom_id") or "").strip() or f"prompt-{reader.line_num}"
        if row_id in seen:
            raise BatchFileError(
                f"{path}: custom_id {row_id!r} appears twice (line {reader.line_num})",
                details={"path": path},
            )
        seen.add(row_id)
        pairs.append((row_id, prompt))
    return pairs


def _lines(
    pairs: Iterable[tuple[str, str]], model: str | None, system: str | None
) -> Iterable[bytes]:
    for custom_id, prompt in pairs:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        body: dict[str, Any] = {"model": model} if model else {}
        body["messages"] = messages
        line = {"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body}
        yield json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"


def make_input(
    source: str,
    output: str,
    *,
    column: str | None = None,
    model: str | None = None,
    system: str | None = None,
) -> int:
    """Write a batch input file of chat requests, one per prompt of ``source``.

    Args:
        source: A ``.csv`` file (see ``column``) or a text file with one prompt a line.
        output: The JSONL file to write (replaced atomically).
        column: The CSV column holding the prompts.
        model: ``body.model`` of every line (left out when ``None``: the run's model is used).
        system: A system message put before every prompt.

    Returns:
        The number of lines written.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` (see :func:`prompts_from`; also an unwritable
            output).
    """
    pairs = prompts_from(source, column=column)
    directory = os.path.dirname(os.path.abspath(output))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".batch-input-", suffix=".tmp", dir=directory)
    except OSError as exc:
        raise BatchFileError(f"cannot write {output}: {exc}", details={"path": output}) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.writelines(_lines(pairs, model, system))
        os.replace(tmp, output)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise BatchFileError(f"cannot write {output}: {exc}", details={"path": output}) from exc
    return len(pairs)
