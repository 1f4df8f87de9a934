"""``auth``, ``client_id``, ``client_secret`` and ``scope`` in ``[mcp.servers.NAME]``, and
``ollm-lite mcp login NAME`` / ``mcp logout NAME`` (as subprocesses, against the loopback
authorization server; the "browser" is ``$BROWSER``, a command that follows the URL)."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from support.cli_support import cli_env, run
from support.oauth_server import OAuthServer

from ollm_lite.config import load_config, redacted, validate_config


def _config(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(body)
    return path


def test_auth_keys_load_validate_and_stay_masked(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
[mcp.servers.tickets]
url = "https://mcp.tickets.invalid/mcp"
auth = "client_credentials"
client_id = "nightly"
client_secret = "${TICKETS_SECRET}"
scope = ["tickets:read", "tickets:write"]
""",
    )
    config = load_config(path, env={"TICKETS_SECRET": "very~secret~value"})
    entry = config.mcp_servers["tickets"]
    assert entry.client_secret == "very~secret~value"
    assert validate_config(config) == []
    shown = json.dumps(redacted(config))
    assert "very~secret~value" not in shown and '"client_secret": "***"' in shown
    assert "very~secret~value" not in repr(entry)


def test_bad_auth_tables_are_reported(tmp_path: Path) -> None:
    path = _config(
        tmp_path,
        """
[mcp.servers.a]
url = "https://a.invalid/mcp"
auth = "password"
[mcp.servers.b]
url = "https://b.invalid/mcp"
auth = "client_credentials"
[mcp.servers.c]
command = ["x"]
auth = "login"
[mcp.servers.d]
url = "https://d.invalid/mcp"
client_id = "x"
""",
    )
    paths = {i.path for i in validate_config(load_config(path, env={}))}
    assert {
        "mcp.servers.a.auth",
        "mcp.servers.b.client_id",
        "mcp.servers.b.client_secret",
        "mcp.servers.c.auth",
        "mcp.servers.d.client_id",
    } <= paths


def _env(tmp_path: Path, cfg: Path, **extra: str) -> dict[str, str]:
    return cli_env(tmp_path, OLLM_CONFIG=str(cfg), XDG_DATA_HOME=str(tmp_path / "data"), **extra)


def test_login_signs_in_through_the_browser_then_use_by_name_needs_nobody(
    tmp_path: Path,
) -> None:
    follow = "import sys, urllib.request; urllib.request.urlopen(sys.argv[1]).close()"
    browser = f"{shlex.quote(sys.executable)} -c {shlex.quote(follow)} %s"
    with OAuthServer() as server:
        cfg = _config(tmp_path, f'[mcp.servers.guarded]\nurl = "{server.url}"\nauth = "login"\n')
        env = _env(tmp_path, cfg, BROWSER=browser, DISPLAY="")
        before = run(tmp_path, "mcp", "list", "guarded", env=env)
        assert before.returncode == 1
        assert "ollm-lite mcp login guarded" in before.stderr
        done = run(tmp_path, "mcp", "login", "guarded", env=env, timeout=120)
        assert done.returncode == 0, done.stderr
        assert server.world.count("/authorize") == 1
        listed = run(tmp_path, "mcp", "list", "guarded", env=env)
        assert listed.returncode == 0, listed.stderr
        assert "whoami" in listed.stdout
        assert server.world.count("/authorize") == 1  # no person the second time
        out = run(tmp_path, "mcp", "logout", "guarded", env=env)
        assert out.returncode == 0
        after = run(tmp_path, "mcp", "list", "guarded", env=env)
        assert after.returncode == 1 and "mcp login guarded" in after.stderr


def test_login_with_client_credentials_and_unknown_names(tmp_path: Path) -> None:
    with OAuthServer() as server:
        server.world.client_id, server.world.client_secret = "cron", "cron~secret"
        server.world.auth_methods = ["client_secret_post"]
        cfg = _config(
            tmp_path,
            f'[mcp.servers.tickets]\nurl = "{server.url}"\nauth = "client_credentials"\n'
            'client_id = "cron"\nclient_secret = "${CRON_SECRET}"\n',
        )
        env = _env(tmp_path, cfg, CRON_SECRET="cron~secret")
        done = run(tmp_path, "mcp", "login", "tickets", env=env)
        assert done.returncode == 0, done.stderr
        assert "cron~secret" not in done.stderr + done.stdout
        assert run(tmp_path, "mcp", "login", "nosuch", env=env).returncode == 2
        assert run(tmp_path, "mcp", "logout", "nosuch", env=env).returncode == 2
        shown = run(tmp_path, "config", "show", env=env)
        assert "cron~secret" not in shown.stdout + shown.stderr
