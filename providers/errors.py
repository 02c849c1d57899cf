"""The errors a face reports as one clear line (anything else is a bug and keeps its traceback)."""

from __future__ import annotations


def expected_errors() -> tuple[type[BaseException], ...]:
    from providers.importer import ImportProblem
    from providers.keys import KeyMissing, KeyringUnavailable
    from providers.profiles import ProfileError
    from providers.targets import SwitchError

    return (ProfileError, KeyringUnavailable, KeyMissing, SwitchError, ImportProblem, OSError)
