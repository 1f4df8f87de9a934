"""The ``[options]`` table: default generation options for every call that sets none.

::

    [options]
    max_tokens = 512        # the longest answer, in tokens
    temperature = 0.2
    think = false

Keys: the :class:`~ollm_lite.types.GenerationOptions` fields and ``think``. A call's own
keyword, ``connect(**options)`` and the CLI's flags win over a value here; ``ollm-lite chat``'s
own ``--max-tokens`` default (1024) applies only when the table sets no ``max_tokens``.
Values are checked as the script API checks the same keywords.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ..errors import ConfigError
from ..types import GenerationOptions
from ._check import unknown_key
from ._model import ConfigIssue

__all__ = ["OPTION_KEYS", "options_issues"]

#: The keys ``[options]`` accepts, in the order they are shown.
OPTION_KEYS: tuple[str, ...] = (*(f.name for f in fields(GenerationOptions)), "think")


def options_issues(options: Any) -> list[ConfigIssue]:
    """Every problem in the ``[options]`` table, each with its dotted path ``options.KEY``."""
    if not isinstance(options, Mapping) or not options:
        return []  # a table of the wrong type was reported while loading
    issues: list[ConfigIssue] = []
    known: dict[str, Any] = {}
    for key, value in options.items():
        if key not in OPTION_KEYS:
            issues.append(unknown_key(f"options.{key}", str(key), OPTION_KEYS))
        else:
            known[key] = value
    # Imported here: only a configuration with an [options] table needs the script API's checks.
    from ..client._options import resolve

    for key, value in known.items():
        try:
            resolve({key: value})
        except ConfigError as exc:
            issues.append(ConfigIssue(f"options.{key}", exc.message))
    return issues
