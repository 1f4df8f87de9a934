"""Keyword options of the script API: one ``TypedDict``, checked at the call.

``Options`` lists every per-call setting: the :class:`~ollm_lite.types.GenerationOptions`
fields, then the call's own settings (``think``, ``keep_alive``, ``timeout``, ``tool_choice``,
``headers``), which are :class:`~ollm_lite.chat._call_settings.CallSettings` fields. The script
API's methods take them as ``**options: Unpack[Options]``, so editors complete the names and
type checkers flag a typo; at run time :func:`check_names` turns an unknown keyword into a
``TypeError`` naming it (as Python does for any misspelt keyword) and :func:`resolve` checks the
values into the call's settings, raising ``ConfigError`` (``CONFIG_INVALID``) for a bad one.

The generation options are checked by their field's type (a number, a count of at least one),
the others by :data:`_SETTINGS`: a new option is a field, an entry of ``Options`` and, unless its
type says how to check it, one checker here.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from dataclasses import fields
from typing import Any, Literal, TypedDict

from ..chat._call_settings import CallSettings
from ..errors import ConfigError
from ..types import GenerationOptions, Think, ToolChoice

__all__ = ["OPTION_NAMES", "Options", "check_names", "merge", "resolve"]


class Options(TypedDict, total=False):
    """Per-call settings; every key is optional (``None``: the server's default)."""

    temperature: float | None
    """Sampling temperature."""
    max_tokens: int | None
    """Most tokens to generate in one model turn."""
    top_p: float | None
    """Nucleus sampling."""
    top_k: int | None
    """Top-k sampling."""
    repeat_penalty: float | None
    """Penalty for repeated tokens (vLLM ``repetition_penalty``)."""
    seed: int | None
    """Sampling seed, for repeatable answers where the server supports it."""
    stop: str | list[str] | None
    """Stop sequence(s)."""
    presence_penalty: float | None
    """OpenAI-style presence penalty."""
    frequency_penalty: float | None
    """OpenAI-style frequency penalty."""
    extra_body: dict[str, Any] | None
    """Merged verbatim into the request body (nested objects key by key)."""
    think: Think | None
    """Reasoning on (``True``), off (``False``) or an effort level (``"low"`` … ``"high"``)."""
    keep_alive: str | float | None
    """How long the server keeps the model loaded (``"5m"``, seconds; Ollama, LM Studio)."""
    timeout: float | None
    """Total deadline of the whole call in seconds (every turn and tool included)."""
    tool_choice: Literal["auto", "required", "none"] | str | None
    """``"auto"``, ``"required"``, ``"none"`` or a tool's name; the first model turn only."""
    headers: dict[str, str] | None
    """Extra HTTP headers for the call's requests."""


OPTION_NAMES: tuple[str, ...] = tuple(Options.__annotations__)


def check_names(options: Mapping[str, Any], where: str) -> None:
    """Raise ``TypeError`` for the first keyword that is no option (``where``: the method).

    Raises:
        TypeError: ``<where>() got an unexpected keyword argument 'x'`` (with the closest
            option name when one is close).
    """
    for name in options:
        if name not in OPTION_NAMES:
            close = difflib.get_close_matches(name, OPTION_NAMES, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise TypeError(f"{where}() got an unexpected keyword argument {name!r}{hint}")


def merge(defaults: Mapping[str, Any], options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` over ``defaults``; ``extra_body`` and ``headers`` merge key by key."""
    out = dict(defaults)
    for key, value in options.items():
        old = out.get(key)
        if key in ("extra_body", "headers") and isinstance(old, dict) and isinstance(value, dict):
            out[key] = {**old, **value}
        else:
            out[key] = value
    return out


def resolve(options: Mapping[str, Any]) -> CallSettings:
    """Check every value: the generation options and the settings of the call.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the option and the value.
    """
    values = {k: v for k, v in options.items() if v is not None}
    generation = {
        name: check(name, values[name]) for name, check in _GENERATION.items() if name in values
    }
    return CallSettings(
        generation=GenerationOptions(**generation),
        **{name: check(values.get(name)) for name, check in _SETTINGS.items()},
    )


def _number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, not {value!r}")
    return float(value) if isinstance(value, float) else value


def _integer(name: str, value: Any, *, minimum: int | None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{name} must be an integer, not {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, not {value!r}")
    return value


def _count(name: str, value: Any) -> int:
    return _integer(name, value, minimum=1)


def _seed(name: str, value: Any) -> int:
    return _integer(name, value, minimum=None)


def _stop(name: str, value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{name} must be a string or a list of strings, not {value!r}")


def _body(name: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(f"{name} must be a dict, not {type(value).__name__}")
    return dict(value)


def _timeout(value: Any) -> float | None:
    if value is None:
        return None
    timeout = _number("timeout", value)
    if not timeout > 0:
        raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return timeout


def _think(value: Any) -> Think | None:
    if value is None or isinstance(value, bool) or (isinstance(value, str) and value):
        return value
    if isinstance(value, int) and value > 0:  # a thinking budget in tokens (Messages API)
        return value
    raise ConfigError(
        f"think must be True, False, an effort level like 'high' or a token budget, not {value!r}"
    )


def _keep_alive(value: Any) -> str | float | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    raise ConfigError(f"keep_alive must be seconds or a duration like '5m', not {value!r}")


_CHOICES: dict[str, ToolChoice] = {"auto": "auto", "none": "none", "required": "required"}


def _tool_choice(value: Any) -> ToolChoice:
    if value is None:
        return "auto"
    if isinstance(value, str) and value in _CHOICES:
        return _CHOICES[value]
    if isinstance(value, str) and value:
        return {"name": value}
    if isinstance(value, dict):  # {"name": ...} or OpenAI's {"type": "function", ...}
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else value.get("name")
        if isinstance(name, str) and name:
            return {"name": name}
    raise ConfigError(
        f"tool_choice must be 'auto', 'required', 'none' or a tool's name, not {value!r}"
    )


def _headers(value: Any) -> dict[str, str]:
    if value is None:
        return {}
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return dict(value)
    raise ConfigError("headers must be a dict of str to str")


#: How a generation option is checked, by its field's type; a few by name.
_BY_TYPE: dict[str, Callable[[str, Any], Any]] = {"float | None": _number, "int | None": _count}
_BY_NAME: dict[str, Callable[[str, Any], Any]] = {"seed": _seed, "stop": _stop, "extra_body": _body}

#: Each ``GenerationOptions`` field and its check, in field order.
_GENERATION: dict[str, Callable[[str, Any], Any]] = {
    f.name: _BY_NAME.get(f.name) or _BY_TYPE[str(f.type)] for f in fields(GenerationOptions)
}

#: The call's settings (``CallSettings`` fields) a keyword sets, and the check of each.
_SETTINGS: dict[str, Callable[[Any], Any]] = {
    "think": _think,
    "keep_alive": _keep_alive,
    "timeout": _timeout,
    "tool_choice": _tool_choice,
    "headers": _headers,
}
