"""Backups are exact yet hold no secret; history and restore give a file back byte for byte.

Real files in a temporary home, the real OS keyring, the real CLI in subprocesses.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from providers_testkit import FAIL_BACKEND, files_holding, fresh_key
from providers_testkit import env_with as _env

from driftdesk.providers import backupvault, state
from driftdesk.providers.masking import mask_exact, secret_entries, unmask

pytestmark = pytest.mark.keyring


def _backup_files(path: Path) -> list[Path]:
    folder = state.backup_folder(path)
    return [p for p in folder.rglob("*") if p.is_file()] if folder.exists() else []


# --- what is and is not a secret ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "text", "value"),
    [
        ("claude", '{"env": {"ANTHROPIC_AUTH_TOKEN": "$MOONSHOT_API_KEY"}}', "$MOONSHOT_API_KEY"),
        ("claude", '{"env": {"ANTHROPIC_AUTH_TOKEN": "${MOONSHOT_API_KEY}"}}', "${MOONSHOT"),
        ("codex", '[mcp_servers.docs]\nenv = { "DOCS_TOKEN_FILE" = "/home/me/.docs" }\n', "/home"),
        ("env", "GITHUB_TOKEN_PATH=~/.config/gh/token\n", "~/.config"),
        ("env", "AUTH_URL=https://login.example.com/oauth/authorize\n", "https://login"),
        ("claude", '{"env": {"MY_SECRET": ""}}', '""'),
    ],
)
def test_references_paths_urls_and_empty_values_are_never_masked(
    kind: str, text: str, value: str
) -> None:
    assert secret_entries(kind, text) == []
    masked, values = mask_exact(kind, text)
    assert masked == text and values == []
    assert value in masked


@pytest.mark.parametrize(
    "text",
    [
        "PROXY_AUTH_URL=https://user:hunter2hunter2@proxy.example.com\n",
        "FEED_AUTH=https://feeds.example.com/x?token=abcdefgh12345678\n",
    ],
)
def test_urls_carrying_credentials_are_masked(text: str) -> None:
    masked, values = mask_exact("env", text)
    assert masked != text and len(values) == 1
    assert unmask(masked, values) == text


def test_masking_is_undone_exactly_even_for_escaped_and_repeated_values() -> None:
    key = fresh_key()
    text = json.dumps(
        {
            "env": {"ANTHROPIC_API_KEY": key, "BARK_DEVICE_KEYS": "token1 token2"},
            "note": f"copy of {key}",
            "quoted": {"api_key": 'a"b\\c-12345678'},
            "auth": "Bearer abcdefghijklmnop",
        },
        indent=2,
    )
    masked, values = mask_exact("claude", text)
    assert key not in masked and "token1 token2" not in masked and "abcdefghijklmnop" not in masked
    assert 'a\\"b\\\\c-12345678' not in masked
    assert unmask(masked, values) == text


# --- the seen corruptions: backups restore byte for byte ------------------------------------


SEEN = {
    "bark_device_keys": (
        "claude",
        '{\n  "env": {\n    "BARK_DEVICE_KEYS": "token1 token2",\n    "ANTHROPIC_MODEL": "m"\n  }\n}\n',
        ["token1 token2"],
    ),
    "docs_token_file_path": (
        "codex",
        'model = "o3"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'
        'env = { "DOCS_TOKEN_FILE" = "/home/me/.docs" }\n',
        [],
    ),
    "auth_token_reference": (
        "claude",
        '{\n  "env": {\n    "ANTHROPIC_AUTH_TOKEN": "$MOONSHOT_API_KEY",\n'
        '    "ANTHROPIC_BASE_URL": "https://api.moonshot.example/anthropic"\n  }\n}\n',
        [],
    ),
}


@pytest.mark.parametrize("case", sorted(SEEN))
def test_seen_backups_restore_byte_for_byte_and_hold_no_secret(
    home: Any, cli: Callable[..., Any], add_profile: Any, case: str
) -> None:
    kind, original, secrets = SEEN[case]
    if kind == "claude":
        add_profile("p", protocol="anthropic", base_url="https://api.example.test/anthropic")
        path = home.claude_settings
    else:
        add_profile("p", base_url="http://127.0.0.1:9/v1")
        path = home.codex_config
    path.parent.mkdir(parents=True)
    path.write_bytes(original.encode())
    result = cli("switch", "p", "--target", kind)
    assert result.returncode == 0, result.stderr
    copy = state.backup_folder(path) / "original"
    assert backupvault.read_copy(copy) == original.encode()
    on_disk = b"".join(p.read_bytes() for p in _backup_files(path))
    assert on_disk  # the backup files exist (a case may hold no secret: see "masked" below)
    for secret in secrets:
        assert secret.encode() not in on_disk
    for plain in ("$MOONSHOT_API_KEY", "/home/me/.docs"):
        if plain in original:
            assert plain in copy.read_text()  # not a secret: left as it is
    note = json.loads(backupvault.sidecar(copy).read_text())
    assert len(note["masked"]) == len(secrets)
    assert all(entry["where"] and entry["entry"] for entry in note["masked"])
    restored = cli("restore", kind, "--to", "original", "--yes")
    assert restored.returncode == 0, restored.stderr
    assert path.read_bytes() == original.encode()


def test_keyring_unavailable_means_no_backup_and_the_switch_refuses(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1", key="")
    env_file = home.project / ".env"
    original = f"GITHUB_TOKEN={fresh_key()}\nOPENAI_MODEL=old\n"
    env_file.write_text(original)
    result = cli("switch", "o", "--target", "env", env=_env(**FAIL_BACKEND))
    assert result.returncode == 1
    assert "keyring" in result.stderr and "no backup was written" in result.stderr
    assert "Traceback" not in result.stderr
    assert env_file.read_text() == original
    assert _backup_files(env_file) == []
    # A file with nothing to mask needs no keyring for its backup.
    env_file.write_text("OPENAI_MODEL=old\n")
    plain = cli("switch", "o", "--target", "env", env=_env(**FAIL_BACKEND))
    assert plain.returncode == 0, plain.stderr


def test_pruned_backups_take_their_keyring_entries_with_them(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    import keyring

    add_profile("one", base_url="http://127.0.0.1:9/v1")
    add_profile("two", base_url="http://127.0.0.1:8/v1", model="model-b")
    env_file = home.project / ".env"
    env_file.write_text(f"GITHUB_TOKEN={fresh_key()}\n")
    assert cli("switch", "one", "--target", "env").returncode == 0
    assert cli("switch", "two", "--target", "env").returncode == 0
    history = state.backup_folder(env_file) / "history"
    first = sorted(history.glob("*.bak"))[0]
    entries = [e["entry"] for e in json.loads(backupvault.sidecar(first).read_text())["masked"]]
    assert entries and all(keyring.get_password(backupvault.service(), e) for e in entries)
    for index in range(state.HISTORY_KEEP):
        assert cli("switch", ("one", "two")[index % 2], "--target", "env").returncode == 0
    assert not first.exists()
    assert len(list(history.glob("*.bak"))) == state.HISTORY_KEEP
    assert all(keyring.get_password(backupvault.service(), e) is None for e in entries)


# --- history and restore ------------------------------------------------------------------------


def test_history_lists_every_write_and_restore_undoes_exactly_one(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("one", base_url="http://127.0.0.1:9/v1")
    add_profile("two", base_url="http://127.0.0.1:8/v1", model="model-b")
    home.codex_config.parent.mkdir(parents=True)
    original = b'# mine\nmodel = "o3"\n'
    home.codex_config.write_bytes(original)
    assert cli("switch", "one", "--target", "codex").returncode == 0
    after_one = home.codex_config.read_bytes()
    assert cli("switch", "two", "--target", "codex").returncode == 0
    after_two = home.codex_config.read_bytes()
    listed = cli("history", "codex")
    assert listed.returncode == 0, listed.stderr
    lines = [ln for ln in listed.stdout.splitlines() if ln.startswith("  ")]
    assert len(lines) == 2 and " one " in lines[0] and " two " in lines[1]
    assert "model_provider" in lines[0] and "model_providers.driftdesk-one" in lines[0]
    dry = cli("restore", "codex", "--dry-run")
    assert dry.returncode == 0 and "driftdesk-one" in dry.stdout and "dry run" in dry.stdout
    assert home.codex_config.read_bytes() == after_two
    refused = cli("restore", "codex", input="")
    assert refused.returncode == 1 and "--yes" in refused.stderr
    assert home.codex_config.read_bytes() == after_two
    undone = cli("restore", "codex", "--yes")
    assert undone.returncode == 0, undone.stderr
    assert home.codex_config.read_bytes() == after_one
    # The restore is a write of its own: restoring again undoes the restore.
    redone = cli("restore", "codex", "--yes")
    assert redone.returncode == 0, redone.stderr
    assert home.codex_config.read_bytes() == after_two
    assert cli("restore", "codex", "--to", "1", "--yes").returncode == 0
    assert home.codex_config.read_bytes() == original
    records = json.loads(cli("history", "codex", "--json").stdout)[0]["writes"]
    assert [r["action"] for r in records] == ["switch", "switch", "restore", "restore", "restore"]
    assert cli("history").stdout.count(str(home.codex_config)) == 1


def test_restore_of_a_file_driftdesk_created_removes_it(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    assert cli("switch", "o", "--target", "codex").returncode == 0
    assert home.codex_config.exists()
    result = cli("restore", "codex", "--to", "original", "--yes")
    assert result.returncode == 0, result.stderr
    assert "did not exist" in result.stdout
    assert not home.codex_config.exists()
    back = cli("restore", "codex", "--yes")
    assert back.returncode == 0, back.stderr
    assert "driftdesk-o" in home.codex_config.read_text()


def test_restore_refuses_unknown_files_and_writes(home: Any, cli: Callable[..., Any]) -> None:
    none = cli("restore", "claude", "--yes")
    assert none.returncode == 1 and "no record" in none.stderr
    env_file = home.project / "x.env"
    env_file.write_text("A=1\n")
    assert cli("restore", "env", "--env-file", str(env_file), "--to", "3").returncode == 1
    assert env_file.read_text() == "A=1\n"


def test_a_removed_key_is_warned_about_and_recoverable_with_restore(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("an", protocol="anthropic", base_url="https://api.example.test/anthropic")
    old_key = fresh_key()
    home.claude_settings.parent.mkdir(parents=True)
    original = json.dumps({"env": {"ANTHROPIC_API_KEY": old_key}, "theme": "dark"}, indent=2)
    home.claude_settings.write_text(original)
    switched = cli("switch", "an", "--target", "claude")
    assert switched.returncode == 0, switched.stderr
    assert "warning" in switched.stderr and "driftdesk restore claude" in switched.stderr
    assert "sk-…" + old_key[-4:] in switched.stderr
    assert files_holding(old_key, home.root, home.project) == []
    restored = cli("restore", "claude", "--yes")
    assert restored.returncode == 0, restored.stderr
    assert home.claude_settings.read_text() == original
    assert old_key not in switched.stdout + switched.stderr + restored.stdout + restored.stderr
