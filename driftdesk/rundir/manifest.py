"""A run's manifest (``manifest.json``): THE reader and a typed view of what it says.

``read_manifest`` is the one place that opens and parses a manifest; every other module calls
it (analysis wraps its errors as its own ``SourceError``). ``RunManifest`` is the typed view of
the fields readers ask about, read as tolerantly as they were read before it existed: a field
an older manifest lacks (a run from before ``client``, ``check_rule``, ``executor``...) is None
or empty, never an error. A text field is a non-empty string or None (the trend and the agent
identity read them so), a repeat an int (not a bool) or None, a list field the objects (or
the strings) of a JSON list, else empty: no value of one field makes the others unreadable. ``to_json`` gives back the manifest as written, every key in its
order, the ones this view has no field for included: reading it never changes a manifest.

Writing a run's manifest (what a run spec says, and the run's status as it goes) is the
engine's; writing it to disk is ``writes``' (``write_manifest``, ``write_final_manifest``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.rundir.layout import MANIFEST_FILE


class ManifestUnparsable(ValueError):
    """``manifest.json`` is there but its text is not JSON (``cause`` says why)."""

    def __init__(self, path: Path, cause: ValueError) -> None:
        super().__init__(f"{path} does not parse as JSON: {cause}")
        self.path = path
        self.cause = cause


class ManifestNotObject(ValueError):
    """``manifest.json`` parses, but to something other than a JSON object."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path}: expected a JSON object")
        self.path = path


def read_manifest(run_dir: Path) -> dict[str, Any]:
    """The manifest of ``run_dir`` as written. Raises ``FileNotFoundError`` when it has none
    (not a run dir), ``ManifestUnparsable`` or ``ManifestNotObject`` (both ``ValueError``) when
    it is not a JSON object, and ``OSError`` (or ``UnicodeDecodeError``) when it cannot be read."""
    path = Path(run_dir) / MANIFEST_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise FileNotFoundError(f"{run_dir} is not a run dir (no {MANIFEST_FILE})") from exc
    except json.JSONDecodeError as exc:
        raise ManifestUnparsable(path, exc) from exc
    if not isinstance(data, dict):
        raise ManifestNotObject(path)
    return data


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


@dataclass(frozen=True)
class RunManifest:
    """The fields of a manifest that readers ask about, typed; ``data`` is the whole object."""

    run_id: str | None
    profile: str | None
    model: str | None
    base_url: str | None
    agent: str | None
    status: str | None
    started_at: str | None
    ended_at: str | None
    repeat: int | None
    suite: dict[str, Any]  # {"path", "name", "sha256"}; {} when the manifest has none
    client: dict[str, Any] | None  # {"name", "version"} of the client behind the agent
    check_rule: str | None  # how a task's check exit became an outcome; None before it was named
    tasks: list[str]
    resumes: list[dict[str, Any]]
    adaptive: dict[str, Any] | None
    injection: dict[str, Any] | None
    # "absorb" or "retry" (--link-faults); None: a run from before the mode was recorded (retried)
    link_faults: str | None
    # How the concurrency ran (reruns/run_control.py): its setting, range, rate-limit
    # episodes, retunes; None: a run from before it was recorded
    concurrency_control: dict[str, Any] | None
    imported_from: dict[str, Any] | None
    data: dict[str, Any] = field(repr=False)

    @property
    def suite_name(self) -> str | None:
        return _text(self.suite.get("name"))

    @property
    def suite_path(self) -> str | None:
        return _text(self.suite.get("path"))

    @property
    def suite_sha256(self) -> str | None:
        return _text(self.suite.get("sha256"))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunManifest:
        """The typed view of a manifest object, of any age: what it lacks reads as None/empty."""
        repeat = data.get("repeat")
        return cls(
            run_id=_text(data.get("run_id")),
            profile=_text(data.get("profile")),
            model=_text(data.get("model")),
            base_url=_text(data.get("base_url")),
            agent=_text(data.get("agent")),
            status=_text(data.get("status")),
            started_at=_text(data.get("started_at")),
            ended_at=_text(data.get("ended_at")),
            repeat=repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else None,
            suite=_mapping(data.get("suite")),
            client=data.get("client") if isinstance(data.get("client"), dict) else None,
            check_rule=_text(data.get("check_rule")),
            tasks=[str(t) for t in _list(data.get("tasks"))],
            resumes=[r for r in _list(data.get("resumes")) if isinstance(r, dict)],
            adaptive=data.get("adaptive") if isinstance(data.get("adaptive"), dict) else None,
            injection=data.get("injection") if isinstance(data.get("injection"), dict) else None,
            link_faults=_text(data.get("link_faults")),
            concurrency_control=(
                data.get("concurrency_control")
                if isinstance(data.get("concurrency_control"), dict)
                else None
            ),
            imported_from=(
                data.get("imported_from") if isinstance(data.get("imported_from"), dict) else None
            ),
            data=data,
        )

    def to_json(self) -> dict[str, Any]:
        """The manifest object as written (a copy): every key, in its order."""
        return dict(self.data)

    @classmethod
    def read(cls, run_dir: Path) -> RunManifest:
        """``read_manifest`` typed (its errors unchanged)."""
        return cls.from_json(read_manifest(run_dir))
