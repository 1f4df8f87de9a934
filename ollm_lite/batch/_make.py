"""Turning a list of prompts into a batch input file (``ollm-lite batch make``).

A ``.csv`` file is read as a table with a header row: the prompt is the column named by
``column`` (default: a column called ``prompt``, else the only column), and the ids come from
the column named by ``id_column`` (every row must have its own) or, without one, from a
``custom_id`` column when there is one. Any other file is plain text, one prompt a line
(blank lines skipped). Ids default to ``prompt-<line number>``: stable, so regenerating the
input from the same prompts keeps resuming the same output.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import stat
import tempfile
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, BinaryIO

from ._format import CHAT_URL, MAX_CUSTOM_ID, MAX_LINE, BatchFileError, iter_lines
from ._output import open_regular

__all__ = ["make_input", "prompts_from"]


def prompts_from(
    path: str, *, column: str | None = None, id_column: str | None = None
) -> list[tuple[str, str]]:
    """``(custom_id, prompt)`` pairs from a text or CSV file.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` for an unreadable file, an unknown column, an
            empty or repeated id (naming its row), or no prompts at all.
    """
    is_csv = path.lower().endswith(".csv")
    for flag, given in (("--column", column), ("--id-column", id_column)):
        if not is_csv and given is not None:
            raise BatchFileError(
                f"{flag} applies to a .csv file, and {path} is read as text (one prompt a line)",
                details={"path": path},
            )
    fd = open_regular(path, os.O_RDONLY | getattr(os, "O_BINARY", 0), "prompts file")
    try:
        with open(fd, "rb") as f:
            lines = _text_lines(f, path)
            if is_csv:
                pairs = _from_csv(lines, path, column, id_column)
            else:
                pairs = [
                    (f"prompt-{n}", line.rstrip("\r\n"))
                    for n, line in enumerate(lines, start=1)
                    if line.strip()
                ]
    except OSError as exc:
        raise BatchFileError(
            f"cannot read prompts from {path}: {exc.strerror or exc}", details={"path": path}
        ) from exc
    if not pairs:
        raise BatchFileError(f"{path} holds no prompts", details={"path": path})
    return pairs


def _text_lines(f: BinaryIO, path: str) -> Iterator[str]:
    """The lines of a UTF-8 file, ``\\n`` kept, each at most :data:`MAX_LINE` bytes."""
    for lineno, (raw, _, terminated) in enumerate(iter_lines(f), start=1):
        if raw is None:
            raise BatchFileError(
                f"{path}, line {lineno}: longer than {MAX_LINE} bytes, the line limit of a "
                "batch file",
                details={"path": path, "line": lineno},
            )
        try:
            text = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError as exc:
            raise BatchFileError(
                f"{path}, line {lineno}: not UTF-8 ({exc.reason})",
                details={"path": path, "line": lineno},
            ) from None
        yield text + "\n" if terminated else text


@contextlib.contextmanager
def _csv_fields_up_to_a_line() -> Iterator[None]:
    """Let ``csv`` read fields up to :data:`MAX_LINE` (its default stops at 128 KiB).

    ``csv.field_size_limit`` is process-wide: it is only ever raised here (never lowered
    under anyone) and put back as it was on leaving.
    """
    with _CSV_LIMIT_LOCK:
        previous = csv.field_size_limit()
        csv.field_size_limit(max(previous, MAX_LINE))
        try:
            yield
        finally:
            csv.field_size_limit(previous)


_CSV_LIMIT_LOCK = threading.Lock()


def _from_csv(
    lines: Iterable[str], path: str, column: str | None, id_column: str | None
) -> list[tuple[str, str]]:
    with _csv_fields_up_to_a_line():
        try:
            return _read_csv(lines, path, column, id_column)
        except csv.Error as exc:
            raise BatchFileError(
                f"{path}: not a valid CSV file ({exc})", details={"path": path}
            ) from None


def _read_csv(
    lines: Iterable[str], path: str, column: str | None, id_column: str | None
) -> list[tuple[str, str]]:
    reader = csv.DictReader(lines)
    fields = reader.fieldnames or []
    ids = id_column or "custom_id"
    if id_column is not None and id_column not in fields:
        raise _no_column(path, id_column, fields)
    if column is None:
        if "prompt" in fields:
            column = "prompt"
        elif len([f for f in fields if f != ids]) == 1:
            column = next(f for f in fields if f != ids)
        else:
            raise BatchFileError(
                f"{path} has several columns ({', '.join(fields)}): choose one with --column",
                details={"path": path},
            )
    if column not in fields:
        raise _no_column(path, column, fields)
    pairs = []
    seen: dict[str, int] = {}
    for where, row in _numbered(reader):
        prompt = row.get(column) or ""
        if not prompt.strip():
            continue
        row_id = (row.get(ids) or "").strip()
        if not row_id:
            if id_column is not None:
                raise _row_error(path, where, f"the {id_column!r} column is empty")
            row_id = f"prompt-{reader.reader.line_num}"  # the line the row ends on
        if row_id in seen:
            raise _row_error(path, where, f"custom_id {row_id!r} is already on row {seen[row_id]}")
        seen[row_id] = where[0]
        pairs.append((row_id, prompt))
    return pairs


def _numbered(reader: csv.DictReader[str]) -> Iterator[tuple[tuple[int, int], dict[str, str]]]:
    """The rows after the header, each with ``(row, line)``: its number as a spreadsheet shows
    it (the header is row 1, a blank line is an empty row) and the file line it starts on
    (they differ after a cell of several lines)."""
    fields = reader.fieldnames or []
    raw = reader.reader  # not DictReader's own iteration, which hides blank lines
    row_number = end = raw.line_num
    for values in raw:
        row_number += 1
        where = (row_number, end + 1)
        end = raw.line_num
        if values:
            yield where, dict(zip(fields, values, strict=False))


def _no_column(path: str, column: str, fields: Sequence[str]) -> BatchFileError:
    return BatchFileError(
        f"{path} has no column {column!r} (columns: {', '.join(fields) or 'none'})",
        details={"path": path},
    )


def _row_error(path: str, where: tuple[int, int], message: str) -> BatchFileError:
    row, line = where
    at = f"row {row}" if row == line else f"row {row} (line {line})"
    return BatchFileError(
        f"{path}, {at}: {message} (every row needs an id of its own)",
        details={"path": path, "row": row, "line": line},
    )


def _lines(
    pairs: Iterable[tuple[str, str]], model: str | None, system: str | None
) -> Iterable[bytes]:
    for custom_id, prompt in pairs:
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        body: dict[str, Any] = {"model": model} if model else {}
        body["messages"] = messages
        line = {"custom_id": custom_id, "method": "POST", "url": CHAT_URL, "body": body}
        encoded = json.dumps(line, ensure_ascii=False).encode("utf-8")
        if len(encoded) > MAX_LINE or len(custom_id) > MAX_CUSTOM_ID:
            what = "custom_id" if len(custom_id) > MAX_CUSTOM_ID else "line"
            raise BatchFileError(
                f"the prompt with custom_id {custom_id[:80]!r} makes a {what} longer than "
                f"batch run accepts ({MAX_CUSTOM_ID} characters for a custom_id, {MAX_LINE} "
                "bytes for a line)",
                details={"custom_id": custom_id[:80]},
            )
        yield encoded + b"\n"


def _check_replaceable(output: str) -> None:
    """Refuse an output that exists and is no regular file: replacing a device or a FIFO by
    the new input file would destroy it (``/dev/null`` given by a superuser)."""
    try:
        mode = os.stat(output).st_mode
    except (OSError, ValueError):
        return  # missing (created), or refused when the file is written
    if not stat.S_ISREG(mode):
        raise BatchFileError(
            f"cannot write {output}: not a regular file (a directory, device or FIFO)",
            details={"path": output},
        )


def make_input(
    source: str,
    output: str,
    *,
    column: str | None = None,
    model: str | None = None,
    system: str | None = None,
    id_column: str | None = None,
) -> int:
    """Write a batch input file of chat requests, one per prompt of ``source``.

    Args:
        source: A ``.csv`` file (see ``column``) or a text file with one prompt a line.
        output: The JSONL file to write (replaced atomically).
        column: The CSV column holding the prompts.
        id_column: The CSV column holding each line's ``custom_id`` (an empty or repeated one
            is refused, naming its row); ``None``: a ``custom_id`` column if there is one,
            else ``prompt-<line number>``.
        model: ``body.model`` of every line (left out when ``None``: the run's model is used).
        system: A system message put before every prompt.

    Returns:
        The number of lines written.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` (see :func:`prompts_from`; also an unwritable
            output).
    """
    pairs = prompts_from(source, column=column, id_column=id_column)
    _check_replaceable(output)
    directory = os.path.dirname(os.path.abspath(output))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".batch-input-", suffix=".tmp", dir=directory)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise BatchFileError(f"cannot write {output}: {exc}", details={"path": output}) from exc
    try:
        with os.fdopen(fd, "wb") as out:
            out.writelines(_lines(pairs, model, system))
        os.replace(tmp, output)
    except BaseException as exc:  # a refused prompt included: no temporary file is left
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError | ValueError) and not isinstance(exc, BatchFileError):
            raise BatchFileError(f"cannot write {output}: {exc}", details={"path": output}) from exc
        raise
    return len(pairs)
