"""The runs catalog: which run dirs are under some folders, what each is (``RunInfo``), newest
first, from their manifests, each kept parsed until its file changes.

Ground code: what only the cores know about a run (is a process still running it, why it
stopped, is its suite still there, its last measured success, its agent's label) is handed in
as ``RunFacts`` (``driftdesk.reruns.run_facts.run_facts()`` makes the cores' one).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.rundir.layout import MANIFEST_FILE
from driftdesk.rundir.manifest import read_manifest


@dataclass(frozen=True)
class RunFacts:
    """What the catalog asks of the cores about a run dir (ground imports none of them)."""

    is_live: Callable[[Path], bool]  # some process holds the run dir's lock
    interruption_reason: Callable[[Path, dict[str, Any]], str | None]
    process_gone: str  # why a "running" run that no process holds stopped
    suite_available: Callable[[dict[str, Any]], bool]  # its suite can be read again
    known_success: Callable[[Path], float | None]  # the success last measured, if any
    agent_label: Callable[[dict[str, Any]], str]  # ``codex 0.171.0``


@dataclass(frozen=True)
class RunInfo:
    run_id: str
    path: Path
    status: str
    profile: str
    model: str
    started_at: str
    # without its task list (``manifest_of``)
    manifest: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    # Interrupted (manifest "interrupted", or "running" with no process holding its lock: it
    # was killed): ``resume_run`` can run its missing slots.
    resumable: bool = False
    stopped_because: str | None = None  # an interrupted run's reason (``interruption_reason``)
    success: float | None = None  # share of judged attempts that passed (latest row per slot)
    # The agent and its client's version (``codex 0.171.0``), from the manifest, printable.
    agent: str = field(default="?", compare=False)

    @property
    def details(self) -> str:
        """Suite × repeats · model · success: what tells runs apart besides their ids."""
        suite = self.manifest.get("suite")
        name = suite.get("name") if isinstance(suite, dict) else None
        repeat = self.manifest.get("repeat")
        parts = [f"{name or '?'} ×{repeat or '?'}", self.model or "?", self.agent]
        # pooled over attempts, and named so: the detail pane's "success" is a mean of tasks
        parts.append(
            "attempts passed -" if self.success is None else f"attempts passed {self.success:.0%}"
        )
        return " · ".join(parts)

    @property
    def label(self) -> str:
        if self.status == "interrupted" and not self.resumable:
            return "interrupted (suite file gone)"
        return "interrupted (resumable)" if self.resumable else self.status


def run_dirs_in(folder: Path) -> list[Path]:
    """The run dirs (folders with a manifest) directly under ``folder``, in the order the
    folder lists them. Raises ``OSError`` when ``folder`` cannot be listed."""
    return [child for child in folder.iterdir() if (child / MANIFEST_FILE).is_file()]


def discover_runs(
    dirs: list[Path], facts: RunFacts, executing: frozenset[Path] = frozenset()
) -> list[RunInfo]:
    """Run dirs (folders with a manifest) under ``dirs``, newest first, from their manifests
    (each parsed again only when its file changed; a success is the last measured one:
    ``measure_success``). A "running" manifest whose lock nobody holds is a killed run:
    status "interrupted", resumable. ``executing`` are the dirs this process is running
    (known live: probing their lock could race a start)."""
    runs: dict[Path, RunInfo] = {}
    for base in dirs:
        if not base.is_dir():
            continue
        for child in base.iterdir():
            if child in runs or not (child / MANIFEST_FILE).is_file():
                continue
            manifest = manifest_of(child)
            if manifest is None:
                continue
            status = str(manifest.get("status") or "?")
            resumable = status == "interrupted"
            reason = facts.interruption_reason(child, manifest) if resumable else None
            if (
                status == "running"
                and child.resolve() not in executing
                and not facts.is_live(child)
            ):
                status, resumable, reason = "interrupted", True, facts.process_gone
            # A run whose suite file is gone cannot be resumed (the engine refuses it).
            resumable = resumable and facts.suite_available(manifest)
            runs[child] = RunInfo(
                run_id=str(manifest.get("run_id") or child.name),
                path=child,
                status=status,
                resumable=resumable,
                stopped_because=reason,
                profile=str(manifest.get("profile") or ""),
                model=str(manifest.get("model") or ""),
                started_at=str(manifest.get("started_at") or ""),
                manifest=manifest,
                success=facts.known_success(child),
                agent=facts.agent_label(manifest),
            )
    scanned = {base for base in dirs if base.is_dir()}
    for gone in [d for d in list(MANIFESTS) if d.parent in scanned and d not in runs]:
        MANIFESTS.pop(gone, None)  # a run deleted or moved: its manifest is not kept
    return sorted(runs.values(), key=lambda r: (r.started_at, r.run_id), reverse=True)


# Run dir -> (the stat key of its manifest file, the manifest as read then, without its task
# list). The runs list is made again every few seconds, and parsing every manifest each time
# cost 0.5–0.7 s for 200 runs of 20,000 tasks (420 KB of JSON each), holding the GIL the UI
# thread needs. A manifest given out is shared by every listing until its file changes: never
# changed in place.
MANIFESTS: dict[Path, tuple[tuple[int, int, int], dict[str, Any]]] = {}


def manifest_of(run_dir: Path) -> dict[str, Any] | None:
    """``run_dir``'s manifest without its task list, parsed again only if its file changed
    (inode, size, mtime: the engine replaces it by a rename); None if it cannot be read.

    Listing, measuring or rerunning a run never needs the task list, and 200 runs of 20,000
    tasks held 340 MB of them."""
    try:
        stat = (run_dir / MANIFEST_FILE).stat()
        key = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
        cached = MANIFESTS.get(run_dir)
        if cached is not None and cached[0] == key:
            return cached[1]
        manifest = {k: v for k, v in read_manifest(run_dir).items() if k != "tasks"}
    except (OSError, ValueError):
        MANIFESTS.pop(run_dir, None)
        return None
    MANIFESTS[run_dir] = (key, manifest)
    return manifest
