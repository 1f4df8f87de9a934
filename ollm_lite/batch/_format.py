"""The OpenAI batch file format: reading input lines, writing and reading output lines.

Input, one JSON object a line (OpenAI's Batch API,
https://platform.openai.com/docs/guides/batch, and vLLM's ``run-batch``,
``vllm/entrypoints/openai/run_batch.py`` ``BatchRequestInput``)::

    {"custom_id": "t-1", "method": "POST", "url": "/v1/chat/completions", "body": {...}}

Output, one line per input line, in completion order, always with all four keys (vLLM's
``BatchRequestOutput``; OpenAI's ``request-output`` object,
https://platform.openai.com/docs/api-reference/batch/request-output)::

    {"id": "batch_req_…", "custom_id": "t-1",
     "response": {"status_code": 200, "request_id": "req_…", "body": {<chat.completion>}},
     "error": null}

Failures, where OpenAI and vLLM disagree (vLLM puts a bare string in ``error`` and invents a
400), follow one rule: a server's HTTP error keeps its status and the server's error
object in ``response`` and adds ``error = {code, message}``; a failure with no HTTP answer
(connection refused, timeout) has ``response = null`` and ``error = {code, message}`` with the
library's stable error code.

Everything here is pure: bytes, open binary files and dicts in, bytes and dicts out. Invalid
input is reported all at once (up to :data:`MAX_PROBLEMS` problems, each with its line number)
as a :class:`BatchFileError` before anything is sent.

Bounded lines: files are read as streams of lines of at most :data:`MAX_LINE` bytes (the limit
the stream decoders put on a server's lines), never whole; a longer input line is a problem
of its own, and an output line that would be longer is written as that line's error instead,
so every output line can be read back on resume. JSON is strict: ``NaN`` and ``Infinity``
(which Python's :mod:`json` accepts but RFC 8259 does not) make an input line invalid.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal

from ..errors import BadResponse, ConfigError, OllmError
from ..streams._line_buffer import DEFAULT_MAX_LINE

__all__ = [
    "CHAT_URL",
    "EMBEDDINGS_URL",
    "MAX_CUSTOM_ID",
    "MAX_LINE",
    "MAX_PROBLEMS",
    "SUPPORTED_URLS",
    "BatchFileError",
    "BatchInput",
    "error_line",
    "is_failed",
    "iter_lines",
    "loads_strict",
    "output_line",
    "parse_input",
    "parse_output_line",
    "success_line",
]

CHAT_URL = "/v1/chat/completions"
EMBEDDINGS_URL = "/v1/embeddings"
SUPPORTED_URLS = (CHAT_URL, EMBEDDINGS_URL)
#: Problems listed in one :class:`BatchFileError` before the rest are only counted.
MAX_PROBLEMS = 20
#: Longest line of a batch file, input or output, in bytes (without its ``\\n``).
MAX_LINE = DEFAULT_MAX_LINE
#: Longest ``custom_id``, in characters: an error line, which repeats it, always fits a line.
MAX_CUSTOM_ID = 65536

Endpoint = Literal["/v1/chat/completions", "/v1/embeddings"]


class BatchFileError(ConfigError):
    """A batch input (or an output being resumed) is not a valid batch file.

    ``details["problems"]`` lists ``{"line", "message"}`` objects (1-based line numbers);
    ``details["path"]`` names the file. Raised before any request is sent.
    """


@dataclass(frozen=True, slots=True)
class BatchInput:
    """One request line of a batch input file."""

    custom_id: str
    url: Endpoint
    body: dict[str, Any] = field(hash=False)
    line: int
    """1-based line number in the input file (for messages)."""


def _problem(problems: list[dict[str, Any]], line: int, message: str) -> None:
    problems.append({"line": line, "message": message})


def raise_problems(path: str, problems: list[dict[str, Any]], what: str = "input") -> None:
    """Raise one :class:`BatchFileError` listing ``problems`` (nothing when empty)."""
    if not problems:
        return
    shown = problems[:MAX_PROBLEMS]
    first = shown[0]
    more = f" (and {len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
    raise BatchFileError(
        f"invalid batch {what} file {path}, line {first['line']}: {first['message']}{more}",
        details={"path": path, "problems": shown, "count": len(problems)},
    )


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def loads_strict(raw: bytes | str) -> Any:
    """``json.loads`` without ``NaN``, ``Infinity`` and ``-Infinity`` (RFC 8259 JSON).

    Raises:
        ValueError: not valid JSON (``json.JSONDecodeError`` included).
        RecursionError: nested too deeply.
    """
    return json.loads(raw, parse_constant=_reject_constant)


def iter_lines(f: BinaryIO, max_line: int = MAX_LINE) -> Iterator[tuple[bytes | None, int, bool]]:
    """Each line of a binary file, read as a stream: ``(line, length, terminated)``.

    ``line`` is the line without its ``\\n`` (``None`` when it is longer than ``max_line``
    bytes: it is skipped without being held), ``length`` its length in bytes, ``terminated``
    whether a ``\\n`` ended it (only the last line may lack one). At most ``max_line`` + 1 bytes
    are held at a time.
    """
    while True:
        raw = f.readline(max_line + 1)
        if not raw:
            return
        if raw.endswith(b"\n"):
            yield raw[:-1], len(raw) - 1, True
            continue
        if len(raw) <= max_line:  # the last line, unterminated
            yield raw, len(raw), False
            return
        length = len(raw)
        terminated = False
        while chunk := f.readline(1 << 20):  # the rest of the long line, dropped
            terminated = chunk.endswith(b"\n")
            length += len(chunk) - terminated
            if terminated:
                break
        yield None, length, terminated


def _check_request(obj: Any, lineno: int, problems: list[dict[str, Any]]) -> BatchInput | None:
    if not isinstance(obj, dict):
        _problem(problems, lineno, "a line must be a JSON object")
        return None
    custom_id = obj.get("custom_id")
    if not isinstance(custom_id, str) or not custom_id:
        _problem(problems, lineno, "missing custom_id (a non-empty string)")
        return None
    if len(custom_id) > MAX_CUSTOM_ID:
        _problem(problems, lineno, f"custom_id is longer than {MAX_CUSTOM_ID} characters")
        return None
    method = obj.get("method", "POST")
    if method != "POST":
        _problem(problems, lineno, f"method must be POST, not {method!r}")
        return None
    url = obj.get("url")
    if url not in SUPPORTED_URLS:
        _problem(
            problems,
            lineno,
            f"unsupported url {url!r} (supported: {', '.join(SUPPORTED_URLS)})",
        )
        return None
    body = obj.get("body")
    if not isinstance(body, dict):
        _problem(problems, lineno, "body must be a JSON object")
        return None
    return BatchInput(custom_id, url, body, lineno)


def parse_input(source: bytes | BinaryIO, path: str = "<input>") -> list[BatchInput]:
    """Every request of a batch input file (its bytes, or an open binary file read as a
    stream of lines of at most :data:`MAX_LINE` bytes), validated.

    Blank lines are skipped (as vLLM's reader does); everything else must be a request object
    with a unique, non-empty ``custom_id``, ``method`` ``POST`` (may be left out), a supported
    ``url`` and an object ``body``.

    Raises:
        BatchFileError: ``CONFIG_INVALID`` listing lines that are too long, bad JSON
            (``NaN`` and ``Infinity`` included), missing, too long or duplicate ``custom_id``
            and unsupported ``url`` lines.
    """
    f = io.BytesIO(source) if isinstance(source, bytes | bytearray) else source
    problems: list[dict[str, Any]] = []
    out: list[BatchInput] = []
    first_line: dict[str, int] = {}
    for lineno, (raw, _, _) in enumerate(iter_lines(f), start=1):
        if raw is None:
            _problem(problems, lineno, f"the line is longer than {MAX_LINE} bytes")
            continue
        if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
            raw = raw[3:]
        if not raw.strip():
            continue
        try:
            obj = loads_strict(raw)
        except (ValueError, RecursionError) as exc:
            _problem(problems, lineno, f"not valid JSON ({_short(exc)})")
            continue
        item = _check_request(obj, lineno, problems)
        if item is None:
            continue
        seen = first_line.get(item.custom_id)
        if seen is not None:
            _problem(
                problems,
                lineno,
                f"duplicate custom_id {item.custom_id!r} (first on line {seen})",
            )
            continue
        first_line[item.custom_id] = lineno
        out.append(item)
    raise_problems(path, problems)
    return out


def _short(exc: BaseException) -> str:
    return str(exc).split("\n", 1)[0][:120]


# --------------------------------------------------------------------------- output lines


def _ids() -> tuple[str, str]:
    return f"batch_req_{uuid.uuid4().hex}", f"req_{uuid.uuid4().hex}"


def success_line(custom_id: str, body: dict[str, Any]) -> dict[str, Any]:
    """The output object of a request answered with ``body`` (HTTP 200)."""
    line_id, request_id = _ids()
    return {
        "id": line_id,
        "custom_id": custom_id,
        "response": {"status_code": 200, "request_id": request_id, "body": body},
        "error": None,
    }


def _http_status(error: OllmError) -> int | None:
    status = error.details.get("status")
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return status
    return None


def error_line(custom_id: str, error: OllmError) -> dict[str, Any]:
    """The output object of a failed request.

    With an HTTP answer (``error.details["status"]``): ``response`` keeps the status, and its
    ``body`` is the server's error as OpenAI's error object (``{"error": {"message", "type",
    "param", "code"}}``: the server's own message, type and code where it gave them; ``null``
    when it said nothing); without one: ``response`` is ``null``. ``error`` is always
    ``{"code": <stable library code>, "message": <the library's message>}``.
    """
    line_id, request_id = _ids()
    status = _http_status(error)
    response: dict[str, Any] | None = None
    if status is not None:
        said = error.details.get("server_message")
        body = None
        if isinstance(said, str) and said:
            server = {"message": said, "type": error.details.get("type")}
            server["param"] = None
            server["code"] = error.details.get("code")
            body = {"error": server}
        response = {"status_code": status, "request_id": request_id, "body": body}
    return {
        "id": line_id,
        "custom_id": custom_id,
        "response": response,
        "error": {"code": error.code, "message": error.message},
    }


def parse_output_line(raw: bytes) -> dict[str, Any] | None:
    """An output line as an object, or ``None`` when it is not a complete output record.

    A record is a JSON object with the four keys and a non-empty string ``custom_id``.
    """
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(obj, dict) or not {"id", "custom_id", "response", "error"} <= obj.keys():
        return None
    custom_id = obj.get("custom_id")
    return obj if isinstance(custom_id, str) and custom_id else None


def is_failed(record: dict[str, Any]) -> bool:
    """Whether an output record reports a failure (an ``error``, or a non-2xx status)."""
    if record.get("error") is not None:
        return True
    response = record.get("response")
    if not isinstance(response, dict):
        return True
    status = response.get("status_code")
    return not (isinstance(status, int) and 200 <= status < 300)


def encode_line(record: dict[str, Any]) -> bytes:
    """One output record as a JSONL line (UTF-8, compact, ending in ``\\n``)."""
    text = json.dumps(record, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.encode("utf-8") + b"\n"


def output_line(record: dict[str, Any]) -> tuple[bytes, dict[str, Any]]:
    """The line that carries ``record``, and the record it holds.

    A record JSON cannot carry (a server's answer holding ``NaN``, ``Infinity`` or an unpaired
    surrogate) or whose line would be longer than :data:`MAX_LINE` is replaced by the line's
    error (``LLM_BAD_RESPONSE``), so the line is still answered and the output stays readable.
    """
    try:
        line = encode_line(record)
    except ValueError:  # UnicodeEncodeError included
        problem = "holds NaN, Infinity or an unpaired surrogate, which a JSON line cannot carry"
    else:
        if len(line) <= MAX_LINE + 1:
            return line, record
        problem = f"is longer than the {MAX_LINE}-byte line limit of a batch file"
    error = BadResponse(f"the server's answer {problem}")
    replaced = error_line(record["custom_id"], error)
    return encode_line(replaced), replaced
