"""The profile CLI end to end: real subprocesses, real files in a temp home, the real keyring."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import stat
import subprocess
import sys
import termios
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from providers_testkit import FAIL_BACKEND, fresh_key
from providers_testkit import env_with as _env
from providers_testkit import files_holding as _files_holding

from driftdesk.providers import keys, state
from driftdesk.providers.profiles import ProfileStore

pytestmark = pytest.mark.keyring

# --- profiles and keys ------------------------------------------------------------------------


def test_add_show_list_key(home: Any, cli: Callable[..., Any], add_profile: Any) -> None:
    key = add_profile("work", protocol="anthropic", base_url="https://api.example.test/anthropic")
    shown = cli("profile", "show", "work", "--json")
    assert shown.returncode == 0, shown.stderr
    view = json.loads(shown.stdout)
    assert view["key"] == "sk-…" + key[-4:]
    assert view["key_present"] is True
    assert view["protocol"] == "anthropic"
    listed = json.loads(cli("profile", "list", "--json").stdout)
    assert [p["name"] for p in listed] == ["work"]
    printed = cli("key", "work")
    assert printed.returncode == 0
    assert printed.stdout == key + "\n"
    assert key not in home.config_dir.joinpath("config.toml").read_text()
    assert keys.get_key("work") == key  # in the keyring, under the test's service


def test_key_is_refused_inside_a_run_child(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    # The rerun engine sets DRIFTDESK_RUN_CHILD in every harness: a harness (or the Codex /
    # Claude Code it starts, whose helper runs `driftdesk key`) must never get the real key.
    key = add_profile("up", protocol="anthropic", base_url="https://api.example.test/x")
    assert cli("switch", "up", "--target", "claude").returncode == 0
    helper = json.loads(home.claude_settings.read_text())["apiKeyHelper"]
    for value in ("1", "run-123"):
        child = _env(DRIFTDESK_RUN_CHILD=value)
        refused = cli("key", "up", env=child)
        assert refused.returncode != 0
        assert refused.stdout == ""
        assert "DRIFTDESK_RUN_CHILD" in refused.stderr and "throwaway key" in refused.stderr
        assert key not in refused.stderr
        ran = subprocess.run(["sh", "-c", helper], capture_output=True, text=True, env=child)
        assert ran.returncode != 0 and key not in ran.stdout + ran.stderr
        leaked = cli("exec", "up", "--", "sh", "-c", "echo $ANTHROPIC_AUTH_TOKEN", env=child)
        assert leaked.returncode != 0 and key not in leaked.stdout + leaked.stderr
    assert "DRIFTDESK_RUN_CHILD" in cli("key", "--help").stdout
    assert cli("key", "up").stdout == key + "\n"  # outside a run it still works


def test_add_without_tty_stores_no_key_and_says_so(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("nokey", key="")
    result = cli(
        "profile",
        "add",
        "other",
        "--protocol",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        input="",
    )
    assert "no key stored" in result.stdout
    view = json.loads(cli("profile", "show", "nokey", "--json").stdout)
    assert view["key_present"] is False and view["key"] is None
    missing = cli("key", "nokey")
    assert missing.returncode == 1
    assert missing.stdout == ""
    assert "no key for profile 'nokey'" in missing.stderr


def test_add_prompts_hidden_on_a_tty(home: Any) -> None:
    key = fresh_key()
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "driftdesk",
            "profile",
            "add",
            "tty",
            "--protocol",
            "openai",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            "m",
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        start_new_session=True,
        close_fds=True,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 30
    while b"API key for tty" not in seen and time.monotonic() < deadline:
        if select.select([master], [], [], 1)[0]:
            seen += os.read(master, 4096)
    assert b"hidden" in seen
    # Type only once getpass has switched echo off (the master reads the terminal's flags): a
    # fixed pause was too short on a loaded machine, and the key would be echoed.
    while termios.tcgetattr(master)[3] & termios.ECHO:
        assert time.monotonic() < deadline, "getpass never switched echo off"
        time.sleep(0.01)
    os.write(master, key.encode() + b"\n")
    out = b""
    while proc.poll() is None or select.select([master], [], [], 0.2)[0]:
        try:
            if select.select([master], [], [], 0.5)[0]:
                out += os.read(master, 4096)
        except OSError:
            break
    os.close(master)
    assert proc.wait(30) == 0
    assert key.encode() not in seen + out, "the key was echoed"
    assert b"key stored in the OS keyring" in out
    assert keys.get_key("tty") == key


def test_edit_and_rm(home: Any, cli: Callable[..., Any], add_profile: Any) -> None:
    add_profile("p1")
    new_key = fresh_key()
    edited = cli(
        "profile",
        "edit",
        "p1",
        "--model",
        "model-b",
        "--header",
        "X-A=1",
        "--key-stdin",
        input=new_key,
    )
    assert edited.returncode == 0, edited.stderr
    assert ProfileStore().get("p1").model == "model-b"
    assert ProfileStore().get("p1").headers == {"X-A": "1"}
    assert cli("key", "p1").stdout.strip() == new_key
    assert new_key not in edited.stdout + edited.stderr
    missing = cli("profile", "edit", "nope", "--model", "x")
    assert missing.returncode == 2 and "no profile named 'nope'" in missing.stderr
    removed = cli("profile", "rm", "p1")
    assert removed.returncode == 0 and "keyring entry" in removed.stdout
    assert not keys.has_key("p1")
    assert ProfileStore().names() == []


def test_bad_profile_input_is_a_clear_error(home: Any, cli: Callable[..., Any]) -> None:
    result = cli(
        "profile",
        "add",
        "bad name",
        "--protocol",
        "openai",
        "--base-url",
        "x",
        "--model",
        "m",
        input="",
    )
    assert result.returncode == 2
    assert result.stderr.startswith("driftdesk: error: invalid profile name")


@pytest.mark.parametrize(
    "header",
    [
        "Authorization",
        "proxy-authorization",
        "X-API-KEY",
        "api-key",
        "X-Auth-Token",
        "x-client-secret",
        "Cookie",
        "X-Goog-Api-Key",
    ],
)
def test_headers_carrying_credentials_are_refused(
    home: Any, cli: Callable[..., Any], add_profile: Any, header: str
) -> None:
    from driftdesk.providers.profiles import Profile, ProfileError

    secret = fresh_key()
    args = ("--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1", "--model", "m")
    added = cli("profile", "add", "p", *args, "--header", f"{header}={secret}", input="")
    assert added.returncode == 2
    assert header in added.stderr and "keyring" in added.stderr
    assert not ProfileStore().exists("p")
    add_profile("q")
    edited = cli("profile", "edit", "q", "--header", f"{header}=Bearer {secret}")
    assert edited.returncode == 2 and "keyring" in edited.stderr
    assert ProfileStore().get("q").headers == {}
    with pytest.raises(ProfileError, match="keyring"):
        Profile("r", "openai", "http://127.0.0.1:9/v1", "m", headers={header: "x"}).validate()
    for path in home.root.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert secret not in added.stdout + added.stderr + edited.stdout + edited.stderr


def test_harmless_headers_are_kept(home: Any, cli: Callable[..., Any], add_profile: Any) -> None:
    add_profile("p", extra=("--header", "X-Title=driftdesk", "--header", "HTTP-Referer=x"))
    assert ProfileStore().get("p").headers == {"X-Title": "driftdesk", "HTTP-Referer": "x"}


def test_import_leaves_credential_headers_out(home: Any, cli: Callable[..., Any]) -> None:
    secret = fresh_key()
    home.claude_settings.parent.mkdir(parents=True)
    headers = f"X-Title: mine\nAuthorization: Bearer {secret}"
    home.claude_settings.write_text(
        json.dumps({"env": {"ANTHROPIC_MODEL": "m", "ANTHROPIC_CUSTOM_HEADERS": headers}})
    )
    result = cli("import", "claude", "--name", "imp")
    assert result.returncode == 0, result.stderr
    assert ProfileStore().get("imp").headers == {"X-Title": "mine"}
    assert "Authorization" in result.stdout and "not imported" in result.stdout
    assert secret not in home.config_dir.joinpath("config.toml").read_text()


def test_keyring_unavailable_is_refused_without_plaintext_fallback(
    home: Any, cli: Callable[..., Any]
) -> None:
    key = fresh_key()
    env = _env(**FAIL_BACKEND)
    added = cli(
        "profile",
        "add",
        "k",
        "--protocol",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--key-stdin",
        input=key,
        env=env,
    )
    assert added.returncode != 0
    assert "keyring.backends.fail.Keyring" in added.stderr
    assert "never falls back" in added.stderr
    assert not ProfileStore().exists("k"), "nothing is saved when the key cannot be"
    got = cli("key", "k", env=env)
    assert got.returncode != 0 and got.stdout == ""
    assert "no profile named 'k'" in got.stderr  # it was not saved
    doctor = cli("doctor", "--no-probe", env=env)
    assert doctor.returncode == 1 and "FAIL] keyring" in doctor.stdout
    for path in home.root.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path


# --- switch, helpers, status ------------------------------------------------------------------


def test_switch_dry_run_writes_nothing(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    original = b'{\n  "permissions": {"allow": []}\n}\n'
    home.claude_settings.write_bytes(original)
    result = cli("switch", "a", "--target", "claude", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert '+  "apiKeyHelper"' in result.stdout
    assert "dry run" in result.stdout
    assert home.claude_settings.read_bytes() == original
    assert not state.state_file().exists()
    assert not home.codex_config.exists()


def test_claude_helper_runs_exactly_as_written(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    key = add_profile("claude-p", protocol="anthropic", base_url="https://api.example.test/x")
    result = cli("switch", "claude-p", "--target", "claude")
    assert result.returncode == 0, result.stderr
    settings = json.loads(home.claude_settings.read_text())
    helper = settings["apiKeyHelper"]
    # Claude Code runs the helper through a shell, outside the user's PATH.
    env = _env(PATH="/usr/bin:/bin")
    ran = subprocess.run(["sh", "-c", helper], capture_output=True, text=True, env=env, timeout=60)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == key
    assert stat.S_IMODE(home.claude_settings.stat().st_mode) == 0o600  # new file


def test_codex_command_and_args_run(home: Any, cli: Callable[..., Any], add_profile: Any) -> None:
    key = add_profile("cx", base_url="http://127.0.0.1:9/v1")
    result = cli("switch", "cx", "--target", "codex")
    assert result.returncode == 0, result.stderr
    config = tomllib.loads(home.codex_config.read_text())
    auth = config["model_providers"]["driftdesk-cx"]["auth"]
    env = _env(PATH="/usr/bin:/bin")
    ran = subprocess.run(
        [auth["command"], *auth["args"]], capture_output=True, text=True, env=env, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == key


def test_switch_backs_up_keeps_mode_and_history(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("one", base_url="http://127.0.0.1:9/v1")
    add_profile("two", base_url="http://127.0.0.1:8/v1", model="model-b")
    home.codex_config.parent.mkdir(parents=True)
    original = b'# mine\nmodel = "o3"\n'
    home.codex_config.write_bytes(original)
    home.codex_config.chmod(0o640)
    assert cli("switch", "one", "--target", "codex").returncode == 0
    first = home.codex_config.read_bytes()
    assert cli("switch", "two", "--target", "codex").returncode == 0
    assert stat.S_IMODE(home.codex_config.stat().st_mode) == 0o640
    folder = state.backup_folder(home.codex_config)
    assert (folder / "original").read_bytes() == original
    history = sorted((folder / "history").glob("*.bak"))
    assert [h.read_bytes() for h in history] == [first]
    assert cli("switch", "one", "--target", "codex").returncode == 0
    assert (folder / "original").read_bytes() == original  # never overwritten
    assert len(list((folder / "history").glob("*.bak"))) == 2


def test_unparseable_target_is_refused_and_untouched(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    broken = b'{\n  "hooks": {,\n}\n'
    home.claude_settings.write_bytes(broken)
    result = cli("switch", "a", "--target", "claude")
    assert result.returncode == 1
    assert "does not parse" in result.stderr and "left it untouched" in result.stderr
    assert home.claude_settings.read_bytes() == broken
    assert not state.backup_folder(home.claude_settings).exists()


def test_apply_refuses_a_file_changed_since_the_plan(home: Any) -> None:
    from driftdesk.providers.profiles import Profile
    from driftdesk.providers.targets import TargetChanged, apply_switch, plan_switch

    env_file = home.project / ".env"
    env_file.write_text("A=1\n")
    plan = plan_switch(Profile("p", "openai", "http://127.0.0.1:9/v1", "m"), "env")
    env_file.write_text("A=2\n")
    with pytest.raises(TargetChanged):
        apply_switch(plan)
    assert env_file.read_text() == "A=2\n"


def test_protocol_mismatch_is_refused(home: Any, cli: Callable[..., Any], add_profile: Any) -> None:
    add_profile("oa")
    result = cli("switch", "oa", "--target", "claude")
    assert result.returncode == 1 and "Anthropic protocol" in result.stderr
    assert not home.claude_settings.exists()


def test_status_reports_active_profile_and_drift(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    assert cli("switch", "a", "--target", "claude").returncode == 0
    assert cli("switch", "o", "--target", "codex").returncode == 0
    assert cli("switch", "o", "--target", "env").returncode == 0
    rows = {(r["target"], r["scope"]): r for r in json.loads(cli("status", "--json").stdout)}
    assert rows[("claude", "user")]["profile"] == "a"
    assert rows[("codex", "user")]["profile"] == "o"
    assert rows[("env", "file")]["profile"] == "o"
    assert not any(r["drifted"] for r in rows.values())
    # Someone edits the Claude settings by hand.
    text = home.claude_settings.read_text().replace('"env"', '"theme": "dark",\n  "env"', 1)
    home.claude_settings.write_text(text)
    rows = {(r["target"], r["scope"]): r for r in json.loads(cli("status", "--json").stdout)}
    assert rows[("claude", "user")]["drifted"] is True
    assert rows[("claude", "user")]["profile"] == "a"
    assert rows[("codex", "user")]["drifted"] is False
    plain = cli("status").stdout
    assert "DRIFTED" in plain


def test_paths_honour_claude_config_dir_and_codex_home(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    codex_home = home.root / "elsewhere" / "codex"
    result = cli("switch", "o", "--target", "codex", env=_env(CODEX_HOME=str(codex_home)))
    assert result.returncode == 0, result.stderr
    assert (codex_home / "config.toml").exists() and not home.codex_config.exists()
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    claude_dir = home.root / "cfg" / "claude"
    result = cli("switch", "a", "--target", "claude", env=_env(CLAUDE_CONFIG_DIR=str(claude_dir)))
    assert result.returncode == 0, result.stderr
    assert (claude_dir / "settings.json").exists() and not home.claude_settings.exists()
    local = cli("switch", "a", "--target", "claude", "--scope", "local")
    assert local.returncode == 0
    assert (home.project / ".claude" / "settings.local.json").exists()


# --- exec -------------------------------------------------------------------------------------


def test_exec_passes_env_and_exit_code(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    key = add_profile("o", base_url="http://127.0.0.1:9/v1", model="model-x")
    out = home.root / "seen.json"
    code = (
        "import json, os, sys; json.dump({k: os.environ.get(k) for k in "
        "('OPENAI_API_KEY', 'OPENAI_BASE_URL', 'OPENAI_MODEL')}, open(sys.argv[1], 'w')); "
        "sys.exit(7)"
    )
    result = cli("exec", "o", "--", sys.executable, "-c", code, str(out))
    assert result.returncode == 7
    seen = json.loads(out.read_text())
    out.unlink()
    assert seen == {
        "OPENAI_API_KEY": key,
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_MODEL": "model-x",
    }
    assert key not in result.stdout + result.stderr


def test_exec_anthropic_profile_drops_shadowing_key(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    key = add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    code = (
        "import os; print(os.environ.get('ANTHROPIC_AUTH_TOKEN'), "
        "os.environ['ANTHROPIC_API_KEY'] == os.environ['EXPECT'], "
        "os.environ['ANTHROPIC_BASE_URL'])"
    )
    result = cli(
        "exec",
        "a",
        "--",
        sys.executable,
        "-c",
        code,
        env=_env(ANTHROPIC_API_KEY="stale-shell-key", ANTHROPIC_AUTH_TOKEN="stale", EXPECT=key),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["None", "True", "https://api.example.test/anthropic"]


def test_exec_forwards_signals(home: Any, add_profile: Any) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    marker = home.root / "got-signal"
    ready = home.root / "ready"
    child = (
        "import pathlib, signal, sys, time\n"
        "def on_term(signum, frame):\n"
        f"    pathlib.Path({str(marker)!r}).write_text(str(signum))\n"
        "    sys.exit(3)\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "exec", "o", "--", sys.executable, "-c", child]
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(30) == 3
    assert marker.read_text() == str(int(signal.SIGTERM))


# --- import -----------------------------------------------------------------------------------


def test_import_claude_moves_key_with_flag(home: Any, cli: Callable[..., Any]) -> None:
    key = fresh_key()
    home.claude_settings.parent.mkdir(parents=True)
    original = (
        '{\n  "env": {\n    "ANTHROPIC_BASE_URL": "https://api.example.test/anthropic",\n'
        f'    "ANTHROPIC_AUTH_TOKEN": "{key}",\n    "ANTHROPIC_MODEL": "glm-4.6"\n  }},\n'
        '  "hooks": {}\n}\n'
    )
    home.claude_settings.write_text(original)
    result = cli("import", "claude", "--name", "imported", "--move-key")
    assert result.returncode == 0, result.stderr
    assert key not in result.stdout + result.stderr
    assert cli("key", "imported").stdout.strip() == key
    profile = ProfileStore().get("imported")
    assert (profile.protocol, profile.base_url, profile.model) == (
        "anthropic",
        "https://api.example.test/anthropic",
        "glm-4.6",
    )
    after = home.claude_settings.read_text()
    assert key not in after
    settings = json.loads(after)
    assert "driftdesk" in settings["apiKeyHelper"] and "imported" in settings["apiKeyHelper"]
    assert settings["hooks"] == {}
    backup = state.backup_folder(home.claude_settings) / "original"
    # The backup is the original with the key masked: the key lives in the keyring only.
    assert backup.read_text() == original.replace(key, "sk-…" + key[-4:])
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    note = json.loads(backup.with_name("original.masked.json").read_text())
    assert [(m["where"], m["shown_as"]) for m in note["masked"]] == [
        ("env.ANTHROPIC_AUTH_TOKEN", "sk-…" + key[-4:])
    ]
    helper = subprocess.run(
        ["sh", "-c", settings["apiKeyHelper"]], capture_output=True, text=True, timeout=60
    )
    assert helper.stdout.strip() == key


def test_import_without_flag_leaves_the_file(home: Any, cli: Callable[..., Any]) -> None:
    key = fresh_key()
    env_file = home.project / ".env"
    original = (
        f"# mine\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_MODEL=m1\nOPENAI_API_KEY={key}\n"
    )
    env_file.write_text(original)
    result = cli("import", "env", "--name", "fromenv", input="")
    assert result.returncode == 0, result.stderr
    assert "--move-key" in result.stdout
    assert env_file.read_text() == original
    assert cli("key", "fromenv").stdout.strip() == key
    moved = cli("import", "env", str(env_file), "--name", "fromenv2", "--yes")
    assert moved.returncode == 0, moved.stderr
    assert (
        env_file.read_text() == "# mine\nOPENAI_BASE_URL=http://127.0.0.1:9/v1\nOPENAI_MODEL=m1\n"
    )
    assert key not in moved.stdout + moved.stderr


def test_import_codex_bearer_token(home: Any, cli: Callable[..., Any]) -> None:
    key = fresh_key()
    home.codex_config.parent.mkdir(parents=True)
    home.codex_config.write_text(
        '# keep me\nmodel = "qwen"\nmodel_provider = "local"\n\n[model_providers.local]\n'
        f'name = "Local"\nbase_url = "http://127.0.0.1:9/v1"\nexperimental_bearer_token = "{key}"\n'
        'wire_api = "responses"\n'
    )
    result = cli("import", "codex", "--name", "cx", "--move-key")
    assert result.returncode == 0, result.stderr
    after = home.codex_config.read_text()
    assert key not in after and "# keep me" in after
    config = tomllib.loads(after)
    assert config["model_provider"] == "driftdesk-cx"
    assert config["model_providers"]["local"]["base_url"] == "http://127.0.0.1:9/v1"
    assert cli("key", "cx").stdout.strip() == key


@pytest.mark.parametrize("source", ["claude", "codex", "env"])
def test_backups_never_keep_a_moved_key(home: Any, cli: Callable[..., Any], source: str) -> None:
    key = fresh_key()
    plain = "plain" + fresh_key()[8:]  # no sk- prefix: only found by the name it is stored under
    if source == "claude":
        path = home.claude_settings
        text = json.dumps(
            {"env": {"ANTHROPIC_MODEL": "m", "ANTHROPIC_API_KEY": key}, "other": {"token": plain}}
        )
    elif source == "codex":
        path = home.codex_config
        text = (
            'model = "m"\nmodel_provider = "p"\n[model_providers.p]\nbase_url = "http://x/v1"\n'
            f'experimental_bearer_token = "{key}"\n[model_providers.q]\nenv_key = "{plain}"\n'
        )
    else:
        path = home.project / ".env"
        text = f"OPENAI_MODEL=m\nOPENAI_API_KEY={key}\nGITHUB_TOKEN='{plain}'\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    result = cli("import", source, str(path), "--name", "imp", "--move-key")
    assert result.returncode == 0, result.stderr
    assert cli("key", "imp").stdout.strip() == key
    assert _files_holding(key, home.root, home.project) == []
    # Other secrets stay in the user's file, but the backup copy keeps them masked too.
    assert plain in path.read_text()
    assert _files_holding(plain, home.root, home.project) == [str(path)]
    folder = state.backup_folder(path)
    assert "…" + key[-4:] in (folder / "original").read_text()
    shown = json.loads((folder / "original.masked.json").read_text())["masked"]
    assert len(shown) == 2 and all(entry["where"] for entry in shown)


def test_switch_goes_on_when_the_removed_key_is_in_the_keyring(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    key = add_profile("an", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text(json.dumps({"env": {"ANTHROPIC_AUTH_TOKEN": key}}))
    result = cli("switch", "an", "--target", "claude")
    assert result.returncode == 0, result.stderr
    assert "warning" not in result.stderr
    assert _files_holding(key, home.root, home.project) == []


def test_import_move_key_refuses_to_drop_a_second_key(home: Any, cli: Callable[..., Any]) -> None:
    first, second = fresh_key(), fresh_key()
    home.claude_settings.parent.mkdir(parents=True)
    text = json.dumps(
        {
            "env": {
                "ANTHROPIC_MODEL": "m",
                "ANTHROPIC_API_KEY": first,
                "ANTHROPIC_AUTH_TOKEN": second,
            }
        }
    )
    home.claude_settings.write_text(text)
    result = cli("import", "claude", "--name", "imp", "--move-key")
    assert result.returncode == 1
    assert "env.ANTHROPIC_AUTH_TOKEN (sk-…" + second[-4:] + ")" in result.stderr
    assert home.claude_settings.read_text() == text
    assert not ProfileStore().exists("imp")
    assert second not in result.stdout + result.stderr


def test_backups_taken_before_masking_are_masked_on_the_next_switch(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    key = fresh_key()
    env_file = home.project / ".env"
    env_file.write_text("OPENAI_MODEL=a\n")
    folder = state.backup_folder(env_file)
    folder.mkdir(parents=True)
    (folder / "original").write_text(f"OPENAI_API_KEY={key}\n")  # as an older driftdesk kept it
    assert cli("switch", "o", "--target", "env").returncode == 0
    assert _files_holding(key, home.root, home.project) == []
    assert (folder / "original").read_text() == "OPENAI_API_KEY=sk-…" + key[-4:] + "\n"


def test_import_refuses_unparseable(home: Any, cli: Callable[..., Any]) -> None:
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text("{nope")
    result = cli("import", "claude", "--name", "x")
    assert result.returncode == 1 and "does not parse" in result.stderr
    assert home.claude_settings.read_text() == "{nope"
    assert not ProfileStore().exists("x")


# --- the key never leaks ----------------------------------------------------------------------


def test_no_key_in_any_file_or_output(
    home: Any, cli: Callable[..., Any], add_profile: Any, provider_server: Any
) -> None:
    outputs: list[str] = []

    def run(*args: str, **kw: Any) -> Any:
        result = cli(*args, **kw)
        outputs.append(result.stdout + result.stderr)
        return result

    anthropic_key = add_profile(
        "a", protocol="anthropic", base_url=provider_server.base_url, model="model-a"
    )
    openai_key = add_profile("o", base_url=provider_server.base_url + "/v1", model="model-a")
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text('{"permissions": {"allow": []}}\n')
    for args in (
        ("switch", "a", "--target", "claude", "--dry-run"),
        ("switch", "a", "--target", "claude"),
        ("switch", "a", "--target", "claude", "--scope", "project"),
        ("switch", "o", "--target", "codex"),
        ("switch", "o", "--target", "codex"),
        ("switch", "o", "--target", "env"),
        ("status",),
        ("status", "--json"),
        ("profile", "list"),
        ("profile", "list", "--json"),
        ("profile", "show", "a"),
        ("profile", "show", "o", "--json"),
        ("doctor",),
        ("doctor", "o", "--json"),
        ("exec", "o", "--", "true"),
    ):
        result = run(*args)
        assert result.returncode in (0, 1), (args, result.stderr)
    provider_server.mode = "401"
    run("doctor", "a")
    assert len(provider_server.seen) >= 2  # the probes really went out, with the keys
    for key in (anthropic_key, openai_key):
        for text in outputs:
            assert key not in text
            assert key[8:-4] not in text
        for root in (home.root, home.project):
            for path in root.rglob("*"):
                if path.is_file():
                    assert key.encode() not in path.read_bytes(), path


def test_exec_forwards_sigint_sent_to_driftdesk_alone(home: Any, add_profile: Any) -> None:
    # Not at a terminal (no tty foreground group): a SIGINT sent to driftdesk must reach the child.
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    ready = home.root / "ready"
    child = (
        "import pathlib, time\n"
        f"pathlib.Path({str(ready)!r}).touch()\n"
        "try:\n"
        "    time.sleep(60)\n"
        "except KeyboardInterrupt:\n"
        "    raise SystemExit(42)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "exec", "o", "--", sys.executable, "-c", child],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(30) == 42


def test_diff_masks_secrets_shown_as_context(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    other_secret = "plain-provider-secret-" + fresh_key()[8:20]  # no sk- prefix to pattern-match
    env_file = home.project / ".env"
    env_file.write_text(f"OPENAI_API_KEY={other_secret}\nOPENAI_MODEL=old\n")
    result = cli("switch", "o", "--target", "env", "--dry-run")
    assert result.returncode == 0, result.stderr
    assert "OPENAI_API_KEY=" in result.stdout  # the context line is shown...
    assert other_secret not in result.stdout  # ...masked
    assert other_secret[-4:] in result.stdout


def test_key_command_loads_only_the_keyring(home: Any) -> None:
    # Claude Code / Codex run `driftdesk key` on every refresh: it must not load the heavy cores.
    from driftdesk.providers.keys import set_key

    set_key("work", fresh_key())
    probe = (
        "import sys, driftdesk.cli.main as cli\n"
        "assert cli.main(['key', 'work']) == 0\n"
        "heavy = ('tomlkit', 'aiohttp', 'openai', 'duckdb', 'textual', 'driftdesk.reruns',\n"
        "         'driftdesk.analysis', 'driftdesk.tui', 'driftdesk.providers.profiles',\n"
        "         'driftdesk.providers.targets', 'driftdesk.providers.doctor')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60
    )
    assert result.stdout.strip().splitlines()[-1] == "[]", result.stdout + result.stderr


def test_import_without_a_name_picks_one(home: Any) -> None:
    from driftdesk.providers.importer import import_profile

    home.codex_config.parent.mkdir(parents=True)
    home.codex_config.write_text('model = "m"\n[model_providers.openai]\nname = "x"\n')
    first = import_profile("codex")
    second = import_profile("codex")
    assert first.profile.name == "codex-api.openai.com"
    assert second.profile.name == "codex-api.openai.com-2"
    assert first.profile.base_url == "https://api.openai.com/v1"
    assert not first.key_stored and any("no key found" in n for n in first.notes)


def test_symlinked_settings_stay_a_symlink(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    dotfiles = home.root / "dotfiles"
    dotfiles.mkdir()
    real = dotfiles / "claude-settings.json"
    real.write_text('{\n  "theme": "dark"\n}\n')
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.symlink_to(real)
    assert cli("switch", "a", "--target", "claude").returncode == 0
    assert home.claude_settings.is_symlink()
    assert json.loads(real.read_text())["theme"] == "dark"
    assert "apiKeyHelper" in json.loads(real.read_text())


def test_no_keyring_says_what_is_needed_and_how_to_get_it(
    home: Any, cli: Callable[..., Any]
) -> None:
    """Seen on a headless box: the first everyday command failed with 'no OS keyring backend
    is available' and the README never said a keyring is needed."""
    added = cli(
        "profile", "add", "k", "--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--key-stdin", input=fresh_key(), env=_env(**FAIL_BACKEND),
    )  # fmt: skip
    assert added.returncode == 1
    message = added.stderr.strip()
    assert len(message.splitlines()) == 1
    for needed in ("macOS", "Keychain", "dbus-run-session", "gnome-keyring-daemon --unlock",
                   "keyrings.cryptfile", "--no-key", "Where keys are kept"):  # fmt: skip
        assert needed in message, needed
    assert not message.endswith(".") and ".;" not in message
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    assert "### Where keys are kept" in readme
    section = readme.split("### Where keys are kept", 1)[1].split("\n## ", 1)[0]
    for needed in ("macOS", "dbus-run-session", "gnome-keyring-daemon", "keyrings.cryptfile"):
        assert needed in section, needed


def test_a_profiles_fault_injection_is_set_checked_and_cleared(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    """``profile add/edit --inject``: the runs of the profile inject these faults (run --inject
    overrides it); a bad spec is refused in one line and nothing is saved."""
    add_profile("p1")
    before = ProfileStore().path.read_bytes()
    refused = cli("profile", "edit", "p1", "--inject", "429=lots")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1, refused.stderr
    assert "--inject" in refused.stderr
    assert ProfileStore().path.read_bytes() == before
    assert cli("profile", "edit", "p1", "--inject", "429=5%,500=2%").returncode == 0
    assert ProfileStore().get("p1").inject == "429=5%,500=2%"
    assert 'inject = "429=5%,500=2%"' in ProfileStore().path.read_text()
    assert cli("profile", "edit", "p1", "--inject", "none").returncode == 0
    assert ProfileStore().get("p1").inject is None
    added = cli(
        "profile", "add", "p2", "--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--no-key", "--inject", "truncate=1%", input="",
    )  # fmt: skip
    assert added.returncode == 0, added.stderr
    assert ProfileStore().get("p2").inject == "truncate=1%"
