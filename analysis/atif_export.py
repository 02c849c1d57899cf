"""``driftdesk export RUN --format atif``: each attempt's trajectory as an ATIF file, so
Harbor's and other ATIF tools read what driftdesk recorded (a live run's recording of Claude
Code, Codex or any agent, a transcript, an import's kept steps).

Written to ``OUT/<task folder>__<attempt>/agent/trajectory.json`` (the place a Harbor trial
keeps it), with ``OUT/index.json`` listing task, attempt, outcome and file. The final try's
steps are the trajectory; earlier tries are in the root ``extra.driftdesk.earlier_tries``
(``analysis.atif.to_atif``). Attempts with no trajectory anywhere are listed, not written.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.analysis.atif import to_atif
from driftdesk.analysis.attempts import task_attempts
from driftdesk.analysis.sources import manifest_or_empty
from driftdesk.analysis.trajectory import load_trajectory
from driftdesk.rundir import task_folder_name

INDEX_FILE = "index.json"


@dataclass
class AtifExport:
    out: Path
    written: list[dict[str, Any]] = field(default_factory=list)
    without_trajectory: list[tuple[str, int]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _agent_of(manifest: dict[str, Any]) -> tuple[str, str]:
    from driftdesk import __version__

    found = manifest.get("client")
    client: dict[str, Any] = found if isinstance(found, dict) else {}
    name = client.get("name") or manifest.get("agent") or "driftdesk"
    version = client.get("version") or manifest.get("driftdesk_version") or __version__
    return str(name), str(version)


def export_atif(run_dir: Path, out: Path) -> AtifExport:
    """Every (task, attempt) of ``run_dir`` (its latest row) as ATIF under ``out``."""
    manifest = manifest_or_empty(run_dir)
    run_id = str(manifest.get("run_id") or run_dir.name)
    agent, version = _agent_of(manifest)
    model = manifest.get("model") if isinstance(manifest.get("model"), str) else None
    tasks = [str(t) for t in manifest.get("tasks") or []]
    if not tasks:
        from driftdesk.analysis.report import pooled_task_outcomes

        tasks = list(pooled_task_outcomes([run_dir]))
    result = AtifExport(out)
    out.mkdir(parents=True, exist_ok=True)
    for task_id in tasks:
        latest: dict[int, dict[str, Any]] = {}
        for row in task_attempts(run_dir, task_id):
            latest[row["attempt"]] = row
        for attempt, row in sorted(latest.items()):
            traj = load_trajectory(run_dir, task_id, attempt, row=row)
            if traj is None:
                result.without_trajectory.append((task_id, attempt))
                continue
            result.problems.extend(f"{task_id} attempt {attempt}: {p}" for p in traj.problems)
            doc = to_atif(
                traj,
                agent=agent,
                agent_version=version,
                model=row.get("model") or model,
                session_id=f"{run_id}/{task_id}/{attempt}",
            )
            target = out / f"{task_folder_name(task_id)}__{attempt}" / "agent" / "trajectory.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            _write_private(target, json.dumps(doc, ensure_ascii=False, indent=1))
            result.written.append(
                {
                    "task_id": task_id,
                    "attempt": attempt,
                    "outcome": traj.outcome,
                    "path": str(target.relative_to(out)),
                }
            )
    _write_private(
        out / INDEX_FILE,
        json.dumps(
            {"run_id": run_id, "trajectories": result.written}, ensure_ascii=False, indent=1
        ),
    )
    return result


def _write_private(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text + "\n")
    os.replace(tmp, path)
