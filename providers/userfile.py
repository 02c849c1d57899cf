"""Writing a user's config file: atomic, mode kept, through a symlink, and never over a change.

``replace_checked`` writes the new bytes to a temporary file in the same folder, fsyncs it, then
reads the destination once more just before the rename and gives up (``TargetChanged``) if it no
longer holds the bytes the edit was computed from — so another program's edit is never lost.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from driftdesk.fileio import atomic_write_bytes
from driftdesk.providers.errors import TargetChanged


def destination(path: Path) -> Path:
    """Dotfile managers symlink these files: write through the link, keep the link."""
    return path.resolve() if path.is_symlink() else path


def current_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def check_writable(path: Path, force: bool = False, action: str = "switch") -> None:
    """Refuse a read-only file (unless ``force``) and a symlink into a folder that is missing
    (driftdesk creates no folders at a link's far end). ``action``: the command the refusal
    tells the user to run again with --force ("switch", "restore")."""
    from driftdesk.providers.errors import SwitchError

    target = destination(path)
    if path.is_symlink() and not target.parent.is_dir():
        raise SwitchError(
            f"{path} is a symlink to {target}, whose folder does not exist; driftdesk creates "
            "no folders there and left everything untouched"
        )
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return
    if not mode & 0o222 and not force:
        raise SwitchError(
            f"{path} is read-only (mode {mode & 0o777:o}), so someone froze it on purpose; "
            f"driftdesk left it untouched — {action} again with --force to write it anyway "
            "(its mode is kept)"
        )


def replace_checked(path: Path, data: bytes | None, expected: bytes | None) -> None:
    """Make ``path`` hold ``data`` (None: remove it) if it still holds ``expected``."""
    target = destination(path)

    def unchanged() -> None:
        if current_bytes(target) != expected:
            raise TargetChanged(
                f"{path} changed since driftdesk read it; nothing was written — plan the switch "
                "again"
            )

    if data is None:
        unchanged()
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        return
    atomic_write_bytes(target, data, before_replace=unchanged)
