"""The real Claude Code and Codex, run headless against a loopback vendor endpoint.

Each test switches (or pins) a profile with the real driftdesk CLI, runs the real client in a
throwaway HOME, and asserts what the endpoint received: the profile's key, at the profile's base
URL, in the header the profile names — and that no key is in any file. The clients never leave
127.0.0.1: every base URL is loopback and their update checks and telemetry are off.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from providers_testkit import Endpoint
from vendor_endpoint import REPLY

from tests.conftest import real_client

pytestmark = [pytest.mark.keyring, pytest.mark.timeout(300)]

# Documented switches that keep the clients off the network beyond the endpoint under test.
CLAUDE_QUIET = {
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_TELEMETRY": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
}
CODEX_QUIET_TOP = "check_for_update_on_startup = false\n"
CODEX_QUIET_TABLES = "\n[analytics]\nenabled = false\n"


def client_env(home: Any, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(CLAUDE_QUIET)
    env["PATH"] = f"{Path(os.sys.executable).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    env.update(extra)
    return env


def prepare_codex_home(home: Any, top: str = "", tables: str = "") -> None:
    """A user config.toml as a user would have it: quiet, and trusting the project folder."""
    home.codex_config.parent.mkdir(parents=True, exist_ok=True)
    home.codex_config.write_text(
        CODEX_QUIET_TOP
        + top
        + CODEX_QUIET_TABLES
        + f'\n[projects."{home.project}"]\ntrust_level = "trusted"\n'
        + tables
    )


def run_client(
    name: str, home: Any, *args: str, cwd: Path | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """The real ``claude`` or ``codex``, headless, in the throwaway home."""
    return subprocess.run(
        [str(real_client(name)), *args],
        cwd=cwd or home.project,
        env=client_env(home, **env),
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


CODEX_EXEC = ("exec", "--skip-git-repo-check", "say pong")


CLAUDE_PRINT = ("-p", "say pong", "--max-turns", "1")


def assert_no_key_in_files(key: str, *roots: Path) -> None:
    holding = [
        str(p)
        for root in roots
        for p in root.rglob("*")
        if p.is_file() and not p.is_symlink() and key.encode() in p.read_bytes()
    ]
    assert holding == []


def header(request: dict[str, Any], name: str) -> str | None:
    for key, value in request["headers"].items():
        if key.lower() == name.lower():
            return str(value)
    return None


# --- Codex ------------------------------------------------------------------------------------


def test_codex_project_scope_is_refused_because_codex_ignores_it(
    home: Any,
    cli: Callable[..., Any],
    add_profile: Any,
    endpoint: Endpoint,
    elsewhere: Endpoint,
) -> None:
    """What current Codex does with a provider in a trusted project's .codex/config.toml: it
    ignores it and calls the user config's provider. So driftdesk refuses that scope, and
    status/doctor never call such a file active."""
    user_key = add_profile("mine", base_url=endpoint.base_url + "/v1", model="model-a")
    project_key = add_profile("proj", base_url=elsewhere.base_url + "/v1", model="model-b")
    prepare_codex_home(home)
    assert cli("switch", "mine", "--target", "codex").returncode == 0
    refused = cli("switch", "proj", "--target", "codex", "--scope", "project")
    assert refused.returncode == 1
    assert "ignores" in refused.stderr and "driftdesk exec proj -- codex" in refused.stderr
    project_config = home.project / ".codex" / "config.toml"
    assert not project_config.exists()
    # What an older driftdesk wrote there (and what a user may write by hand):
    project_config.parent.mkdir()
    project_config.write_text(
        'model_provider = "driftdesk-proj"\n\n[model_providers.driftdesk-proj]\n'
        f'name = "proj"\nbase_url = "{elsewhere.base_url}/v1"\nwire_api = "responses"\n'
        'env_key = "PROJ_KEY"\n'
    )
    ran = run_client("codex", home, *CODEX_EXEC, PROJ_KEY=project_key)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert REPLY in ran.stdout
    assert "Ignored unsupported project-local config keys" in ran.stderr
    assert elsewhere.seen == []  # the project's provider was ignored
    calls = endpoint.calls("/v1/responses")
    assert calls and header(calls[0], "authorization") == f"Bearer {user_key}"
    rows = {(r["target"], r["scope"]): r for r in json.loads(cli("status", "--json").stdout)}
    assert rows[("codex", "user")]["profile"] == "mine"
    assert rows[("codex", "project")]["profile"] is None
    assert "NOT ACTIVE" in rows[("codex", "project")]["detail"]
    doctor = cli("doctor", "--no-probe")
    assert "codex project config" in doctor.stdout and "ignores" in doctor.stdout
    assert_no_key_in_files(user_key, home.root, home.project)


def _snapshot(*paths: Path) -> dict[Path, bytes | None]:
    return {p: (p.read_bytes() if p.exists() else None) for p in paths}


def test_exec_pins_claude_code_over_user_files_pointing_elsewhere(
    home: Any, cli: Callable[..., Any], add_profile: Any, endpoint: Endpoint, elsewhere: Endpoint
) -> None:
    key = add_profile("pin", protocol="anthropic", base_url=endpoint.base_url, model="model-a")
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text(
        json.dumps(
            {
                "env": {
                    "ANTHROPIC_BASE_URL": elsewhere.base_url,
                    "ANTHROPIC_API_KEY": "sk-user-own-key-elsewhere-000",
                    "ANTHROPIC_MODEL": "their-model",
                },
                "permissions": {"allow": []},
            },
            indent=2,
        )
    )
    local = home.project / ".claude" / "settings.local.json"
    local.parent.mkdir()
    local.write_text(json.dumps({"env": {"ANTHROPIC_BASE_URL": elsewhere.base_url}}))
    before = _snapshot(home.claude_settings, local)
    ran = cli(
        "exec", "pin", "--", str(real_client("claude")), *CLAUDE_PRINT,
        env=client_env(home, ANTHROPIC_BASE_URL=elsewhere.base_url), timeout=180,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert REPLY in ran.stdout
    assert elsewhere.seen == []
    calls = endpoint.calls("/v1/messages")
    assert calls and all(header(c, "x-api-key") == key for c in calls)
    assert _snapshot(home.claude_settings, local) == before  # the user's files untouched
    assert_no_key_in_files(key, home.root, home.project)


def test_exec_pins_codex_over_a_user_config_pointing_elsewhere(
    home: Any, cli: Callable[..., Any], add_profile: Any, endpoint: Endpoint, elsewhere: Endpoint
) -> None:
    key = add_profile("pin", base_url=endpoint.base_url + "/v1", model="model-a")
    prepare_codex_home(
        home,
        top='model = "their-model"\nmodel_provider = "theirs"\n',
        tables="\n[model_providers.theirs]\n"
        f'name = "theirs"\nbase_url = "{elsewhere.base_url}/v1"\nwire_api = "responses"\n'
        'env_key = "THEIR_KEY"\n',
    )
    before = _snapshot(home.codex_config)
    ran = cli(
        "exec", "pin", "--", str(real_client("codex")), *CODEX_EXEC,
        env=client_env(home, THEIR_KEY="sk-their-own-key-000000"), timeout=180,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert REPLY in ran.stdout
    assert elsewhere.seen == []
    calls = endpoint.calls("/v1/responses")
    assert calls and all(header(c, "authorization") == f"Bearer {key}" for c in calls)
    assert _snapshot(home.codex_config) == before
    assert_no_key_in_files(key, home.root, home.project)


# --- switched files, each scope ---------------------------------------------------------------


@pytest.mark.parametrize("scope", ["user", "project", "local"])
def test_claude_code_switched_at_each_scope_sends_the_profile_key(
    home: Any, cli: Callable[..., Any], add_profile: Any, endpoint: Endpoint, scope: str
) -> None:
    key = add_profile(
        "cc", protocol="anthropic", base_url=endpoint.base_url, model="model-a",
        extra=("--auth-header", "bearer"),
    )  # fmt: skip
    # A user file with settings of its own, which must survive the switch.
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text('{\n  "permissions": {"allow": ["Bash(ls)"]}\n}\n')
    switched = cli("switch", "cc", "--target", "claude", "--scope", scope)
    assert switched.returncode == 0, switched.stderr
    ran = run_client("claude", home, *CLAUDE_PRINT)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert REPLY in ran.stdout
    calls = endpoint.calls("/v1/messages")
    assert calls and all(c["path"] == "/v1/messages" for c in calls)
    # The helper's key travels as a bearer token (and, from Claude Code, as x-api-key too).
    assert all(header(c, "authorization") == f"Bearer {key}" for c in calls)
    assert "Bash(ls)" in home.claude_settings.read_text()
    assert_no_key_in_files(key, home.root, home.project)


def test_codex_switched_at_user_scope_sends_the_profile_key(
    home: Any, cli: Callable[..., Any], add_profile: Any, endpoint: Endpoint
) -> None:
    key = add_profile("cx", base_url=endpoint.base_url + "/v1", model="model-a")
    prepare_codex_home(home, tables='\n[mcp_servers.docs]\ncommand = "true"\nenabled = false\n')
    switched = cli("switch", "cx", "--target", "codex")
    assert switched.returncode == 0, switched.stderr
    ran = run_client("codex", home, *CODEX_EXEC)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert REPLY in ran.stdout
    calls = endpoint.calls("/v1/responses")
    assert calls and all(c["path"] == "/v1/responses" for c in calls)
    assert all(header(c, "authorization") == f"Bearer {key}" for c in calls)
    assert "[mcp_servers.docs]" in home.codex_config.read_text()
    assert_no_key_in_files(key, home.root, home.project)


# --- keyless profiles -------------------------------------------------------------------------


@pytest.mark.parametrize("keyring", ["keyring", "no keyring"])
def test_codex_switched_to_a_keyless_profile_reaches_it_without_an_auth_error(
    home: Any, cli: Callable[..., Any], add_profile: Any, endpoint: Endpoint, keyring: str
) -> None:
    """A keyless profile switched into Codex: Codex runs `driftdesk key NAME` for its token.
    That used to exit 1 ("no key for profile"), and Codex 0.171 logged `ERROR ... Failed to
    resolve external auth` on every request. It now hands out the placeholder, with or without
    a keyring."""
    add_profile("sim", base_url=endpoint.base_url + "/v1", model="model-a", key="",
                extra=("--no-key",))  # fmt: skip
    prepare_codex_home(home)
    no_keyring = {"PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    extra = no_keyring if keyring == "no keyring" else {}
    switched = cli("switch", "sim", "--target", "codex", env=client_env(home, **extra))
    assert switched.returncode == 0, switched.stderr
    key = cli("key", "sim", env=client_env(home, **extra))
    assert (key.returncode, key.stdout, key.stderr) == (0, "no-key\n", "")
    ran = run_client("codex", home, *CODEX_EXEC, **extra)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert REPLY in ran.stdout
    # (The test endpoint's /models answer is not Codex's format: Codex logs an ERROR about that.)
    auth_errors = [line for line in ran.stderr.splitlines() if "ERROR" in line and "auth" in line]
    assert auth_errors == []
    calls = endpoint.calls("/v1/responses")
    assert calls and all(header(c, "authorization") == "Bearer no-key" for c in calls)


def test_key_names_a_missing_profile_and_keeps_a_keyed_one_s_error(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("keyed", key="")  # a keyed profile with no key stored yet
    missing = cli("key", "nope")
    assert missing.returncode == 2  # an unknown profile is bad input
    assert "no profile named 'nope'" in missing.stderr and "keyring" not in missing.stderr
    keyed = cli("key", "keyed")
    assert keyed.returncode == 1 and keyed.stdout == ""
    assert "driftdesk profile edit keyed --key-stdin" in keyed.stderr
