"""What a Harbor trial's folder shows when its task is opened (never at import): its ATIF
trajectory as steps (``analysis.atif``), or each step's for a multi-step task, and its
verifier's output for the drill-down's check output. The trial folder is the row's
``harbor_trial`` (``analysis.harbor_jobs``); what is read is redacted."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftdesk.analysis.harbor_jobs import RESULT_FILE, read_json_dict
from driftdesk.secrets import redact

TRAJECTORY_FILE = "trajectory.json"


def trial_steps(trial_dir: Path, problems: list[str]) -> list[Any] | None:
    """The trial's ATIF steps in driftdesk's step model: ``agent/trajectory.json``, or for a
    multi-step task each step's ``steps/<name>/agent/trajectory.json`` in turn, each begun by a
    ``user`` step naming it. None when the trial kept none (or its folder is gone)."""
    from driftdesk.analysis.atif import read_trajectory_file
    from driftdesk.analysis.steps import Step, numbered

    if not trial_dir.is_dir():
        problems.append(f"{trial_dir}: the trial folder is not there any more (moved or deleted)")
        return None
    single = trial_dir / "agent" / TRAJECTORY_FILE
    if single.is_file():
        return read_trajectory_file(single, problems)
    steps_dir = trial_dir / "steps"
    if not steps_dir.is_dir():
        return None
    order = []
    result = read_json_dict(trial_dir / RESULT_FILE, problems, trial_dir.name)
    for step in result.get("step_results") or []:
        if isinstance(step, dict) and isinstance(step.get("step_name"), str):
            order.append(step["step_name"])
    names = order + sorted(p.name for p in steps_dir.iterdir() if p.name not in order)
    found: list[Any] = []
    for name in names:
        steps = read_trajectory_file(steps_dir / name / "agent" / TRAJECTORY_FILE, problems)
        if steps is None:
            continue
        found.append(
            Step(
                "user",
                0,
                text=f"(task step {name})",
                detail={"source": "harbor", "task_step": name},
            )
        )
        found.extend(steps)
    return numbered(found) if found else None


VERIFIER_FILES = ("test-stdout.txt", "test-stderr.txt", "reward.txt", "reward.json")
MAX_VERIFIER_LINES = 2000


def verifier_output(run_dir: Path, task_id: str, attempt: int) -> list[str] | None:
    """What a Harbor trial's verifier wrote (and its ``exception.txt``), redacted, for the
    drill-down's check output; None for a run that is not a Harbor import."""
    from driftdesk.analysis.sources import SourceError, manifest_or_empty

    try:
        imported = manifest_or_empty(run_dir).get("imported_from")
    except SourceError:
        return None
    if not isinstance(imported, dict) or imported.get("format") != "harbor":
        return None
    from driftdesk.analysis.attempts import task_attempts

    rows = [r for r in task_attempts(run_dir, task_id) if r["attempt"] == attempt]
    trial = rows[-1].get("harbor_trial") if rows else None
    if not isinstance(trial, str):
        return None
    trial_dir = Path(trial)
    lines: list[str] = []
    for path in [trial_dir / "verifier" / n for n in VERIFIER_FILES] + [
        trial_dir / "exception.txt"
    ]:
        try:
            text = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        lines.append(f"── {path.relative_to(trial_dir)}")
        lines.extend(redact(text).splitlines())
    if len(lines) > MAX_VERIFIER_LINES:
        lines = [*lines[:MAX_VERIFIER_LINES], f"… {len(lines) - MAX_VERIFIER_LINES} more lines"]
    return lines or None
