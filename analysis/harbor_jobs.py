"""Harbor jobs (Terminal-Bench's harness) read from their folders, harbor never imported.

A job is ``jobs/<job>/`` with ``config.json``, ``result.json`` (the job's stats, per-trial
results left out), ``lock.json`` in newer versions (the only place the Harbor version is) and a
folder per trial holding its ``result.json`` (harbor's ``TrialResult``), ``agent/`` (the ATIF
``trajectory.json``), ``verifier/`` and ``exception.txt``. What this module makes of them:

- **Runs** are keyed as Harbor keys its evals: agent name, model name (``agent_info.model_info``)
  and dataset (the trial's ``source``, else ``adhoc``). Each job's groups are separate runs
  (nightly jobs stay comparable with ``trend``/``compare``); ``merge`` pools the trials of one
  key across jobs into one run.
- **Attempts** are a task's trials in start order (numbered from 0). A task is its
  ``task_name``, never its folder (folders are cut to 32 characters); repeats, retries and
  resumed trials carry random suffixes and are told apart by their start times only.
- **Outcomes** follow Harbor's own failure policy (``analysis.harbor_policy``); cancelled
  trials are left out and counted.
- **Rewards**: the ``reward`` key, or the only key, is the score; with several other keys their
  mean. A score of 1 passes. Every key is kept in the row (``rewards``).
- **Harbor's figure**: Harbor's ``Mean`` over every trial on disk of the run's key, a missing
  reward counting 0 (per key when trials have several), beside the job's own ``result.json``
  figure when the run is one whole job; kept in the manifest (``imported_from.harbor``) for the
  report to put beside driftdesk's mean over the judged trials.

Times written without a zone (older Harbor wrote ``datetime.now()``) are read as this machine's
local time. Bad input costs one line each and nothing else: a job still running, a trial
folder without ``result.json`` (a retry or a resume deletes and reruns them), a truncated or
unreadable ``result.json``, a job ``result.json`` naming trials that are not on disk.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from driftdesk.analysis.harbor_policy import Attribution, attribute
from driftdesk.analysis.import_formats import REWARD_TOLERANCE, Attempt
from driftdesk.secrets import redact

RESULT_FILE = "result.json"
CONFIG_FILE = "config.json"
LOCK_FILE = "lock.json"
MAX_RESULT_BYTES = 64 << 20  # a trial's result.json past this is refused, named
MESSAGE_CHARS = 300


class HarborJobError(ValueError):
    """The path holds no Harbor job at all."""


@dataclass(frozen=True)
class RunKey:
    agent: str
    model: str | None
    dataset: str

    @property
    def evals_key(self) -> str:
        """Harbor's own key of the group (``JobStats.format_agent_evals_key``)."""
        if self.model:
            return f"{self.agent}__{self.model}__{self.dataset}"
        return f"{self.agent}__{self.dataset}"


@dataclass
class HarborTrial:
    trial_dir: Path
    job: str
    task: str
    key: RunKey
    rewards: dict[str, float] | None
    attribution: Attribution
    exception_type: str | None
    message: str
    started: datetime | None
    finished: datetime | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    step_results: list[dict[str, Any]] = field(default_factory=list)
    digest: str = ""  # sha256 of its result.json: what a second import is recognised by

    @property
    def score(self) -> float | None:
        """The ``reward`` key, the only key, or the mean of several."""
        if not self.rewards:
            return None
        if "reward" in self.rewards:
            return self.rewards["reward"]
        values = list(self.rewards.values())
        return values[0] if len(values) == 1 else math.fsum(values) / len(values)


@dataclass
class HarborJob:
    path: Path
    name: str
    version: str | None  # from lock.json; None: an older job without one
    started_at: str | None
    finished: bool
    reported: dict[str, dict[str, float]]  # evals key -> the job's own first metric
    trials: list[HarborTrial]


@dataclass
class HarborRun:
    key: RunKey
    jobs: list[HarborJob]
    trials: list[HarborTrial]  # every trial of the key on disk, cancelled ones too

    @property
    def started_at(self) -> str | None:
        times = [j.started_at for j in self.jobs if j.started_at]
        return min(times) if times else None


# --- finding jobs ---------------------------------------------------------------------------


def is_job_dir(path: Path) -> bool:
    """A Harbor job: a ``config.json`` or ``result.json`` beside trial folders (each with a
    ``result.json`` or an ``agent/`` folder), or a job ``result.json`` (``n_total_trials``)."""
    if not path.is_dir():
        return False
    result = path / RESULT_FILE
    if result.is_file():
        try:
            head = result.read_text(encoding="utf-8", errors="replace")[:65536]
        except OSError:
            head = ""
        if '"n_total_trials"' in head:
            return True
    if not (path / CONFIG_FILE).is_file():
        return False
    return any(
        child.is_dir() and ((child / RESULT_FILE).is_file() or (child / "agent").is_dir())
        for child in path.iterdir()
    )


