"""Writing a user's config file: atomic, mode kept, through a symlink, and never over a change.

``replace_checked`` writes the new bytes to a temporary file in the same folder, fsyncs it, then
reads the destination once more just before the rename and gives up (``TargetChanged``) if it no
longer holds the bytes the edit was computed from — so another program's edit is never lost.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from driftdesk.providers.errors import TargetChanged

NEW_FILE_MODE = 0o600


def destination(path: Path) -> Path:
    """Dotfile managers symlink these files: write through the link, keep the link."""
    return path.resolve() if path.is_symlink() else path


def current_bytes(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def check_writable(path: Path, force: bool = False) -> None:
    """Refuse a read-only file (unless ``force``) and a symlink into a folder that is missing
    (driftdesk creates no folders at a link's far end)."""
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
            "driftdesk left it untouched — switch again with --force to write it anyway "
            "(its mode is kept)"
        )


def replace_checked(path: Path, data: bytes | None, expected: bytes | None) -> None:
    """Make ``path`` hold ``data`` (None: remove it) if it still holds ``expected``."""
    target = destination(path)
    changed = TargetChanged(
        f"{path} changed since driftdesk read it; nothing was written — plan the switch again"
    )
    if data is None:
        if current_bytes(target) != expected:
            raise changed
        with contextlib.suppress(FileNotFoundError):
            target.unlink()
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = NEW_FILE_MODE
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp_name, mode)
        if current_bytes(target) != expected:
            raise changed
        os.replace(tmp_name, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        raise
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
