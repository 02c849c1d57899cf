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
