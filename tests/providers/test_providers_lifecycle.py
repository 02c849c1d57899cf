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


AZURE = (
    'model = "o3"\nmodel_provider = "azure"\n\n[model_providers.azure]\nname = "Azure"\n'
    'base_url = "https://acme.openai.azure.com/openai"\nenv_key = "AZURE_OPENAI_API_KEY"\n'
)


@pytest.mark.parametrize(
    "extra",
    [
        'query_params = { api-version = "2025-04-01-preview" }\n',
        'env_http_headers = { "OpenAI-Organization" = "OPENAI_ORGANIZATION" }\n',
    ],
)
def test_codex_import_refuses_what_a_profile_cannot_carry(
    home: Any, cli: Callable[..., Any], extra: str
) -> None:
    home.codex_config.parent.mkdir(parents=True)
    home.codex_config.write_text(AZURE + extra)
    result = cli("import", "codex", "--name", "az")
    assert result.returncode == 1
    assert extra.split(" =")[0] in result.stderr and "not imported" in result.stderr
    assert not ProfileStore().exists("az")
    assert home.codex_config.read_text() == AZURE + extra


def test_codex_import_names_what_it_leaves_out(home: Any, cli: Callable[..., Any]) -> None:
    home.codex_config.parent.mkdir(parents=True)
    home.codex_config.write_text(
        AZURE + 'http_headers = { "X-Team" = "evals" }\nrequest_max_retries = 7\n'
    )
    result = cli("import", "codex", "--name", "az")
    assert result.returncode == 0, result.stderr
    assert "not imported from [model_providers.azure]: request_max_retries" in result.stdout
    assert "$AZURE_OPENAI_API_KEY, which is not set" in result.stdout
    assert ProfileStore().get("az").headers == {"X-Team": "evals"}  # kept


def test_codex_auth_json_key_moves_into_the_keyring(home: Any, cli: Callable[..., Any]) -> None:
    from providers_testkit import fresh_key

    key = fresh_key()
    home.codex_config.parent.mkdir(parents=True)
    home.codex_config.write_text('# mine\nmodel = "gpt-5"\n')
    auth = home.codex_config.parent / "auth.json"
    auth.write_text(json.dumps({"OPENAI_API_KEY": key, "tokens": None, "last_refresh": None}))
    kept = cli("import", "codex", "--name", "cx")
    assert kept.returncode == 0, kept.stderr
    assert "--move-key" in kept.stdout and key in auth.read_text()
    result = cli("import", "codex", "--name", "cx2", "--move-key")
    assert result.returncode == 0, result.stderr
    assert cli("key", "cx2").stdout.strip() == key
    assert json.loads(auth.read_text()) == {
        "OPENAI_API_KEY": None,
        "tokens": None,
        "last_refresh": None,
    }
    assert "driftdesk-cx2" in home.codex_config.read_text()
    assert "# mine" in home.codex_config.read_text()
    holding = [p for p in home.root.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
    assert holding == []
    assert key not in result.stdout + result.stderr


def test_concurrent_switches_never_lose_a_write(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    import itertools
    import os
    import subprocess
    import sys

    from driftdesk.providers import state

    add_profile("one", base_url="http://127.0.0.1:9/v1", model="model-1")
    add_profile("two", base_url="http://127.0.0.1:8/v1", model="model-2")
    env_file = home.project / ".env"
    env_file.write_text("# mine\nOTHER=1\n")
    commands = [
        ["switch", ("one", "two")[i % 2], "--target", target]
        for i in range(4)
        for target in ("env", "codex")
    ]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "driftdesk", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(os.environ),
        )
        for args in commands
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), [e for _, e in outputs]
    for path in (env_file, home.codex_config):
        wrote = sum(f"wrote {path}" in out for out, _ in outputs)
        writes = state.writes(path)
        assert len(writes) == wrote  # every write recorded, none lost
        # Each write started from what the previous one left: the history chains up.
        for earlier, later in itertools.pairwise(writes):
            assert later["before_sha256"] == earlier["after_sha256"]
        assert state.record_for(path) is not None
    assert "# mine\nOTHER=1\n" in env_file.read_text()
