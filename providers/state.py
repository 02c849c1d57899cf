"""What driftdesk wrote, and the backups it took, under ``driftdesk.paths.data_dir()``.

``state.json`` maps each file we wrote to the target, profile and sha256 of the bytes we wrote,
so ``status`` can tell whether someone changed the file since. ``backups/<slug>/original`` is
the file as it was before driftdesk first touched it (kept forever); ``backups/<slug>/history/``
keeps the last few versions we replaced.

A backup is a copy of a *user's* file, which may hold keys the user typed there (an
``ANTHROPIC_API_KEY`` in settings.json, an ``OPENAI_API_KEY`` line in .env, a Codex
``experimental_bearer_token``). Keys live in the OS keyring only, so every copy is written with
those values masked (``sk-…7f3a``) and the masked values go to the OS keyring, one entry each
(``providers.backupvault``): a copy restores byte for byte, and no file holds the key.

``backups/<slug>/writes.json`` is the file's write history: one entry per write driftdesk made
(switch, import, restore) with its time, profile, a one-line summary of the keys that changed,
and which copy holds the file as it was just before (``original``, ``history/<stamp>.bak``, or
none when the file did not exist). ``history``/``restore`` read it (``providers.restore``).
Copies taken by older versions with no ``.masked.json`` are verbatim: they are masked (exactly)
the next time we back up the file.
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


def record_write(
    path: Path,
    target: str,
    profile: str | None,
    data: bytes | None,
    before: str | None = None,
    before_sha256: str | None = None,
    action: str = "switch",
    summary: str = "",
) -> WriteRecord:
    """Record that driftdesk wrote ``data`` to ``path`` (None: removed it), in ``state.json`` and
    in the file's write history (``before``: the copy holding what it replaced)."""
    from driftdesk.filelock import locked

    key = str(path.resolve())
    record = WriteRecord(
        path=key,
        target=target,
        profile=profile,
        sha256=sha256_bytes(data) if data is not None else "",
        written_at=_now(),
        backup=str(backup_folder(path)),
    )
    with locked("state.json"):
        state = _load()
        state["files"][key] = asdict(record)
        atomic_write_json(state_file(), state)
    if before is not None or action != "switch" or before_sha256 is not None:
        append_write(
            path,
            {
                "at": record.written_at,
                "action": action,
                "target": target,
                "profile": profile,
                "summary": summary,
                "before": before,
                "before_sha256": before_sha256,
                "after_sha256": record.sha256 or None,
            },
        )
    return record


WRITES_FILE = "writes.json"
WRITTEN_COPY = "written"  # what driftdesk last wrote (masked, exact): drift is diffed against it


def keep_written(path: Path, data: bytes, kind: str) -> None:
    """Keep what driftdesk just wrote, so ``status`` can say which keys drifted since. Best
    effort: without a keyring for its secrets the drift is still seen (by sha256), unnamed."""
    from driftdesk.providers import backupvault
    from driftdesk.providers.errors import KeyringUnavailable

    copy = backup_folder(path) / WRITTEN_COPY
    backupvault.forget_copy(copy)
    with contextlib.suppress(KeyringUnavailable):
        backupvault.write_copy(copy, data, kind, _entry_prefix(copy))


def written_bytes(path: Path) -> bytes | None:
    """What driftdesk last wrote to ``path``, if it kept it."""
    from driftdesk.providers import backupvault
    from driftdesk.providers.errors import KeyringUnavailable, RestoreError

    copy = backup_folder(path) / WRITTEN_COPY
    if not copy.is_file():
        return None
    try:
        return backupvault.read_copy(copy)
    except (RestoreError, KeyringUnavailable):
        return None


