"""``history`` and ``restore``: every write driftdesk made to a user's file, and the way back.

Each write is numbered in the file's history (``state.writes``). ``plan_restore`` computes the
file as it was just before write N (``last``: the latest write, ``original``: before driftdesk
first touched it), byte for byte from the backup copy and the keyring (``backupvault``), with
the diff a face shows; ``apply_restore`` writes it the way a switch writes (lock, no-clobber
check, backup of what it replaces, atomic rename) and records it as a write of its own, so a
restore can be undone by another.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.providers import backupvault, state, targets
from driftdesk.providers.errors import RestoreError
from driftdesk.secrets import redact


@dataclass
class FileHistory:
    path: Path
    target: str
    writes: list[dict[str, Any]]  # oldest first: n, at, action, profile, summary, before...
    has_original: bool  # a copy of the file as it was before driftdesk first wrote it
    # earlier history indexes that did not parse, kept aside: the writes they listed are not in
    # ``writes`` (numbering starts again after them)
    damaged_indexes: list[Path] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "path": str(self.path),
            "target": self.target,
            "writes": self.writes,
            "has_original": self.has_original,
            "damaged_indexes": [str(p) for p in self.damaged_indexes],
        }

    def damage_warning(self) -> str | None:
        """One line naming the damaged indexes kept aside, if any."""
        if not self.damaged_indexes:
            return None
        names = ", ".join(str(p) for p in self.damaged_indexes)
        return (
            f"the write history of {self.path} does not parse; kept aside, not overwritten: "
            f"{names} (the writes it listed are not numbered here; the copies are kept)"
        )


@dataclass
class RestorePlan:
    target: str
    path: Path
    label: str  # "before write 3 (switch to work at ...)" / "the original"
    current_text: str | None
    restored_text: str | None  # None: the file did not exist then, restoring removes it
    diff: str
    changed: bool
    profile: str | None  # what the file pointed at once restored, as far as driftdesk knows
    notes: list[str] = field(default_factory=list)

    def __repr__(self) -> str:  # the texts may hold a user's key
        return f"RestorePlan({self.target!r}, {str(self.path)!r}, {self.label!r})"


def file_history(path: Path, target: str | None = None) -> FileHistory:
    folder = state.backup_folder(path)
    has_original = (folder / "original").exists() or (
        folder / ("original" + state.ABSENT_MARKER)
    ).exists()
    entries = state.writes(path)  # first: it keeps a damaged index aside
    return FileHistory(
        path=path,
        target=target or state.guess_kind(path),
        writes=entries,
        has_original=has_original,
        damaged_indexes=state.damaged_indexes(path),
    )


def all_histories() -> list[FileHistory]:
    """Every file driftdesk has backed up, in path order."""
    out = []
    root = state.backups_dir()
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        recorded = _recorded_path(folder)
        if recorded is not None:
            out.append(file_history(recorded, _recorded_target(recorded)))
    return sorted(out, key=lambda h: str(h.path))


def _recorded_path(folder: Path) -> Path | None:
    for source in (folder / state.WRITES_FILE, folder / "path.txt"):
        try:
            text = source.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            continue
        if source.name == "path.txt":
            return Path(text.strip()) if text.strip() else None
        try:
            return Path(json.loads(text)["path"])
        except (json.JSONDecodeError, KeyError, TypeError):
            continue
    return None


def _recorded_target(path: Path) -> str:
    writes = state.writes(path)
    if writes and writes[-1].get("target"):
        return str(writes[-1]["target"])
    record = state.record_for(path)
    return record.target if record else state.guess_kind(path)


def plan_restore(
    target: str,
    scope: str = "user",
    env_file: Path | str | None = None,
    to: str = "last",
    project_dir: Path | None = None,
) -> RestorePlan:
    """The file as it was before write ``to`` ("last", "original" or a number). Writes nothing."""
    path = targets.target_path(target, scope, env_file, project_dir)
    history = file_history(path, target)
    folder = state.backup_folder(path)
    writes = history.writes
    if not writes and not history.has_original:
        raise RestoreError(f"driftdesk has no record of writing {path}: nothing to restore")
    if to == "original" or (not writes and to == "last"):
        entry = writes[0] if writes else None
        before = entry["before"] if entry else None
        if before is None:
            before = (
                "original" if (folder / "original").exists() else "original" + state.ABSENT_MARKER
            )
        label = "the original (before driftdesk first wrote it)"
    else:
        if to == "last":
            index = len(writes)
        else:
            try:
                index = int(to)
            except ValueError:
                raise RestoreError(
                    f"--to expects last, original or a write number, got {to!r}"
                ) from None
            if not 1 <= index <= len(writes):
                raise RestoreError(
                    f"{path} has writes 1 to {len(writes)} (see driftdesk history); no write {index}"
                )
        entry = writes[index - 1]
        before = entry.get("before")
        label = f"before write {index} ({_describe(entry)})"
    restored = _copy_bytes(folder, before, entry)
    current = targets.read_text(path)
    restored_text = None if restored is None else restored.decode("utf-8", "surrogateescape")
    secrets = targets.secret_values(target, current or "", path)
    secrets += targets.secret_values(target, restored_text or "", path)
    diff = redact(targets.unified_diff(path, current, restored_text or ""), secrets)
    notes = []
    if restored is None:
        notes.append(f"{path} did not exist then: restoring removes it (backed up first)")
    last = writes[-1] if writes else None
    if (
        last
        and current is not None
        and last.get("after_sha256")
        not in (
            None,
            state.sha256_bytes(current.encode("utf-8", "surrogateescape")),
        )
    ):
        notes.append(
            f"{path} changed since driftdesk's last write: those edits are undone too "
            "(the current file is backed up first, so `driftdesk restore` brings them back)"
        )
    position = writes.index(entry) if entry in writes else 0
    profile = writes[position - 1].get("profile") if position > 0 else None
    return RestorePlan(
        target=target,
        path=path,
        label=label,
        current_text=current,
        restored_text=restored_text,
        diff=diff,
        changed=restored_text != current,
        profile=profile,
        notes=notes,
    )


def _describe(entry: dict[str, Any]) -> str:
    what = entry.get("action", "switch")
    if entry.get("profile"):
        what += f" to {entry['profile']}"
    return f"{what} at {entry.get('at', '?')}"


def _copy_bytes(folder: Path, before: str | None, entry: dict[str, Any] | None) -> bytes | None:
    if before in (None, state.ABSENT, "original" + state.ABSENT_MARKER):
        return None
    assert before is not None
    copy = folder / before
    if not copy.is_file():
        raise RestoreError(
            f"the copy taken before that write was pruned (driftdesk keeps the original and the "
            f"last {state.HISTORY_KEEP} versions): {copy}"
        )
    data = backupvault.read_copy(copy)
    expected = entry.get("before_sha256") if entry else None
    if expected and state.sha256_bytes(data) != expected:
        raise RestoreError(f"{copy} does not hold the file as it was before that write")
    return data


def apply_restore(plan: RestorePlan, force: bool = False) -> None:
    """Write ``plan`` like a switch: lock, no-clobber check, backup, atomic write, recorded.
    A read-only file is refused unless ``force`` (mode kept), as a switch refuses it: so a
    forced switch of one can be undone by a forced restore."""
    targets.apply_edit(
        plan.path,
        plan.target,
        plan.current_text,
        plan.restored_text,
        plan.profile,
        "restore",
        summary_prefix=f"restored {plan.label}: ",
        force=force,
    )
