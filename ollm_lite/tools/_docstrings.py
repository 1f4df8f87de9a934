"""Tool descriptions from docstrings: the summary and the per-argument texts.

Google (``Args:``), reST (``:param name:``) and NumPy (``Parameters`` underlined) styles are
understood. ``@tool`` uses :func:`parse_docstring` for the description the model is shown and
for each parameter's ``description`` in the schema.
"""

from __future__ import annotations

import inspect
import re

__all__ = ["parse_docstring"]

# "Attributes" documents the fields of a dataclass or TypedDict used as a parameter type.
_GOOGLE_ARGS = {
    "args",
    "arguments",
    "parameters",
    "params",
    "keyword args",
    "keyword arguments",
    "attributes",
}
_GOOGLE_HEADER = re.compile(
    r"^(args|arguments|parameters|params|keyword args|keyword arguments|other parameters|"
    r"returns?|yields?|raises|exceptions?|examples?|notes?|attributes|see also|warnings?|"
    r"references|todo)\s*:\s*$",
    re.IGNORECASE,
)
_NUMPY_UNDERLINE = re.compile(r"^-{3,}\s*$")
_REST_FIELD = re.compile(r"^:(\w+)([^:]*):\s*(.*)$")
_GOOGLE_ENTRY = re.compile(r"^\**(\w+)\s*(?:\(([^)]*)\))?\s*:\s*(.*)$")
_NUMPY_ENTRY = re.compile(r"^\**(\w+)\s*(?::\s*(.*))?$")


def parse_docstring(doc: str | None) -> tuple[str | None, dict[str, str]]:
    """Split a docstring into the description and the per-argument texts.

    Google (``Args:``), reST (``:param name:``) and NumPy (``Parameters`` underlined) styles
    are understood; continuation lines are joined with single spaces.

    Args:
        doc: The docstring (``inspect.getdoc`` form or raw), or ``None``.

    Returns:
        ``(description, {argument: text})``; the description is the text before the first
        section, ``None`` when there is none.
    """
    if not doc or not doc.strip():
        return None, {}
    lines = inspect.cleandoc(doc).splitlines()
    desc: list[str] = []
    args: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if _GOOGLE_HEADER.match(stripped) and not line[:1].isspace():
            section = stripped.rstrip(":").strip().lower()
            i = _google_section(lines, i + 1, args if section in _GOOGLE_ARGS else None)
            continue
        if stripped and _NUMPY_UNDERLINE.match(nxt.strip()) and not line[:1].isspace():
            section = stripped.lower()
            i = _numpy_section(lines, i + 2, args if section in _GOOGLE_ARGS else None)
            continue
        if _REST_FIELD.match(stripped):
            i = _rest_field(lines, i, args)
            continue
        if not args:  # text after the sections is not part of the description
            desc.append(line)
        i += 1
    text = "\n".join(desc).strip()
    return (text or None), args


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google_section(lines: list[str], i: int, out: dict[str, str] | None) -> int:
    """Read the indented block after a ``Header:`` line; entries go to ``out``."""
    entry_indent: int | None = None
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        if line.strip():
            ind = _indent(line)
            if entry_indent is None:
                entry_indent = ind  # 0 when the header was the docstring's first line
            if ind == 0 and (entry_indent > 0 or _GOOGLE_HEADER.match(line.strip())):
                break
            m = _GOOGLE_ENTRY.match(line.strip()) if ind <= entry_indent else None
            if m and out is not None:
                current = m.group(1)
                out[current] = m.group(3).strip()
            elif current is not None and out is not None:
                out[current] = f"{out[current]} {line.strip()}".strip()
        i += 1
    return i


def _numpy_section(lines: list[str], i: int, out: dict[str, str] | None) -> int:
    """Read a NumPy section (``name : type`` lines, indented descriptions) up to the next one."""
    current: str | None = None
    while i < len(lines):
        line = lines[i]
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.strip() and _indent(line) == 0 and _NUMPY_UNDERLINE.match(nxt.strip()):
            break
        if line.strip() and _indent(line) == 0:
            m = _NUMPY_ENTRY.match(line.strip())
            current = m.group(1) if m else None
            if current is not None and out is not None:
                out.setdefault(current, "")
        elif line.strip() and current is not None and out is not None:
            out[current] = f"{out[current]} {line.strip()}".strip()
        i += 1
    return i


def _rest_field(lines: list[str], i: int, out: dict[str, str]) -> int:
    """Read one ``:field arg: text`` entry and its indented continuation lines."""
    m = _REST_FIELD.match(lines[i].strip())
    assert m is not None
    kind, rest, text = m.group(1).lower(), m.group(2).split(), m.group(3).strip()
    i += 1
    while i < len(lines) and lines[i].strip() and _indent(lines[i]) > 0:
        text = f"{text} {lines[i].strip()}"
        i += 1
    if kind in {"param", "parameter", "arg", "argument", "key", "keyword"} and rest:
        out[rest[-1]] = text
    return i