def find_jobs(path: Path) -> list[Path]:
    """``path`` itself when it is a job, else the jobs in its folders (a jobs folder), in name
    order."""
    if is_job_dir(path):
        return [path]
    if not path.is_dir():
        return []
    return sorted(child for child in path.iterdir() if is_job_dir(child))


def looks_like_harbor(path: Path) -> bool:
    return bool(find_jobs(path))


# --- reading -------------------------------------------------------------------------------


def _time(value: Any) -> datetime | None:
    """An ISO time; without a zone, this machine's local time (older Harbor wrote those)."""
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment.astimezone() if moment.tzinfo is None else moment


def _iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat()


def _read_json(path: Path, problems: list[str], what: str) -> Any:
    try:
        if path.stat().st_size > MAX_RESULT_BYTES:
            problems.append(f"{what}: {path.name} is over {MAX_RESULT_BYTES >> 20} MiB; skipped")
            return None
        return json.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except OSError as exc:
        problems.append(f"{what}: {path.name} unreadable ({exc.strerror or exc}); skipped")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        problems.append(f"{what}: {path.name} is not valid JSON (truncated?) ({exc}); skipped")
    return None


def read_json_dict(path: Path, problems: list[str], what: str) -> dict[str, Any]:
    """The JSON object at ``path`` ({} when absent or not one; unreadable: a problem line)."""
    return _dict(_read_json(path, problems, what))


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rewards(verifier_result: Any) -> dict[str, float] | None:
    rewards = _dict(verifier_result).get("rewards")
    if not isinstance(rewards, dict) or not rewards:
        return None
    kept = {
        str(k): float(v)
        for k, v in rewards.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    }
    return kept or None


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _exceptions(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The trial's exception first, then its steps' in step order (as Harbor reads them)."""
    found = [result["exception_info"]] if isinstance(result.get("exception_info"), dict) else []
    for step in result.get("step_results") or []:
        if isinstance(step, dict) and isinstance(step.get("exception_info"), dict):
            found.append(step["exception_info"])
    return found


def _usage(result: dict[str, Any]) -> tuple[int | None, int | None, float | None]:
    contexts = (
        [result["agent_result"]]
        if isinstance(result.get("agent_result"), dict)
        else [
            s["agent_result"]
            for s in result.get("step_results") or []
            if isinstance(s, dict) and isinstance(s.get("agent_result"), dict)
        ]
    )
    prompt = completion = None
    cost = None
    for ctx in contexts:
        if _int(ctx.get("n_input_tokens")) is not None:
            prompt = (prompt or 0) + ctx["n_input_tokens"]
        if _int(ctx.get("n_output_tokens")) is not None:
            completion = (completion or 0) + ctx["n_output_tokens"]
        if isinstance(ctx.get("cost_usd"), int | float):
            cost = (cost or 0.0) + float(ctx["cost_usd"])
    return prompt, completion, cost


def read_trial(trial_dir: Path, job: str, problems: list[str]) -> HarborTrial | None:
    what = f"{job}/{trial_dir.name}"
    result_path = trial_dir / RESULT_FILE
    if not result_path.exists():
        problems.append(
            f"{what}: no result.json (a trial still running, or deleted by a retry or a "
            "resume); skipped"
        )
        return None
    result = _read_json(result_path, problems, what)
    if result is None:
        return None
    try:
        digest = hashlib.sha256(result_path.read_bytes()).hexdigest()
    except OSError:
        return None
    task = result.get("task_name") if isinstance(result, dict) else None
    if not isinstance(task, str) or not task:
        problems.append(f"{what}: result.json has no task_name; skipped")
        return None
    agent_info = _dict(result.get("agent_info"))
    model_info = _dict(agent_info.get("model_info"))
    source = result.get("source")
    key = RunKey(
        str(agent_info.get("name") or "unknown"),
        str(model_info["name"]) if model_info.get("name") else None,
        str(source) if source else "adhoc",
    )
    exceptions = _exceptions(result)
    first = exceptions[0] if exceptions else {}
    exception_type = str(first["exception_type"]) if first.get("exception_type") else None
    message = str(first.get("exception_message") or "")
    prompt, completion, cost = _usage(result)
    steps = [
        {
            "step_name": s.get("step_name"),
            "rewards": _rewards(s.get("verifier_result")),
            "exception_type": _dict(s.get("exception_info")).get("exception_type"),
        }
        for s in result.get("step_results") or []
        if isinstance(s, dict)
    ]
    return HarborTrial(
        trial_dir=trial_dir,
        job=job,
        task=task,
        key=key,
        rewards=_rewards(result.get("verifier_result")),
        attribution=attribute(exception_type, message),
        exception_type=exception_type,
        message=message,
        started=_time(result.get("started_at")),
        finished=_time(result.get("finished_at")),
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        step_results=steps,
        digest=digest,
    )


def read_job(job_dir: Path, problems: list[str]) -> HarborJob:
    name = job_dir.name
    job_result = _dict(_read_json(job_dir / RESULT_FILE, problems, name))
    if not (job_dir / RESULT_FILE).exists():
        problems.append(f"{name}: no result.json (the job's own figures are not known)")
    lock = _dict(_read_json(job_dir / LOCK_FILE, problems, name))
    version = _dict(lock.get("harbor")).get("version")
    stats = _dict(job_result.get("stats"))
    running = _int(stats.get("n_running_trials")) or 0
    finished = bool(job_result.get("finished_at")) or not job_result
    if job_result and not job_result.get("finished_at"):
        problems.append(
            f"{name}: the job is still running ({running} trials running); the trials "
            "finished so far are imported"
        )
    reported: dict[str, dict[str, float]] = {}
    named: set[str] = set()
    for evals_key, group in _dict(stats.get("evals")).items():
        group = _dict(group)
        metrics = group.get("metrics")
        if isinstance(metrics, list) and metrics and isinstance(metrics[0], dict):
            reported[str(evals_key)] = {
                str(k): float(v) for k, v in metrics[0].items() if isinstance(v, int | float)
            }
        for table in (group.get("exception_stats"), *(_dict(group.get("reward_stats")).values())):
            for names in _dict(table).values():
                named.update(n for n in names or [] if isinstance(n, str))
    trials = []
    for child in sorted(job_dir.iterdir()):
        if child.is_dir():
            trial = read_trial(child, name, problems)
            if trial is not None:
                trials.append(trial)
    on_disk = {t.trial_dir.name for t in trials}
    absent = sorted(named - on_disk - {c.name for c in job_dir.iterdir()})
    if absent:
        shown = ", ".join(absent[:3]) + (f" and {len(absent) - 3} more" if len(absent) > 3 else "")
        problems.append(
            f"{name}: result.json names {len(absent)} trials that are not on disk ({shown}); "
            "the job's own figures count them, the import cannot"
        )
    return HarborJob(
        path=job_dir,
        name=name,
        version=str(version) if version else None,
        started_at=_iso(_time(job_result.get("started_at"))),
        finished=finished,
        reported=reported,
        trials=trials,
    )


def read_runs(path: Path, *, merge: bool, problems: list[str]) -> list[HarborRun]:
    """The runs in ``path`` (a job or a folder of jobs): one per job and key, or with
    ``merge`` one per key across the jobs."""
    jobs_dirs = find_jobs(path)
    if not jobs_dirs:
        raise HarborJobError(f"{path}: no Harbor job (a folder with config.json and trials)")
    runs: dict[tuple[str, RunKey], HarborRun] = {}
    for job_dir in jobs_dirs:
        job = read_job(job_dir, problems)
        for trial in job.trials:
            slot = ("" if merge else job.name, trial.key)
            run = runs.setdefault(slot, HarborRun(trial.key, [], []))
            if job not in run.jobs:
                run.jobs.append(job)
            run.trials.append(trial)
    return list(runs.values())


# --- what a run's trials become ------------------------------------------------------------


def _start_order(trial: HarborTrial) -> tuple[float, str]:
    return (trial.started.timestamp() if trial.started else math.inf, trial.trial_dir.name)


def attempts_of(run: HarborRun) -> list[Attempt]:
    """The run's trials as attempts (cancelled trials left out), numbered per task in start
    order; each carries its trial folder and every reward key (``Attempt.extra``)."""
    attempts: list[Attempt] = []
    numbers: Counter[str] = Counter()
    for trial in sorted(run.trials, key=_start_order):
        found = trial.attribution
        if found.outcome == "cancelled":
            continue
        score = trial.score
        attempt = Attempt(
            task_id=trial.task,
            outcome="fail",
            attempt=numbers[trial.task],
            score=score,
            prompt_tokens=trial.prompt_tokens,
            completion_tokens=trial.completion_tokens,
            total_tokens=None
            if trial.prompt_tokens is None and trial.completion_tokens is None
            else (trial.prompt_tokens or 0) + (trial.completion_tokens or 0),
            latency_ms=None
            if trial.started is None or trial.finished is None
            else (trial.finished - trial.started).total_seconds() * 1000.0,
            model=run.key.model,
            started_at=_iso(trial.started),
            ended_at=_iso(trial.finished),
        )
        numbers[trial.task] += 1
        if found.outcome == "judged" and score is not None:
            attempt.outcome = "pass" if score >= 1.0 - REWARD_TOLERANCE else "fail"
        elif found.outcome == "judged":  # no reward: nothing to judge it by
            attempt.outcome = "harness_error"
            attempt.error_code = "no_reward"
        else:
            attempt.outcome = found.outcome
            attempt.error_code = trial.exception_type
        if trial.exception_type:
            line = (trial.message.strip().splitlines() or [""])[0]
            text = f"{found.reason}: {trial.exception_type}" + (f": {line}" if line else "")
            attempt.error_message = redact(text)[:MESSAGE_CHARS]
        attempt.extra = {
            "harbor_trial": str(trial.trial_dir.resolve()),
            "harbor_job": trial.job,
            "harbor_cause": found.cause,
            **({"harbor_detail": found.detail} if found.detail else {}),
            "rewards": trial.rewards,
            **({"cost_usd": trial.cost_usd} if trial.cost_usd is not None else {}),
            **({"step_results": trial.step_results} if trial.step_results else {}),
        }
        attempts.append(attempt)
    return attempts


def harbor_mean(rewards: list[dict[str, float] | None]) -> dict[str, float] | None:
    """Harbor's ``Mean`` metric over a group's trials: a missing reward counts 0; with at most
    one reward key ``{"mean": …}``, else one mean per key (a key a trial lacks counts 0)."""
    if not rewards:
        return None
    keys = sorted({k for r in rewards if r for k in r})
    if len(keys) <= 1:
        values = [0.0 if r is None else next(iter(r.values()), 0.0) for r in rewards]
        return {"mean": math.fsum(values) / len(values)}
    return {
        k: math.fsum(0.0 if r is None else r.get(k, 0.0) for r in rewards) / len(rewards)
        for k in keys
    }


def harbor_pass_at_k(trials: list[HarborTrial]) -> dict[str, float]:
    """Harbor's own pass@k over the trials: every trial, a missing reward a 0; none unless
    every reward is one binary key; k up to the fewest trials of a task."""
    from driftdesk.analysis.metrics import harbor_k_values, pass_curves

    per_task: dict[str, list[int]] = {}
    for trial in trials:
        if trial.rewards is None:
            per_task.setdefault(trial.task, []).append(0)
            continue
        if len(trial.rewards) != 1:
            return {}
        value = next(iter(trial.rewards.values()))
        if value not in (0, 1):
            return {}
        per_task.setdefault(trial.task, []).append(int(value))
    if not per_task:
        return {}
    fewest = min(len(v) for v in per_task.values())
    out = {}
    for k in harbor_k_values(fewest):
        total = math.fsum(pass_curves(len(v), sum(v))[1][k - 1] for v in per_task.values())
        out[str(k)] = total / len(per_task)
    return out


def figures(run: HarborRun, attempts: list[Attempt]) -> dict[str, Any]:
    """What the report shows beside its own numbers (the manifest's ``imported_from.harbor``):
    Harbor's mean over every trial on disk, the job's own figure when the run is one whole job,
    driftdesk's mean over the judged trials, and what each left out, and why."""
    judged = [a for a in attempts if a.outcome in ("pass", "fail")]
    judged_rewards = [a.extra.get("rewards") for a in judged]
    excluded: dict[str, dict[str, int]] = {}
    for a in attempts:
        if a.outcome not in ("pass", "fail"):
            cause = str(a.extra.get("harbor_cause") or "no exception")
            if a.extra.get("harbor_detail"):
                cause += f", {a.extra['harbor_detail']}"
            group = excluded.setdefault(a.outcome, {})
            label = f"{a.error_code} ({cause})"
            group[label] = group.get(label, 0) + 1
    cancelled = sum(1 for t in run.trials if t.attribution.outcome == "cancelled")
    whole_job = len(run.jobs) == 1
    reported = run.jobs[0].reported.get(run.key.evals_key) if whole_job else None
    return {
        "key": {"agent": run.key.agent, "model": run.key.model, "dataset": run.key.dataset},
        "evals_key": run.key.evals_key,
        "versions": sorted({j.version for j in run.jobs if j.version}),
        "jobs": [
            {
                "name": j.name,
                "path": str(j.path.resolve()),
                "started_at": j.started_at,
                "finished": j.finished,
            }
            for j in run.jobs
        ],
        "trials_on_disk": len(run.trials),
        "harbor_mean": harbor_mean([t.rewards for t in run.trials]),
        "missing_rewards_as_zero": sum(1 for t in run.trials if t.rewards is None),
        "job_reported_mean": reported,
        "judged_trials": len(judged),
        "judged_mean": harbor_mean(judged_rewards),
        "excluded": excluded,
        "cancelled": cancelled,
        "harbor_pass_at_k": harbor_pass_at_k(run.trials),
    }
