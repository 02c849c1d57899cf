"""Users' files that a careless editor would damage (issue 11, "Users' files and driftdesk's
own"): each is reproduced as it was seen, then refused or handled. Real CLI, real files."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from typing import Any

import pytest
from providers_testkit import fresh_key

from driftdesk.providers import state
from driftdesk.providers.profiles import ProfileStore

pytestmark = pytest.mark.keyring


def test_codex_dotted_keys_before_top_level_keys_are_never_mangled(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("x", base_url="http://127.0.0.1:9/v1", model="gpt-x")
    home.codex_config.parent.mkdir(parents=True)
    original = 'model_providers.azure.name = "Azure"\nmodel = "o3"\n'
    home.codex_config.write_text(original)
    add_profile("y", base_url="http://127.0.0.1:8/v1", model="gpt-y")
    # Seen: exit 0, top-level model gone, model = "gpt-x" inside the auth table. Handled now:
    # our provider gets a [model_providers.<id>] header of its own; switching on and back works.
    for name, model in (("x", "gpt-x"), ("y", "gpt-y"), ("x", "gpt-x")):
        result = cli("switch", name, "--target", "codex")
        assert result.returncode == 0, result.stderr
        config = tomllib.loads(home.codex_config.read_text())
        assert config["model"] == model and config["model_provider"] == f"driftdesk-{name}"
        assert config["model_providers"]["azure"] == {"name": "Azure"}
        assert "model" not in config["model_providers"][f"driftdesk-{name}"]["auth"]
    assert home.codex_config.read_text().startswith('model_providers.azure.name = "Azure"\n')
    restored = cli("restore", "codex", "--to", "original", "--yes")
    assert restored.returncode == 0, restored.stderr
    assert home.codex_config.read_text() == original


def test_read_only_settings_are_refused_unless_forced(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text('{"theme": "dark"}\n')
    home.claude_settings.chmod(0o444)
    refused = cli("switch", "a", "--target", "claude")
    assert refused.returncode == 1 and "read-only" in refused.stderr and "--force" in refused.stderr
    assert home.claude_settings.read_text() == '{"theme": "dark"}\n'
    forced = cli("switch", "a", "--target", "claude", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "apiKeyHelper" in home.claude_settings.read_text()
    assert home.claude_settings.stat().st_mode & 0o777 == 0o444


def test_a_dangling_symlink_gets_no_folders_created(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    far = home.root / "dotfiles" / "claude" / "settings.json"
    home.claude_settings.symlink_to(far)
    result = cli("switch", "a", "--target", "claude")
    assert result.returncode == 1 and "symlink" in result.stderr
    assert not (home.root / "dotfiles").exists()
    assert home.claude_settings.is_symlink()


def test_json_nested_ten_thousand_deep_is_one_clear_line(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    deep = '{"a":' * 10000 + "1" + "}" * 10000
    home.claude_settings.write_text(deep)
    for args in (("switch", "a", "--target", "claude"), ("status",), ("doctor", "--no-probe")):
        result = cli(*args)
        assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr, args
    switched = cli("switch", "a", "--target", "claude")
    assert switched.returncode == 1
    assert switched.stderr.count("\n") == 1 and "nested too deeply" in switched.stderr
    assert home.claude_settings.read_text() == deep


def test_header_without_equals_never_echoes_the_value(home: Any, cli: Callable[..., Any]) -> None:
    key = fresh_key()
    result = cli(
        "profile", "add", "x", "--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--no-key", "--header", key,
    )  # fmt: skip
    assert result.returncode == 2 and "NAME=VALUE" in result.stderr
    assert key not in result.stdout + result.stderr and key[:12] not in result.stderr


@pytest.mark.parametrize("name", ["X-Authorization", "X-Auth", "X-Password", "Api-Pass"])
def test_credential_header_names_are_refused(home: Any, cli: Callable[..., Any], name: str) -> None:
    result = cli(
        "profile", "add", "x", "--protocol", "openai", "--base-url", "http://127.0.0.1:9/v1",
        "--model", "m", "--no-key", "--header", f"{name}=hunter2hunter2",
    )  # fmt: skip
    assert result.returncode == 2 and "credential" in result.stderr
    assert not ProfileStore().exists("x")
    config = home.config_dir / "config.toml"
    assert not config.exists() or "hunter2" not in config.read_text()


def test_env_with_a_key_twice_is_warned_about(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    first, second = fresh_key(), fresh_key()
    env_file = home.project / ".env"
    env_file.write_text(f"ANTHROPIC_API_KEY={first}\nANTHROPIC_API_KEY={second}\n")
    result = cli("switch", "o", "--target", "env")
    assert result.returncode == 0, result.stderr
    assert "warning" in result.stderr
    assert f"ANTHROPIC_API_KEY (sk-…{first[-4:]})" in result.stderr
    assert f"ANTHROPIC_API_KEY (sk-…{second[-4:]})" in result.stderr
    assert first not in result.stderr + result.stdout
    # Both stay recoverable byte for byte from the backup.
    from driftdesk.providers import backupvault

    copy = state.backup_folder(env_file) / "original"
    assert (
        backupvault.read_copy(copy)
        == f"ANTHROPIC_API_KEY={first}\nANTHROPIC_API_KEY={second}\n".encode()
    )
    assert json.loads(backupvault.sidecar(copy).read_text())["masked"]
