"""``${VAR}`` and ``${VAR:-default}`` expansion of configuration strings."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..errors import ConfigError
from ._model import ConfigIssue
from ._secrets import secret_path

_VAR = re.compile(r"\$\$\{|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def expand_vars(text: str, env: Mapping[str, str], *, where: str = "value") -> str:
    """Expand ``${VAR}`` and ``${VAR:-default}`` in ``text`` from ``env``.

    ``${VAR:-default}`` uses ``default`` when ``VAR`` is unset or empty; ``$${`` stands for a
    literal ``${``. Nothing else is special (a lone ``$`` stays as it is).

    Args:
        text: The string to expand.
        env: Variable values.
        where: Dotted path of the value, for error messages.

    Returns:
        The expanded string.

    Raises:
        ConfigError: ``CONFIG_INVALID`` for an unset variable without a default (naming it
            and ``where``), an empty or malformed name, or an unterminated ``${``.
    """
    expanded, problems = _expand(text, env, where, quote=True)
    if problems:
        raise ConfigError(f"{where}: {problems[0]}", details={"path": where})
    return expanded


def _expand(text: str, env: Mapping[str, str], where: str, *, quote: bool) -> tuple[str, list[str]]:
    """``text`` expanded, and what is wrong with each malformed reference in it.

    Malformed references are left as they are; ``quote=False`` keeps their text out of the
    messages (the value may be a secret). An unset variable without a default still raises.
    """
    problems: list[str] = []

    def sub(match: re.Match[str]) -> str:
        whole = match.group(0)
        if whole == "$${":
            return "${"
        body = match.group(1)
        if body is None:
            problems.append("unterminated '${' (write $${ for a literal ${)")
            return whole
        name, sep, default = body.partition(":-")
        if not _NAME.fullmatch(name):
            shown = f" '${{{clip(body)}}}'" if quote else ""
            problems.append(
                f"bad variable reference{shown}: expected ${{NAME}} or ${{NAME:-default}}"
            )
            return whole
        value = env.get(name)
        if value:
            return value
        if sep:
            return default
        if value is not None:  # set but empty, no default: empty is what was asked for
            return value
        raise ConfigError(
            f"{where}: environment variable {name} is not set (export it, or write "
            f"${{{name}:-default}} to give a default)",
            details={"path": where, "variable": name},
        )

    return _VAR.sub(sub, text), problems


def clip(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else text[:limit] + "..."


def expand_tree(value: Any, env: Mapping[str, str], where: str, issues: list[ConfigIssue]) -> Any:
    """``value`` with every string expanded; a string with a malformed reference stays as
    written and each of its problems goes to ``issues``."""
    if isinstance(value, str):
        expanded, problems = _expand(value, env, where, quote=not secret_path(where))
        issues.extend(ConfigIssue(where, problem) for problem in problems)
        return value if problems else expanded
    if isinstance(value, dict):
        return {
            k: expand_tree(v, env, f"{where}.{k}" if where else k, issues) for k, v in value.items()
        }
    if isinstance(value, list):
        return [expand_tree(v, env, f"{where}[{i}]", issues) for i, v in enumerate(value)]
    return value
