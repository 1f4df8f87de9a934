"""Keyword options of the script API: one ``TypedDict``, checked at the call.

``Options`` lists every per-call setting (the :class:`~ollm_lite.types.GenerationOptions`
fields plus ``think``, ``keep_alive``, ``timeout``, ``tool_choice``, ``extra_body`` and
``headers``). The script API's methods take them as ``**options: Unpack[Options]``, so editors
complete the names and type checkers flag a typo; at run time :func:`check_names` turns an
unknown keyword into a ``TypeError`` naming it (as Python does for any misspelt keyword) and
:func:`resolve` checks the values, raising ``ConfigError`` (``CONFIG_INVALID``) for a bad one.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypedDict

from ..errors import ConfigError
from ..types import GenerationOptions, Think, ToolChoice

__all__ = ["OPTION_NAMES", "Options", "ResolvedOptions", "check_names", "merge", "resolve"]


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

_FLOATS = ("temperature", "top_p", "repeat_penalty", "presence_penalty", "frequency_penalty")
_INTS = ("max_tokens", "top_k", "seed")


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


@dataclass(frozen=True, slots=True)
class ResolvedOptions:
    """Options checked and sorted into what goes where."""

    generation: GenerationOptions
    think: Think | None = None
    keep_alive: str | float | None = None
    timeout: float | None = None
    tool_choice: ToolChoice = "auto"
    headers: dict[str, str] | None = None


def resolve(options: Mapping[str, Any]) -> ResolvedOptions:
    """Check every value and build the request pieces.

    Raises:
        ConfigError: ``CONFIG_INVALID`` naming the option and the value.
    """
    values = {k: v for k, v in options.items() if v is not None}
    for name in _FLOATS:
        if name in values:
            values[name] = _number(name, values[name])
    for name in _INTS:
        if name in values:
            values[name] = _integer(name, values[name], minimum=None if name == "seed" else 1)
    stop = values.get("stop")
    if stop is not None:
        values["stop"] = _stop(stop)
    extra = values.get("extra_body", {})
    if not isinstance(extra, dict):
        raise ConfigError(f"extra_body must be a dict, not {type(extra).__name__}")
    generation = GenerationOptions(
        temperature=values.get("temperature"),
        max_tokens=values.get("max_tokens"),
        top_p=values.get("top_p"),
        top_k=values.get("top_k"),
        repeat_penalty=values.get("repeat_penalty"),
        seed=values.get("seed"),
        stop=values.get("stop"),
        presence_penalty=values.get("presence_penalty"),
        frequency_penalty=values.get("frequency_penalty"),
        extra_body=dict(extra),
    )
    timeout = values.get("timeout")
    if timeout is not None:
        timeout = _number("timeout", timeout)
        if not timeout > 0:
            raise ConfigError(f"timeout must be a positive number of seconds, not {timeout!r}")
    return ResolvedOptions(
        generation=generation,
        think=_think(values.get("think")),
        keep_alive=_keep_alive(values.get("keep_alive")),
        timeout=timeout,
        tool_choice=_tool_choice(values.get("tool_choice", "auto")),
        headers=_headers(values.get("headers")),
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


def _stop(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"stop must be a string or a list of strings, not {value!r}")


def _think(value: Any) -> Think | None:
    if value is None or isinstance(value, bool) or (isinstance(value, str) and value):
        return value
    raise ConfigError(f"think must be True, False or an effort level like 'high', not {value!r}")


def _keep_alive(value: Any) -> str | float | None:
    if value is None or (isinstance(value, str) and value.strip()):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return value
    raise ConfigError(f"keep_alive must be seconds or a duration like '5m', not {value!r}")


_CHOICES: dict[str, ToolChoice] = {"auto": "auto", "none": "none", "required": "required"}


def _tool_choice(value: Any) -> ToolChoice:
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


def _headers(value: Any) -> dict[str, str] | None:
    if value is None:
        return None
    if isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return dict(value)
    raise ConfigError("headers must be a dict of str to str")
