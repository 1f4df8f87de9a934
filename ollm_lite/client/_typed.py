"""Typed answers: a schema from a type, the model's JSON checked and converted.

``ask(prompt, schema=T)`` accepts a dataclass, a ``TypedDict`` (any annotation ``@tool``
understands, in fact) or a JSON Schema ``dict``. :func:`answer_spec` builds the JSON Schema
sent as the request's structured-output format, with the same type-hint → schema code as
``@tool`` (objects close with ``additionalProperties: false``, as OpenAI's strict mode
requires, so an invented key is caught). :func:`parse_answer` reads the model's text (a JSON
value, also inside a Markdown code fence), validates it against the schema with the same
validator that checks tool arguments, and converts it: a dataclass instance for a dataclass,
the JSON data for a ``TypedDict`` or a schema ``dict``. No dependency beyond the stdlib.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigError
from ..tools._calls import value_for_type
from ..tools._schema import ToolDefinitionError, schema_for_type
from ..tools._validation import validate_arguments

__all__ = ["AnswerSpec", "answer_spec", "correction_prompt", "parse_answer"]

_FENCE = re.compile(r"^\s*```[A-Za-z0-9_-]*\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)
_NOT_JSON = "the answer is not valid JSON"
_CONSTANT = "the answer holds NaN or Infinity, which JSON does not allow (use a number or null)"


class _Constant(ValueError):
    """``NaN``, ``Infinity``, ``-Infinity``: Python's :mod:`json` reads them; RFC 8259 has none."""


def _reject_constant(name: str) -> Any:
    raise _Constant(name)


_DECODER = json.JSONDecoder(parse_constant=_reject_constant)


@dataclass(frozen=True, slots=True)
class AnswerSpec:
    """What a typed answer must look like and how to build the value.

    Attributes:
        schema: The JSON Schema sent to the server and checked locally.
        convert: JSON data → the value ``ask`` returns.
        name: The type's name, for messages.
    """

    schema: dict[str, Any]
    convert: Callable[[Any], Any]
    name: str


def answer_spec(schema: Any) -> AnswerSpec:
    """The spec for ``schema=``: a dataclass, a ``TypedDict``, an annotation or a JSON Schema.

    Raises:
        ConfigError: ``CONFIG_INVALID`` when ``schema`` is none of those.
    """
    if isinstance(schema, dict):
        return AnswerSpec(copy.deepcopy(schema), copy.deepcopy, str(schema.get("title", "JSON")))
    if dataclasses.is_dataclass(schema) and not isinstance(schema, type):
        raise ConfigError("schema= takes the dataclass itself, not an instance of it")
    try:
        built = schema_for_type(schema)
    except ToolDefinitionError as exc:
        raise ConfigError(
            f"schema= must be a dataclass, a TypedDict or a JSON Schema dict: {exc}"
        ) from exc
    if not built:
        raise ConfigError(f"schema= {schema!r} says nothing about the answer's shape")
    name = getattr(schema, "__name__", None) or str(schema)

    def convert(value: Any) -> Any:
        return value_for_type(value, schema)

    return AnswerSpec(_closed(built), convert, name)


def _closed(schema: Any) -> Any:
    """Every object schema with properties gets ``additionalProperties: false``."""
    if isinstance(schema, list):
        return [_closed(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _closed(v) for k, v in schema.items()}
    if "properties" in out and "additionalProperties" not in out:
        out["additionalProperties"] = False
    return out


def parse_answer(text: str, spec: AnswerSpec) -> tuple[Any, list[str]]:
    """The converted value and ``[]``, or ``None`` and the problems found.

    Never raises: text that is no JSON, data the schema rejects and data the type's
    constructor rejects all come back as messages for the corrective retry.
    """
    data, problem = _json_value(text)
    if problem is not None:
        return None, [problem]
    errors = validate_arguments(data, spec.schema)
    if errors:
        return None, [e.replace("argument ", "field ", 1) for e in errors]
    try:
        return spec.convert(data), []
    except Exception as exc:  # a __post_init__ or an Enum lookup rejecting the data
        return None, [f"the answer does not make a {spec.name}: {type(exc).__name__}: {exc}"]


def _json_value(text: str) -> tuple[Any, str | None]:
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        return None, "the answer was empty; a JSON value was expected"
    problem = _NOT_JSON
    try:
        return _DECODER.decode(body), None
    except _Constant:
        problem = _CONSTANT
    except (ValueError, RecursionError):
        pass
    start = min((i for i in (body.find("{"), body.find("[")) if i >= 0), default=-1)
    if start >= 0:  # prose around the JSON: take the first complete value
        try:
            value, _ = _DECODER.raw_decode(body[start:])
            return value, None
        except _Constant:
            problem = _CONSTANT
        except (ValueError, RecursionError):
            pass
    return None, problem


def correction_prompt(errors: list[str], spec: AnswerSpec) -> str:
    """The user message asking the model to fix an answer that did not validate."""
    problems = "; ".join(errors[:10])
    schema = json.dumps(spec.schema, ensure_ascii=False, separators=(",", ":"))
    return (
        f"Your answer did not match the required format ({problems}). Reply again with only "
        f"a JSON value matching this JSON Schema, nothing else: {schema}"
    )
