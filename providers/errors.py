"""Every error the provider core raises on purpose, in one module that imports nothing of ours.

The modules that raise them re-export them (``driftdesk.providers.keys.KeyMissing`` is this
``KeyMissing``), so callers keep importing from where the work happens. ``EXPECTED`` is what a
face reports as one clear line; anything else is a bug and keeps its traceback.
"""

from __future__ import annotations


class ProfileError(ValueError):
    """A profile that cannot be stored or used as given (bad name, protocol, URL...)."""


class ProfileNotFound(ProfileError, LookupError):
    pass


class ConfigFileError(ProfileError):
    """driftdesk's own config file does not parse; it is left untouched."""


class KeyringUnavailable(RuntimeError):
    """No usable OS keyring (no Secret Service, locked, or a fail/plaintext backend)."""


class KeyWithheld(KeyringUnavailable):
    """This process runs inside a driftdesk run (``DRIFTDESK_RUN_CHILD``): no real key for it."""


class KeyMissing(LookupError):
    """The keyring works but holds no key for this profile."""


class KeyUnusable(KeyMissing):
    """The keyring holds a key for this profile that no HTTP header can carry (a control
    character, stored by an older version): as good as none, and said so."""


class SwitchError(RuntimeError):
    """A switch that cannot be planned or applied as asked."""


class TargetParseError(SwitchError):
    """The target file does not parse; it was left untouched."""


class TargetChanged(SwitchError):
    """The file changed between plan and apply; nothing was written."""


class UnsavedKeys(SwitchError):
    """The switch would remove keys that exist nowhere else (not in the keyring; backups keep
    keys masked); nothing was written. Apply with ``discard_unsaved_keys=True`` to go on."""


class RestoreError(SwitchError):
    """A restore that cannot be done as asked (no such write, a copy that cannot be made exact
    again); nothing was written."""


class ImportProblem(ValueError):
    """The source cannot be imported as given (missing, unparseable, no model...)."""


EXPECTED: tuple[type[BaseException], ...] = (
    ProfileError,
    KeyringUnavailable,
    KeyMissing,
    SwitchError,
    ImportProblem,
    OSError,
)
