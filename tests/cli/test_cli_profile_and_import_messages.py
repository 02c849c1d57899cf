"""The CLI's small surprises for a new user, each through the real ``driftdesk`` subprocess."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driftdesk.providers.profiles import Profile, ProfileStore


@pytest.mark.parametrize(
    ("given", "clean"),
    [
        ("https://api.example.com/v1?utm_source=x", "https://api.example.com/v1"),
        ("https://api.example.com/v1/chat/completions", "https://api.example.com/v1"),
    ],
)
def test_profile_add_warns_about_a_pasted_url_and_offers_the_clean_one(
    home: object, cli: object, given: str, clean: str
) -> None:
    result = cli(  # type: ignore[operator]
        "profile", "add", "p", "--protocol", "openai", "--base-url", given, "--model", "m"
    )
    assert result.returncode == 0, result.stderr
    assert "warning" in result.stderr and given in result.stderr
    assert f"driftdesk profile edit p --base-url {clean}" in result.stderr


def test_env_file_in_a_missing_folder_is_refused(home: object, cli: object) -> None:
    ProfileStore().save(Profile("p", "openai", "http://127.0.0.1:9/v1", "m"))
    target = Path("no-such-folder") / ".env"
    result = cli("switch", "p", "--target", "env", "--env-file", str(target))  # type: ignore[operator]
    assert result.returncode != 0
    assert "does not exist" in result.stderr and "Traceback" not in result.stderr
    assert not target.parent.exists()


def test_profile_list_columns_line_up(home: object, cli: object) -> None:
    ProfileStore().save(Profile("a", "openai", "http://127.0.0.1:9/v1", "a-much-longer-model"))
    ProfileStore().save(Profile("longer-name", "anthropic", "https://x.example.com", "m"))
    result = cli("profile", "list")  # type: ignore[operator]
    lines = result.stdout.splitlines()
    assert lines[0].split() == ["NAME", "PROTOCOL", "MODEL", "BASE", "URL", "KEY"]
    for column in ("PROTOCOL", "MODEL", "BASE URL"):
        start = lines[0].index(column)
        for line in lines[1:]:
            assert line[start - 2 : start] == "  " and line[start] != " ", (column, line)


def test_import_counts_and_articles_agree(home: object, tmp_path: Path, cli: object) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(json.dumps({"task_id": "t1", "success": True}) + "\n")
    result = cli("import", str(one), "--format", "jsonl", "--out", str(tmp_path / "r"))  # type: ignore[operator]
    assert result.returncode == 0, result.stderr
    assert "imported 1 attempt of 1 task (a jsonl file)" in result.stdout
    wrong = tmp_path / "wrong.json"
    wrong.write_text("[]")
    result = cli("import", str(wrong), "--format", "appworld")  # type: ignore[operator]
    assert "not an appworld file" in result.stderr


def test_importing_the_same_file_twice_says_it_was_imported_before(
    home: object, tmp_path: Path, cli: object
) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"task_id": "t1", "success": True}) + "\n")
    out = tmp_path / "runs"
    first = cli("import", str(results), "--out", str(out))  # type: ignore[operator]
    assert first.returncode == 0, first.stderr
    again = cli("import", str(results), "--out", str(out))  # type: ignore[operator]
    assert again.returncode != 0
    assert "was imported before" in again.stderr and str(next(out.iterdir())) in again.stderr
    assert len(list(out.iterdir())) == 1  # no "-2" copy
