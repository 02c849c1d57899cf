"""Every real-world-shaped fixture, per target: switch, switch again; `restore` undoes exactly
one write; `restore --to original` gives the exact original bytes back; no backup on disk holds
a secret value. Real files in a temporary home, the real OS keyring."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from providers_testkit import FIXTURES

from driftdesk.providers import state
from driftdesk.providers.masking import secret_entries
from driftdesk.providers.profiles import Profile
from driftdesk.providers.restore import apply_restore, plan_restore
from driftdesk.providers.targets import apply_switch, plan_switch
from driftdesk.secrets import key_like_spans

pytestmark = pytest.mark.keyring

PROFILES = {
    "claude": (
        Profile("a", "anthropic", "http://127.0.0.1:9/anthropic", "model-a", haiku_model="h-1"),
        Profile("b", "anthropic", "http://127.0.0.1:8/anthropic", "model-b"),
    ),
    "codex": (
        Profile("a", "openai", "http://127.0.0.1:9/v1", "model-a"),
        Profile("b", "openai", "http://127.0.0.1:8/v1", "model-b", headers={"X-Team": "e"}),
    ),
    "env": (
        Profile("a", "openai", "http://127.0.0.1:9/v1", "model-a"),
        Profile("b", "openai", "http://127.0.0.1:8/v1", "model-b"),
    ),
}
CASES = [
    (kind, path)
    for kind in ("claude", "codex", "env")
    for path in sorted((FIXTURES / kind).iterdir())
    if path.is_file()
]


def _secrets(kind: str, text: str) -> set[str]:
    """The values that must never be in a backup: those under secret names (masking's rules)
    and anything shaped like a key or bearer token."""
    found = {entry.value for entry in secret_entries(kind, text)}
    found |= {text[a:b] for a, b in key_like_spans(text) if b - a >= 8}
    found |= set(re.findall(r"://[^\s/:@]+:([^\s/@]+)@", text))  # a URL's password
    return found


def test_a_dozen_fixtures_per_target() -> None:
    for kind in ("claude", "codex", "env"):
        assert sum(1 for k, _ in CASES if k == kind) >= 12


@pytest.mark.parametrize(("kind", "fixture"), CASES, ids=lambda v: getattr(v, "name", v))
def test_switch_twice_restore_one_then_the_original(home: Any, kind: str, fixture: Path) -> None:
    original = fixture.read_bytes()
    path = {
        "claude": home.claude_settings,
        "codex": home.codex_config,
        "env": home.project / ".env",
    }[kind]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(original)
    first, second = PROFILES[kind]
    apply_switch(plan_switch(first, kind))
    after_first = path.read_bytes()
    apply_switch(plan_switch(second, kind))
    after_second = path.read_bytes()
    assert after_second != after_first
    writes = state.writes(path)
    assert len(writes) == (2 if after_first != original else 1)

    apply_restore(plan_restore(kind))  # undo exactly one write: the second switch
    assert path.read_bytes() == after_first

    secrets = _secrets(kind, original.decode("utf-8"))
    backups = [p for p in state.backup_folder(path).rglob("*") if p.is_file()]
    assert backups
    for copy in backups:
        data = copy.read_bytes()
        for secret in secrets:
            assert secret.encode() not in data, (copy.name, secret[:4])

    apply_restore(plan_restore(kind, to="original"))
    assert path.read_bytes() == original
