"""Switching into real-world-shaped Claude Code, Codex and .env files keeps every foreign byte.

Each fixture is switched twice: compared byte-for-byte with a reviewed golden file, and checked
against properties that do not trust the editor (semantic equality, every foreign line kept in
order, the Codex file equal to the original once the tables driftdesk owns are taken out).
Set DRIFTDESK_REGEN_GOLDEN=1 to rewrite the goldens (then review their diffs).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import tomllib
from pathlib import Path

import pytest
import tomlkit
from providers_testkit import FIXTURES

from driftdesk.providers import locations
from driftdesk.providers.profiles import Profile
from driftdesk.providers.targets import (
    CLAUDE_KEY_ENV,
    CLAUDE_OWNED_ENV,
    TargetParseError,
    edit_claude_settings,
    edit_codex_config,
    edit_env_file,
)

ANTHROPIC = Profile(
    "test",
    "anthropic",
    "https://api.example.test/anthropic",
    "big-model-1",
    haiku_model="small-model-1",
    headers={"X-Team": "evals"},
)
OPENAI = Profile("test", "openai", "http://127.0.0.1:8765/v1", "gpt-test")
REGEN = os.environ.get("DRIFTDESK_REGEN_GOLDEN") == "1"


def fixtures(kind: str) -> list[Path]:
    return sorted(p for p in (FIXTURES / kind).iterdir() if p.is_file())


def _golden(kind: str, fixture: Path, actual: str) -> None:
    """Compare with expected/<name>, where the helper command is a placeholder."""
    argv = locations.key_helper_argv("test")
    placeholders = {
        "@HELPER_JSON@": json.dumps(shlex.join(argv), ensure_ascii=False),
        "@COMMAND_TOML@": tomlkit.item(argv[0]).as_string(),
        "@ARGS_TOML@": tomlkit.item(argv[1:]).as_string(),
    }
    expected_path = FIXTURES / "expected" / kind / fixture.name
    if REGEN:
        text = actual
        for marker, value in placeholders.items():
            text = text.replace(value, marker)
        expected_path.parent.mkdir(parents=True, exist_ok=True)
        expected_path.write_bytes(text.encode("utf-8"))
    expected = expected_path.read_bytes().decode("utf-8")
    for marker, value in placeholders.items():
        expected = expected.replace(marker, value)
    assert actual == expected


# --- Claude Code ----------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", fixtures("claude"), ids=lambda p: p.name)
def test_claude_fixture_matches_golden(fixture: Path) -> None:
    before = fixture.read_bytes().decode("utf-8")
    _golden("claude", fixture, edit_claude_settings(before, ANTHROPIC, fixture))


@pytest.mark.parametrize("fixture", fixtures("claude"), ids=lambda p: p.name)
def test_claude_switch_changes_only_owned_keys(fixture: Path) -> None:
    before = fixture.read_bytes().decode("utf-8")
    after = edit_claude_settings(before, ANTHROPIC, fixture)
    old, new = json.loads(before), json.loads(after)

    # Semantics, computed with plain dicts: only what driftdesk owns differs.
    expected = dict(old)
    env = dict(old.get("env", {}))
    for key in (*CLAUDE_OWNED_ENV, *CLAUDE_KEY_ENV):
        env.pop(key, None)
    env.update(
        ANTHROPIC_BASE_URL=ANTHROPIC.base_url,
        ANTHROPIC_MODEL=ANTHROPIC.model,
        ANTHROPIC_DEFAULT_HAIKU_MODEL="small-model-1",
        ANTHROPIC_CUSTOM_HEADERS="X-Team: evals",
    )
    expected["env"] = env
    expected["apiKeyHelper"] = locations.key_helper_shell("test")
    assert new == expected
    # Order: every foreign key keeps its place (top level and in env).
    owned_top = {"env", "apiKeyHelper"}
    assert [k for k in new if k not in owned_top] == [k for k in old if k not in owned_top]
    owned_env = set(CLAUDE_OWNED_ENV) | set(CLAUDE_KEY_ENV)
    assert [k for k in new["env"] if k not in owned_env] == [
        k for k in old.get("env", {}) if k not in owned_env
    ]
    # Bytes: every line naming no owned key survives verbatim and in order (a trailing comma
    # may appear where a member now follows).
    owned_names = ("env", "apiKeyHelper", *CLAUDE_OWNED_ENV, *CLAUDE_KEY_ENV)
    if re.match(r"\ufeff?\{[ \t]*\r?\n", before):  # one member per line: check line by line
        kept = [
            line.rstrip("\r\n").rstrip(",")
            for line in before.splitlines()
            if not any(f'"{n}"' in line for n in owned_names) and line.strip() not in ("{", "}")
        ]
        remaining = iter(line.rstrip("\r\n").rstrip(",") for line in after.splitlines())
        for line in kept:
            assert any(line == candidate for candidate in remaining), f"lost or changed: {line!r}"
    # The end of the file (newline or not, blank lines) is untouched.
    assert after[len(after.rstrip()) :] == before[len(before.rstrip()) :]
    # Idempotent: a second switch changes nothing.
    assert edit_claude_settings(after, ANTHROPIC, fixture) == after


def test_claude_numbers_and_unicode_stay_as_written() -> None:
    fixture = FIXTURES / "claude" / "03_four_spaces_unicode_numbers_no_newline.json"
    after = edit_claude_settings(fixture.read_text(encoding="utf-8"), ANTHROPIC, fixture)
    for literal in ("1.0e3", "-0.50", "1754089102113", r"\u00e9t\u00e9", "日本語 🚀", r"\/slash"):
        assert literal in after
    assert not after.endswith("\n")


def test_claude_nested_env_blocks_of_other_tools_are_not_ours() -> None:
    fixture = FIXTURES / "claude" / "07_plugins_mcp_only_key.json"
    after = json.loads(edit_claude_settings(fixture.read_text(), ANTHROPIC, fixture))
    assert after["mcpServers"]["filesystem"]["env"] == {"ANTHROPIC_API_KEY": "not-ours-to-touch"}
    assert "ANTHROPIC_API_KEY" not in after["env"]


@pytest.mark.parametrize(
    "text",
    ['{"env": {', '{"a": 1,}', "[1, 2]", '{"env": "not an object"}', "", "// comment\n{}"],
)
def test_claude_refuses_what_does_not_parse(text: str) -> None:
    with pytest.raises(TargetParseError, match="left it untouched"):
        edit_claude_settings(text, ANTHROPIC, Path("settings.json"))


# --- Codex ------------------------------------------------------------------------------------

_OWNED_TOP = re.compile(r"^(model|model_provider)\s*=")


def foreign_toml_lines(text: str) -> list[str]:
    """The file's non-blank lines, endings included, without what driftdesk owns: top-level
    model/model_provider lines and [model_providers.driftdesk-*] tables. (Blank lines are pinned
    by the golden files; here we only allow those next to owned lines to move.)"""
    out: list[str] = []
    in_top = True
    skipping = False
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith("["):
            in_top = False
            skipping = stripped.startswith("[model_providers.driftdesk-")
        if skipping or not stripped or (in_top and _OWNED_TOP.match(stripped)):
            continue
        out.append(line)
    if out:  # the last foreign line may now be followed by our table
        out[-1] = out[-1].rstrip("\r\n")
    return out


@pytest.mark.parametrize("fixture", fixtures("codex"), ids=lambda p: p.name)
def test_codex_fixture_matches_golden(fixture: Path) -> None:
    before = fixture.read_bytes().decode("utf-8")
    _golden("codex", fixture, edit_codex_config(before, OPENAI, fixture))


@pytest.mark.parametrize("fixture", fixtures("codex"), ids=lambda p: p.name)
def test_codex_switch_keeps_every_foreign_byte(fixture: Path) -> None:
    before = fixture.read_bytes().decode("utf-8")
    after = edit_codex_config(before, OPENAI, fixture)
    assert foreign_toml_lines(after) == foreign_toml_lines(before)
    config = tomllib.loads(after)
    assert config["model"] == "gpt-test"
    assert config["model_provider"] == "driftdesk-test"
    provider = config["model_providers"]["driftdesk-test"]
    assert provider["wire_api"] == "responses"
    assert provider["base_url"] == OPENAI.base_url
    assert "env_key" not in provider and "experimental_bearer_token" not in provider
    argv = locations.key_helper_argv("test")
    assert provider["auth"] == {"command": argv[0], "args": argv[1:]}
    assert after.count('wire_api = "chat"') == before.count('wire_api = "chat"')
    # Everything else parses to the same values.
    old = tomllib.loads(before)
    for key in set(old) - {"model", "model_provider", "model_providers"}:
        assert config[key] == old[key]
    for pid, table in old.get("model_providers", {}).items():
        if not pid.startswith("driftdesk-"):
            assert config["model_providers"][pid] == table
    assert edit_codex_config(after, OPENAI, fixture) == after


def test_codex_user_tuning_inside_our_table_is_kept() -> None:
    fixture = FIXTURES / "codex" / "11_previous_driftdesk.toml"
    after = edit_codex_config(fixture.read_text(), OPENAI, fixture)
    assert "request_max_retries = 7 # user tuning we keep" in after
    assert "[model_providers.driftdesk-old]" in after  # another profile's table stays


@pytest.mark.parametrize("text", ["model = ", "[a]\nx = 1\n[a]\nx = 2\n", 'model_providers = "x"'])
def test_codex_refuses_what_does_not_parse(text: str) -> None:
    with pytest.raises(TargetParseError, match="untouched"):
        edit_codex_config(text, OPENAI, Path("config.toml"))


# --- .env -------------------------------------------------------------------------------------


@pytest.mark.parametrize("fixture", fixtures("env"), ids=lambda p: p.name)
def test_env_fixture_matches_golden(fixture: Path) -> None:
    before = fixture.read_bytes().decode("utf-8")
    _golden("env", fixture, edit_env_file(before, OPENAI, fixture))


@pytest.mark.parametrize("fixture", fixtures("env"), ids=lambda p: p.name)
def test_env_switch_keeps_other_lines(fixture: Path) -> None:
    before = fixture.read_bytes().decode("utf-8")
    after = edit_env_file(before, OPENAI, fixture)
    foreign = [ln for ln in before.splitlines(keepends=True) if "OPENAI_" not in ln]
    remaining = iter(after.splitlines(keepends=True))
    for line in foreign:
        line_body = line.rstrip("\r\n")
        assert any(c.rstrip("\r\n") == line_body for c in remaining), f"lost: {line!r}"
    # The switch writes no key; one already there stays (the CLI warns, --move-key moves it).
    assert after.count("OPENAI_API_KEY") == before.count("OPENAI_API_KEY")
    assert edit_env_file(after, OPENAI, fixture) == after


def test_env_refuses_garbage_lines() -> None:
    with pytest.raises(TargetParseError, match=r"\.env:2"):
        edit_env_file("A=1\nthis is not an assignment\n", OPENAI, Path(".env"))


def test_masking_keeps_variable_names_and_commands() -> None:
    from driftdesk.providers.masking import mask_secrets

    key = "sk-" + "a1b2c3d4" * 5
    codex = (
        '[model_providers.a]\nenv_key = "OPENAI_API_KEY"\n'
        f'[model_providers.b]\nenv_key = "{key}"\n'
        '[model_providers.c.auth]\ncommand = "driftdesk"\n'
    )
    masked, entries = mask_secrets("codex", codex)
    assert key not in masked and 'env_key = "sk-…c3d4"' in masked
    assert 'env_key = "OPENAI_API_KEY"' in masked and 'command = "driftdesk"' in masked
    assert [e["where"] for e in entries] == ["model_providers.b.env_key"]
    claude = '{"apiKeyHelper": "pass show anthropic-key-x", "awsAuthRefresh": "aws sso login x"}'
    assert mask_secrets("claude", claude) == (claude, [])
    broken = f'{{"env": {{"ANTHROPIC_API_KEY": "{key}", }}'  # does not parse: scanned by lines
    assert key not in mask_secrets("claude", broken)[0]
