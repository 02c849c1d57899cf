"""The way back must work after every way in: ``restore`` of a read-only file that a forced
switch wrote, and a history index that does not parse. Real CLI, real files."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

pytestmark = pytest.mark.keyring


def test_restore_undoes_a_forced_switch_of_a_read_only_file(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    """Seen: after `switch --force` of a read-only settings file, `restore` said 'switch again
    with --force' and had no --force of its own: the switch could not be undone."""
    add_profile("a", protocol="anthropic", base_url="https://api.example.test/anthropic")
    home.claude_settings.parent.mkdir(parents=True)
    original = '{"theme": "dark"}\n'
    home.claude_settings.write_text(original)
    home.claude_settings.chmod(0o444)
    assert cli("switch", "a", "--target", "claude", "--force").returncode == 0
    refused = cli("restore", "claude", "--yes")
    assert refused.returncode == 1
    assert "read-only" in refused.stderr and "restore again with --force" in refused.stderr
    assert "switch again" not in refused.stderr
    assert "apiKeyHelper" in home.claude_settings.read_text()  # untouched
    forced = cli("restore", "claude", "--yes", "--force")
    assert forced.returncode == 0, forced.stderr
    assert home.claude_settings.read_text() == original
    assert home.claude_settings.stat().st_mode & 0o777 == 0o444  # the mode is kept


def test_a_history_index_that_does_not_parse_is_kept_aside_never_overwritten(
    home: Any, cli: Callable[..., Any], add_profile: Any
) -> None:
    """Seen: a damaged writes.json was dropped silently: `history` said 'no writes recorded'
    and the next switch wrote a new index over the earlier entries."""
    from driftdesk.providers import state

    add_profile("a", protocol="anthropic", base_url="https://a.example.test/anthropic")
    add_profile("b", protocol="anthropic", base_url="https://b.example.test/anthropic")
    for name in ("a", "b"):
        assert cli("switch", name, "--target", "claude").returncode == 0
    folder = state.backup_folder(home.claude_settings)
    index = folder / state.WRITES_FILE
    damaged = index.read_bytes()[:-20]  # a torn write
    index.write_bytes(damaged)

    listed = cli("history", "claude")
    assert listed.returncode == 0, listed.stderr
    (aside,) = folder.glob("writes.damaged-*.json")
    assert aside.read_bytes() == damaged
    (warning,) = listed.stderr.splitlines()
    assert warning.startswith("driftdesk: warning: ") and str(aside) in warning
    assert "does not parse" in warning

    assert cli("switch", "a", "--target", "claude").returncode == 0
    assert aside.read_bytes() == damaged  # never overwritten
    again = cli("history", "claude", "--json")
    assert str(aside) in again.stderr
    import json

    (history,) = json.loads(again.stdout)
    assert [w["profile"] for w in history["writes"]] == ["a"]  # the new index
    assert history["damaged_indexes"] == [str(aside)]

    # a switch that finds the index damaged keeps it aside too, and says so
    index.write_bytes(b"\xff not json")
    switched = cli("switch", "b", "--target", "claude")
    assert switched.returncode == 0, switched.stderr
    second = next(p for p in folder.glob("writes.damaged-*.json") if p != aside)
    assert second.read_bytes() == b"\xff not json" and str(second) in switched.stderr