def writes(path: Path) -> list[dict[str, Any]]:
    """The write history of ``path``, oldest first, each with its number ``n`` (from 1).

    An index that does not parse is renamed aside (``damaged_indexes`` lists it) and the
    history starts anew: the next write must not replace it with an index of one entry."""
    index = backup_folder(path) / WRITES_FILE
    try:
        raw = index.read_bytes()
    except FileNotFoundError:
        return []
    try:
        data = json.loads(raw.decode("utf-8"))
        entries = data["writes"]
        if not isinstance(entries, list):
            raise TypeError
    except (ValueError, KeyError, TypeError):  # JSON or UTF-8 errors are ValueErrors
        _keep_aside(index, raw)
        return []
    return [
        dict(entry, n=index + 1) for index, entry in enumerate(entries) if isinstance(entry, dict)
    ]


DAMAGED_PREFIX = "writes.damaged-"


def _keep_aside(index: Path, raw: bytes) -> None:
    """Rename a damaged index to ``writes.damaged-<stamp>.json`` (never over another), if it
    still holds ``raw`` (another process may have moved or rewritten it meanwhile)."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    aside = index.with_name(f"{DAMAGED_PREFIX}{stamp}.json")
    with contextlib.suppress(FileNotFoundError):
        if index.read_bytes() == raw and not aside.exists():
            index.rename(aside)


def damaged_indexes(path: Path) -> list[Path]:
    """Write-history indexes of ``path`` that did not parse, kept aside, oldest first."""
    return sorted(backup_folder(path).glob(f"{DAMAGED_PREFIX}*.json"))


def append_write(path: Path, entry: dict[str, Any]) -> None:
    from driftdesk.filelock import locked

    folder = backup_folder(path)
    with locked(folder.name):
        entries = [{k: v for k, v in e.items() if k != "n"} for e in writes(path)]
        entries.append(entry)
        atomic_write_json(folder / WRITES_FILE, {"path": str(path.resolve()), "writes": entries})


def backup_folder(path: Path) -> Path:
    resolved = str(path.resolve())
    digest = hashlib.sha256(resolved.encode()).hexdigest()[:10]
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", resolved.strip("/"))[-80:]
    return backups_dir() / f"{slug}-{digest}"


ABSENT = "absent"  # in the write history: the file did not exist before that write


def back_up(path: Path, current: bytes | None, kind: str | None = None) -> str:
    """Keep ``current`` (the bytes about to be replaced; ``None``: the file does not exist),
    masked, its secrets in the keyring. ``kind`` ("claude", "codex", "env") says how to read
    the file; None guesses from its name. Returns which copy holds it (for ``record_write``).

    The first call for a file also stores it as ``original``, never overwritten afterwards.
    Raises ``KeyringUnavailable`` (nothing written) when the secrets cannot be kept.
    """
    from driftdesk.providers import backupvault

    kind = kind or guess_kind(path)
    folder = backup_folder(path)
    original = folder / "original"
    absent = folder / ("original" + ABSENT_MARKER)
    if not original.exists() and not absent.exists():
        if current is None:
            atomic_write_bytes(absent, b"")
        else:
            backupvault.write_copy(original, current, kind, _entry_prefix(original))
        atomic_write_bytes(folder / "path.txt", (str(path.resolve()) + "\n").encode())
        return absent.name if current is None else original.name
    _mask_old_copies(folder, kind)
    if current is None:
        return ABSENT
    history = folder / "history"
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    copy = history / f"{stamp}.bak"
    backupvault.write_copy(copy, current, kind, _entry_prefix(copy))
    for old in sorted(history.glob("*.bak"))[:-HISTORY_KEEP]:
        backupvault.forget_copy(old)
    return f"history/{copy.name}"


def _entry_prefix(copy: Path) -> str:
    return str(copy.relative_to(backups_dir()))


def guess_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".json"):
        return "claude"
    if name.endswith(".toml"):
        return "codex"
    return "env"


def _mask_old_copies(folder: Path, kind: str) -> None:
    """Mask copies an older driftdesk kept verbatim (they have no sidecar), exactly."""
    from driftdesk.providers import backupvault

    copies = [folder / "original", *sorted((folder / "history").glob("*.bak"))]
    for copy in copies:
        if copy.is_file() and not backupvault.sidecar(copy).exists():
            backupvault.write_copy(copy, copy.read_bytes(), kind, _entry_prefix(copy))


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
