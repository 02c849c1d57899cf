"""Harbor jobs prepared for ``driftdesk import JOB_DIR``: one run per job and key (agent,
model, dataset), or one per key with ``merge``. Reading the jobs is ``analysis.harbor_jobs``;
staging and writing each run dir is ``analysis.imports``' as for every format.

The rows are written into the run dir (2,000 trials are a few hundred KB); the trajectories
stay in the job (zero-copy): each row names its trial folder (``harbor_trial``) and
``analysis.trajectory`` reads the ATIF file there when a task is opened. ``copy`` writes each
trial's steps into the run dir too (redacted), so the run no longer needs the job.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.analysis.harbor_jobs import (
    HarborJobError,
    HarborRun,
    attempts_of,
    figures,
    read_runs,
)
from driftdesk.analysis.harbor_trial_files import trial_steps
from driftdesk.analysis.import_formats import Attempt, ResultsImportError
from driftdesk.rundir import safe_name


@dataclass
class PreparedRun:
    stem: str  # the run id's part that names the job and key
    suite_name: str  # "harbor:<dataset>": trend follows a dataset's runs
    started_at: str | None
    model: str | None
    facts: dict[str, Any]  # the manifest's imported_from.harbor
    digest: str  # of its trials' result.json files: a second import is recognised by it
    options: list[Any]
    attempts: list[Attempt]


def prepare(
    path: Path, *, run_id: str | None, merge: bool, problems: list[str]
) -> list[PreparedRun]:
    """The runs of the job(s) at ``path``; ``run_id`` is refused when there are several."""
    if not path.exists():
        raise ResultsImportError(f"{path}: no such file or folder")
    try:
        runs = [r for r in read_runs(path, merge=merge, problems=problems) if r.trials]
    except HarborJobError as exc:
        raise ResultsImportError(str(exc)) from None
    if not runs:
        detail = "; ".join(problems[:3]) or "no trial has a result.json"
        raise ResultsImportError(f"{path}: no Harbor trials to import ({detail})")
    if run_id is not None and len(runs) > 1:
        names = ", ".join(_stem(r, merge) for r in runs[:4])
        raise ResultsImportError(
            f"{path} holds {len(runs)} runs ({names}); --run-id names one run: import the "
            "jobs one by one, or --merge the jobs of one agent, model and dataset"
        )
    prepared = []
    for run in runs:
        attempts = attempts_of(run)
        digest = hashlib.sha256("".join(sorted(t.digest for t in run.trials)).encode())
        prepared.append(
            PreparedRun(
                stem=_stem(run, merge),
                suite_name=f"harbor:{run.key.dataset}",
                started_at=run.started_at,
                model=run.key.model,
                facts=figures(run, attempts),
                digest=digest.hexdigest(),
                options=["harbor", run.key.evals_key, merge],
                attempts=attempts,
            )
        )
    return prepared


def _stem(run: HarborRun, merge: bool) -> str:
    job = "merged" if merge and len(run.jobs) > 1 else run.jobs[0].name
    return safe_name(f"{job}-{run.key.agent}-{run.key.model or 'no-model'}", fallback="harbor")


def copy_trajectories(run_dir: Path, attempts: list[Attempt], problems: list[str]) -> None:
    """``--copy``: each trial's steps written into the run dir (redacted, as every import's)."""
    from driftdesk.analysis.steps import Trajectory, write_trajectory

    for a in attempts:
        steps = trial_steps(Path(str(a.extra["harbor_trial"])), problems)
        if steps is not None:
            write_trajectory(
                run_dir, Trajectory(a.task_id, a.attempt or 0, a.outcome, steps, "harbor")
            )
