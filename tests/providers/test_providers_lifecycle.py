"""A profile's life after a switch: edit (stale files named, re-applied), status (which keys
drifted), rm (asks first, names the files). Real CLI, real files, real keyring."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from driftdesk.providers.profiles import ProfileStore

pytestmark = pytest.mark.keyring


def test_status_names_the_keys_that_drifted(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text('{\n  "theme": "light"\n}\n')
    assert cli("switch", "a", "--target", "claude").returncode == 0
    settings = json.loads(home.claude_settings.read_text())
    settings["theme"] = "dark"
    settings["env"]["ANTHROPIC_MODEL"] = "hand-edited"
    del settings["apiKeyHelper"]
    home.claude_settings.write_text(json.dumps(settings, indent=2))
    rows = {(r["target"], r["scope"]): r for r in json.loads(cli("status", "--json").stdout)}
    row = rows[("claude", "user")]
    assert row["drifted"] is True
    assert row["drifted_keys"] == "set theme, env.ANTHROPIC_MODEL; removed apiKeyHelper"
    plain = cli("status").stdout
    assert "DRIFTED since driftdesk wrote it: set theme, env.ANTHROPIC_MODEL" in plain


def test_profile_edit_names_stale_files_and_reapplies(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    assert cli("switch", "o", "--target", "codex").returncode == 0
    assert cli("switch", "o", "--target", "env").returncode == 0
    edited = cli("profile", "edit", "o", "--model", "model-new")
    assert edited.returncode == 0, edited.stderr
    assert f"{home.codex_config} is stale" in edited.stdout
    assert "driftdesk switch o --target codex" in edited.stdout
    assert f"{home.project / '.env'} is stale" in edited.stdout
    assert 'model = "model-a"' in home.codex_config.read_text()  # not re-applied unasked
    again = cli("profile", "edit", "o", "--model", "model-newer", "--reapply")
    assert again.returncode == 0, again.stderr
    assert "re-applied o to codex" in again.stdout and "re-applied o to env" in again.stdout
    assert 'model = "model-newer"' in home.codex_config.read_text()
    assert "OPENAI_MODEL=model-newer" in (home.project / ".env").read_text()
    quiet = cli("profile", "edit", "o", "--notes", "no effect on files")
    assert "stale" not in quiet.stdout and "re-applied" not in quiet.stdout


def test_profile_rm_of_a_profile_in_use_asks_first_and_names_the_files(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    add_profile("o", base_url="http://127.0.0.1:9/v1")
    assert cli("switch", "o", "--target", "codex").returncode == 0
    refused = cli("profile", "rm", "o", input="")
    assert refused.returncode == 1
    assert str(home.codex_config) in refused.stdout and "--yes" in refused.stderr
    assert ProfileStore().exists("o")
    assert cli("key", "o").returncode == 0
    removed = cli("profile", "rm", "o", "--yes")
    assert removed.returncode == 0, removed.stderr
    assert not ProfileStore().exists("o")
    add_profile("unused", base_url="http://127.0.0.1:9/v1")
    assert cli("profile", "rm", "unused", input="").returncode == 0
