"""What driftdesk wrote, and the backups it took, under ``driftdesk.paths.data_dir()``.

``state.json`` maps each file we wrote to the target, profile and sha256 of the bytes we wrote,
so ``status`` can tell whether someone changed the file since. ``backups/<slug>/original`` is
the file as it was before driftdesk first touched it (kept forever); ``backups/<slug>/history/``
keeps the last few versions we replaced. Nothing here ever holds a key we put there: we never
write keys into target files, so neither state nor backups can contain one of ours.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from driftdesk import paths
from driftdesk.fileio import atomic_write_bytes, atomic_write_json

HISTORY_KEEP = 10
ABSENT_MARKER = ".absent"  # the file did not exist before driftdesk created it


@dataclass
class WriteRecord:
    path: str
    target: str
    profile: str | None
    sha256: str
    written_at: str
    backup: str | None = None


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def state_file() -> Path:
    return paths.data_dir() / "state.json"


def backups_dir() -> Path:
    return paths.data_dir() / "backups"


def _load() -> dict[str, Any]:
    try:
        data = json.loads(state_file().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {"files": {}}
    except (json.JSONDecodeError, UnicodeDecodeError):
        # Our own bookkeeping only: a damaged state means "unknown drift", never a refusal.
        return {"files": {}}
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return {"files": {}}
    return data


def records() -> dict[str, WriteRecord]:
    out: dict[str, WriteRecord] = {}
    for path, raw in _load()["files"].items():
        with contextlib.suppress(TypeError):
            out[path] = WriteRecord(**raw)
    return out


def record_for(path: Path) -> WriteRecord | None:
    return records().get(str(path.resolve()))


def record_write(path: Path, target: str, profile: str | None, data: bytes) -> WriteRecord:
    state = _load()
    key = str(path.resolve())
    record = WriteRecord(
        path=key,
        target=target,
        profile=profile,
        sha256=sha256_bytes(data),
        written_at=_now(),
        backup=str(backup_folder(path)),
    )
    state["files"][key] = asdict(record)
    atomic_write_json(state_file(), state)
    return record


def backup_folder(path: Path) -> Path:
    resolved = str(path.resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved.strip("/"))[-80:]
    return backups_dir() / f"{slug}-{digest}"


def back_up(path: Path, current: bytes | None) -> Path:
    """Keep ``current`` (the bytes about to be replaced; ``None``: the file does not exist).

    The first call for a file also stores it as ``original``, never overwritten afterwards.
    """
    folder = backup_folder(path)
    folder.mkdir(parents=True, exist_ok=True)
    original = folder / "original"
    absent = folder / ("original" + ABSENT_MARKER)
    if not original.exists() and not absent.exists():
        atomic_write_bytes(folder / "path.txt", (str(path.resolve()) + "\n").encode())
        if current is None:
            atomic_write_bytes(absent, b"")
        else:
            atomic_write_bytes(original, current)
        return folder  # the original is the first version: no history entry yet
    if current is None:
        return folder
    history = folder / "history"
    history.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    atomic_write_bytes(history / f"{stamp}.bak", current)
    for old in sorted(history.glob("*.bak"))[:-HISTORY_KEEP]:
        old.unlink(missing_ok=True)
    return folder


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
