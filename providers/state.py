"""What driftdesk wrote, and the backups it took, under ``driftdesk.paths.data_dir()``.

``state.json`` maps each file we wrote to the target, profile and sha256 of the bytes we wrote,
so ``status`` can tell whether someone changed the file since. ``backups/<slug>/original`` is
the file as it was before driftdesk first touched it (kept forever); ``backups/<slug>/history/``
keeps the last few versions we replaced.

A backup is a copy of a *user's* file, which may hold keys the user typed there (an
``ANTHROPIC_API_KEY`` in settings.json, an ``OPENAI_API_KEY`` line in .env, a Codex
``experimental_bearer_token``). Keys live in the OS keyring only, so every copy is written with
those values masked (``sk-…7f3a``, see ``providers.masking``), and ``<copy>.masked.json`` beside
it records which entries were masked. A backup therefore restores everything but the keys.
Copies taken by older versions (no ``.masked.json``) are masked the next time we back up the file.
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


def back_up(path: Path, current: bytes | None, kind: str | None = None) -> Path:
    """Keep ``current`` (the bytes about to be replaced; ``None``: the file does not exist),
    with key-like values masked. ``kind`` ("claude", "codex", "env") says how to read the file;
    None guesses from its name.

    The first call for a file also stores it as ``original``, never overwritten afterwards.
    """
    kind = kind or guess_kind(path)
    folder = backup_folder(path)
    folder.mkdir(parents=True, exist_ok=True)
    original = folder / "original"
    absent = folder / ("original" + ABSENT_MARKER)
    if not original.exists() and not absent.exists():
        atomic_write_bytes(folder / "path.txt", (str(path.resolve()) + "\n").encode())
        if current is None:
            atomic_write_bytes(absent, b"")
        else:
            _write_masked(original, current, kind)
        return folder  # the original is the first version: no history entry yet
    _mask_old_copies(folder, kind)
    if current is None:
        return folder
    history = folder / "history"
    history.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    _write_masked(history / f"{stamp}.bak", current, kind)
    for old in sorted(history.glob("*.bak"))[:-HISTORY_KEEP]:
        old.unlink(missing_ok=True)
        _sidecar(old).unlink(missing_ok=True)
    return folder


def guess_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".json"):
        return "claude"
    if name.endswith(".toml"):
        return "codex"
    return "env"


MASKED_SUFFIX = ".masked.json"


def _sidecar(copy: Path) -> Path:
    return copy.with_name(copy.name + MASKED_SUFFIX)


def _write_masked(copy: Path, data: bytes, kind: str) -> None:
    from driftdesk.providers.masking import mask_secrets

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", "replace")  # we never write a file that is not UTF-8
    masked_text, masked = mask_secrets(kind, text)
    atomic_write_bytes(copy, masked_text.encode("utf-8"), mode=0o600)
    atomic_write_json(
        _sidecar(copy),
        {
            "masked": masked,
            "note": "key-like values were masked in this copy: keys live in the OS keyring "
            "only (driftdesk key NAME), never in a backup",
        },
        mode=0o600,
    )


def _mask_old_copies(folder: Path, kind: str) -> None:
    """Mask copies an older driftdesk kept verbatim (they have no sidecar)."""
    copies = [folder / "original", *sorted((folder / "history").glob("*.bak"))]
    for copy in copies:
        if copy.is_file() and not _sidecar(copy).exists():
            _write_masked(copy, copy.read_bytes(), kind)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
