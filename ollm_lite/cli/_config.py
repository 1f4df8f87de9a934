"""``ollm-lite health [--all]`` and ``ollm-lite config show | validate``: the configuration and
whether its servers answer.

``health`` checks the selected provider and every other one the configuration mentions
(``--all``: every built-in provider) at once, and exits 1 if any fails. ``config show``
prints the merged configuration as TOML with where each value came from (API keys
redacted); ``config validate`` lists every problem and exits 1 if there is one.
"""

from __future__ import annotations

import argparse
import json
import re
from typing import TYPE_CHECKING, Any

from ..call_log._settings import shown as shown_log
from ..config import PROVIDERS, Config, canonical_provider, config_path, redacted, validate_config
from ..errors import OllmError
from ._common import EXIT_ERROR, EXIT_OK, Context, emit_json, missing, plain, table

if TYPE_CHECKING:
    from ..types import HealthStatus

__all__ = ["add_config_parser", "add_health_parser"]


def add_health_parser(commands: Any, flags: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``health`` to the CLI's sub-commands; returns its parser."""
    health: argparse.ArgumentParser = commands.add_parser(
        "health", parents=[flags], help="check every configured provider"
    )
    health.add_argument("--all", action="store_true", help="check every built-in provider")
    health.add_argument("--json", action="store_true", help="JSON output")
    health.set_defaults(handler=_cmd_health, usage_parser=health)
    return health


def add_config_parser(commands: Any, flags: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``config show|validate`` to the CLI's sub-commands; returns the ``config`` parser."""
    config: argparse.ArgumentParser = commands.add_parser(
        "config", parents=[flags], help="show or validate the config"
    )
    config_commands = config.add_subparsers(dest="config_command", metavar="ACTION")
    config.set_defaults(handler=missing(config), usage_parser=config)
    show = config_commands.add_parser(
        "show", parents=[flags], help="the merged configuration (keys redacted)"
    )
    show.add_argument("--json", action="store_true", help="JSON output")
    show.set_defaults(handler=_cmd_config_show, usage_parser=show)
    validate = config_commands.add_parser(
        "validate", parents=[flags], help="report every problem in the configuration"
    )
    validate.set_defaults(handler=_cmd_config_validate, usage_parser=validate)
    return config


# --------------------------------------------------------------------------- health


def _cmd_health(args: argparse.Namespace, ctx: Context) -> int:
    from concurrent.futures import ThreadPoolExecutor

    ctx.check_config()
    configured = _configured(ctx.config)
    names = list(PROVIDERS) if args.all else configured

    def check(name: str) -> HealthStatus:
        from datetime import UTC, datetime

        from ..types import ErrorInfo, HealthStatus

        try:
            return ctx.provider(name).health()
        except Exception as exc:  # a provider that cannot even be built is "fail"
            info = (
                exc.to_info()
                if isinstance(exc, OllmError)
                else ErrorInfo(f"{type(exc).__name__}: {exc}", "PROVIDER_NOT_FOUND")
            )
            return HealthStatus(
                ok=False,
                provider=name,
                base_url="-",
                checked_at=datetime.now(UTC),
                latency_ms=None,
                error=info,
            )

    with ThreadPoolExecutor(max_workers=len(names)) as pool:
        results = list(pool.map(check, names))
    if args.json:
        emit_json(ctx.out, [_health_json(n, r) for n, r in zip(names, results, strict=True)])
    else:
        rows = [
            [
                name,
                "ok" if r.ok else "fail",
                f"{r.latency_ms:.0f} ms" if r.latency_ms is not None else "-",
                r.version or "-",
                r.base_url,
                "" if r.error is None else _one_line(f"{r.error.code}: {r.error.message}"),
            ]
            for name, r in zip(names, results, strict=True)
        ]
        ctx.out.write(table(["PROVIDER", "STATUS", "LATENCY", "VERSION", "URL", "ERROR"], rows))
    # --all shows the built-in providers nobody configured too, but only a configured one
    # that fails makes the check fail: a healthy setup exits 0.
    failed = [n for n, r in zip(names, results, strict=True) if not r.ok and n in configured]
    return EXIT_ERROR if failed else EXIT_OK


def _health_json(name: str, status: HealthStatus) -> dict[str, Any]:
    """One provider's health for ``--json``: latency to 0.1 ms, an ISO 8601 time stamp."""
    data: dict[str, Any] = {"name": name, **plain(status)}
    if status.latency_ms is not None:
        data["latency_ms"] = round(status.latency_ms, 1)
    data["checked_at"] = status.checked_at.isoformat()
    return data


def _configured(config: Config) -> list[str]:
    """The selected provider first, then every other provider the configuration mentions."""
    names = [canonical_provider(config.provider)[0]]
    names += [n for n in PROVIDERS if n in config.providers and n not in names]
    return names


def _one_line(text: str, limit: int = 160) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


# --------------------------------------------------------------------------- config


def _cmd_config_show(args: argparse.Namespace, ctx: Context) -> int:
    config = ctx.config
    log, log_origins = shown_log(config)  # the call log's effective settings
    data = {**redacted(config), "log": log}
    if args.json:
        emit_json(ctx.out, {"source": config.source, **data})
        return EXIT_OK
    file, _ = config_path(ctx.config_arg)
    lines = [f"# file: {config.source}" if config.source else f"# file: {file} (not found)"]
    lines.append("# precedence: flags > environment > file > defaults")

    def line(key: str, value: Any, path: str) -> str:
        origin = config.origins.get(path)
        text = f"{key} = {_toml_value(value)}"
        return f"{text}  # {origin}" if origin else text

    lines.append(line("provider", data["provider"], "provider"))
    if "model" in data:
        lines.append(line("model", data["model"], "model"))
    for name, values in data.get("providers", {}).items():
        lines += ["", f"[providers.{_toml_key(name)}]"]
        lines += [line(k, v, f"providers.{name}.{k}") for k, v in values.items()]
        prefix = f"providers.{name}."
        lines += [  # a value the merge dropped, with why (config.py: one server per backend)
            f"# {path.removeprefix(prefix)}: {origin}"
            for path, origin in config.origins.items()
            if path.startswith(prefix) and path.removeprefix(prefix) not in values
        ]
    if data.get("context_limits"):
        lines += ["", "[context_limits]"]
        lines += [
            line(_toml_key(k), v, f"context_limits.{k}") for k, v in data["context_limits"].items()
        ]
    if data.get("options"):
        lines += ["", "[options]"]
        lines += [line(_toml_key(k), v, f"options.{k}") for k, v in data["options"].items()]
    lines += ["", "[log]"]
    lines += [f"{k} = {_toml_value(v)}  # {log_origins[k]}" for k, v in log.items()]
    ctx.out.write("\n".join(lines) + "\n")
    for issue in validate_config(config):
        ctx.say(f"warning: {issue}")
    return EXIT_OK


def _toml_key(key: str) -> str:
    return key if re.fullmatch(r"[A-Za-z0-9_-]+", key) else json.dumps(key)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    return json.dumps(value, ensure_ascii=False, default=str)


def _cmd_config_validate(args: argparse.Namespace, ctx: Context) -> int:
    issues = validate_config(ctx.config)
    where = ctx.config.source or "no config file (defaults and environment)"
    if not issues:
        ctx.out.write(f"ok: {where}\n")
        return EXIT_OK
    ctx.out.write(f"{where}: {len(issues)} problem{'s' if len(issues) > 1 else ''}\n")
    ctx.out.write("".join(f"  {issue}\n" for issue in issues))
    return EXIT_ERROR
