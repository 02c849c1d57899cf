"""The keys a shared page must not hold: a run's profile key, read from the keyring for the
page's scrubber (``analysis.page`` never opens the keyring; the faces hand the key in)."""

from __future__ import annotations


def keys_to_scrub(profile: str | None) -> tuple[str, ...]:
    """The key of ``profile``, or none when it has none or the keyring cannot answer (a page
    is then scrubbed of what looks like a key, as the run dir's files already are)."""
    if not profile:
        return ()
    from driftdesk.providers.keys import get_key

    try:
        return (get_key(profile),)
    except Exception:  # no key, no keyring, a locked one: the key-shaped scrub still applies
        return ()
