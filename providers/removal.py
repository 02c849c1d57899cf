"""Removing a profile: its keyring entry first (so a key is never orphaned), then the profile,
and which target files still point at it. One function for the CLI and the TUI."""

from __future__ import annotations

from dataclasses import dataclass, field

from driftdesk.providers.keys import KeyringUnavailable, delete_key
from driftdesk.providers.profiles import ProfileStore
from driftdesk.providers.status import TargetStatus, collect_status


@dataclass
class Removed:
    name: str
    had_key: bool
    still_pointing: list[TargetStatus] = field(default_factory=list)


def remove_profile(name: str) -> Removed:
    """Raises ``ProfileNotFound``, or ``KeyringUnavailable`` (a keyed profile is then kept)."""
    store = ProfileStore()
    profile = store.get(name)  # a clear "no profile named" before touching the keyring
    try:
        had_key = delete_key(name)
    except KeyringUnavailable as exc:
        if not profile.no_key:
            raise KeyringUnavailable(
                f"{exc}; profile {name!r} was kept so its key is not orphaned"
            ) from exc
        had_key = False  # a keyless profile has no key to orphan
    store.remove(name)
    return Removed(name, had_key, [row for row in collect_status() if row.profile == name])
