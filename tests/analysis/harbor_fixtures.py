"""Harbor job dirs built in a temp folder, field by field as harbor 0.25's models write them
(``models/job/{config,result,lock}.py``, ``models/trial/result.py``, ``models/trajectories``):
``jobs/<job>/{config.json,result.json,lock.json}`` and a folder per trial with ``result.json``,
``agent/trajectory.json`` (ATIF), ``verifier/`` and ``exception.txt``.

The JSON Schemas in ``tests/fixtures/harbor/`` were derived from those models
(``model_json_schema()``, see its README); ``validate`` checks what this builder writes
against them. The job's own ``result.json`` mean is computed here the way Harbor's ``Mean``
metric does (every trial, a missing reward as 0), by a few lines of its own.
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

SCHEMAS = Path(__file__).parent.parent / "fixtures" / "harbor"
AGENT = "terminus-2"
MODEL = "anthropic/claude-sonnet-4-5"
DATASET = "terminal-bench@2.0"
T0 = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)


@dataclass
class Trial:
    task: str
    reward: float | dict[str, float] | None = 1.0  # None: no verifier_result
    exception: str | None = None
    message: str = "it broke"
    minute: int = 0  # started at T0 + minutes
    agent: str = AGENT
    model: str | None = MODEL
    source: str | None = DATASET
    trajectory: Any = "default"  # "default": built from ``commands``; None: none written
    commands: list[str] = field(default_factory=lambda: ["ls", "make test"])
    steps: list[str] | None = None  # multi-step task: its step names
    name: str | None = None
    naive_times: bool = False
    atif_version: str = "ATIF-v1.6"
    subagent: bool = False
    continued: bool = False


def trial_name(task: str, rng: random.Random) -> str:
    """Harbor's trial folder: the task name cut to 32 characters, two underscores and a
    random suffix of 7."""
    suffix = "".join(
        rng.choice("abcdefghijkmnopqrstuvwxyzABCDEFGHJKLMNPQRSTUVWXYZ23456789") for _ in range(7)
    )
    return f"{task[:32].rstrip('_-')}__{suffix}"


def _when(trial: Trial, minutes: float) -> str:
    moment = T0 + timedelta(minutes=trial.minute + minutes)
    if trial.naive_times:  # older Harbor: datetime.now() without a zone
        return moment.replace(tzinfo=None).isoformat()
    return moment.isoformat()


def atif(trial: Trial, *, session: str = "s1", secret: str | None = None) -> dict[str, Any]:
    """An ATIF trajectory of the trial: the instruction, one agent step per command (a
    ``bash_command`` tool call and its observation, per-step metrics), then the answer."""
    steps: list[dict[str, Any]] = [
        {
            "step_id": 1,
            "source": "user",
            "message": f"Solve {trial.task}.",
            "timestamp": _when(trial, 0),
        }
    ]
    for i, command in enumerate(trial.commands):
        call_id = f"call_{i}"
        output = f"$ {command}\nok" + (f" token={secret}" if secret and i == 0 else "")
        steps.append(
            {
                "step_id": len(steps) + 1,
                "source": "agent",
                "model_name": trial.model,
                "message": f"I will run {command}.",
                "reasoning_content": "thinking",
                "tool_calls": [
                    {
                        "tool_call_id": call_id,
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": command},
                    }
                ],
                "observation": {"results": [{"source_call_id": call_id, "content": output}]},
                "metrics": {"prompt_tokens": 100 + i, "completion_tokens": 10, "cost_usd": 0.001},
            }
        )
    steps.append(
        {
            "step_id": len(steps) + 1,
            "source": "agent",
            "message": "Done.",
            "metrics": {"prompt_tokens": 120, "completion_tokens": 3},
        }
    )
    doc: dict[str, Any] = {
        "schema_version": trial.atif_version,
        "session_id": session,
        "agent": {"name": trial.agent, "version": "2.0.0", "model_name": trial.model},
        "steps": steps,
        "final_metrics": {
            "total_prompt_tokens": 500,
            "total_completion_tokens": 50,
            "total_steps": len(steps),
        },
    }
    if trial.subagent:  # ATIF 1.7+: embedded subagent trajectories
        steps[1]["observation"]["results"].append(
            {"subagent_trajectory_ref": [{"trajectory_id": "sub-1"}], "content": "delegated"}
        )
        doc["subagent_trajectories"] = [
            {
                "schema_version": trial.atif_version,
                "trajectory_id": "sub-1",
                "agent": {"name": "helper", "version": "1"},
                "steps": [
                    {"step_id": 1, "source": "user", "message": "look around"},
                    {
                        "step_id": 2,
                        "source": "agent",
                        "message": "found it",
                        "tool_calls": [
                            {
                                "tool_call_id": "s0",
                                "function_name": "grep",
                                "arguments": {"pattern": "TODO"},
                            }
                        ],
                        "observation": {"results": [{"source_call_id": "s0", "content": "a.py:1"}]},
                    },
                ],
            }
        ]
    return doc


def continuation(trial: Trial) -> dict[str, Any]:
    """``trajectory.cont-1.json``: the copied context, then two new steps."""
    return {
        "schema_version": trial.atif_version,
        "session_id": "s1-cont-1",
        "agent": {"name": trial.agent, "version": "2.0.0", "model_name": trial.model},
        "steps": [
            {
                "step_id": 1,
                "source": "user",
                "message": f"Solve {trial.task}.",
                "is_copied_context": True,
            },
            {
                "step_id": 2,
                "source": "agent",
                "message": "Resuming after the summary.",
                "tool_calls": [
                    {
                        "tool_call_id": "c1",
                        "function_name": "bash_command",
                        "arguments": {"keystrokes": "make check"},
                    }
                ],
                "observation": {"results": [{"source_call_id": "c1", "content": "passed"}]},
            },
            {"step_id": 3, "source": "agent", "message": "All checks pass."},
        ],
    }


def _rewards(reward: float | dict[str, float] | None) -> dict[str, float] | None:
    if reward is None:
        return None
    return dict(reward) if isinstance(reward, dict) else {"reward": reward}


def trial_result(trial: Trial, name: str, job_dir: Path) -> dict[str, Any]:
    rewards = _rewards(trial.reward)
    exception = None
    if trial.exception:
        exception = {
            "exception_type": trial.exception,
            "exception_message": trial.message,
            "exception_traceback": f"Traceback (most recent call last):\n{trial.exception}",
            "occurred_at": _when(trial, 3),
        }
    context = {
        "n_input_tokens": 1200,
        "n_cache_tokens": 200,
        "n_output_tokens": 300,
        "cost_usd": 0.02,
    }
    result: dict[str, Any] = {
        "id": str(uuid.uuid4()),
        "task_name": trial.task,
        "trial_name": name,
        "trial_uri": (job_dir / name).as_uri(),
        "task_id": {"path": f"tasks/{trial.task}"},
        "source": trial.source,
        "task_checksum": "0" * 64,
        "config": {
            "task": {"path": f"tasks/{trial.task}", "source": trial.source},
            "trial_name": name,
            "trials_dir": str(job_dir),
            "agent": {"name": trial.agent, "model_name": trial.model},
        },
        "agent_info": {
            "name": trial.agent,
            "version": "2.0.0",
            "model_info": None
            if trial.model is None
            else {
                "name": trial.model.split("/", 1)[-1],
                "provider": trial.model.split("/", 1)[0] if "/" in trial.model else None,
            },
        },
        "agent_result": None if trial.steps else context,
        "verifier_result": None if rewards is None and not trial.steps else {"rewards": rewards},
        "exception_info": exception,
        "started_at": _when(trial, 0),
        "finished_at": _when(trial, 5),
        "environment_setup": {"started_at": _when(trial, 0), "finished_at": _when(trial, 1)},
        "agent_setup": {"started_at": _when(trial, 1), "finished_at": _when(trial, 1.5)},
        "agent_execution": {"started_at": _when(trial, 1.5), "finished_at": _when(trial, 4)},
        "verifier": {"started_at": _when(trial, 4), "finished_at": _when(trial, 5)},
        "step_results": None,
    }
    if trial.model is not None and result["agent_info"]["model_info"]["provider"] is None:
        del result["agent_info"]["model_info"]["provider"]
    if trial.steps:
        result["step_results"] = [
            {
                "step_name": step,
                "agent_result": context,
                "verifier_result": {
                    "rewards": {"reward": 1.0 if i == 0 else (rewards or {}).get("reward", 0.0)}
                },
                "exception_info": None,
                "agent_execution": {
                    "started_at": _when(trial, 1 + i),
                    "finished_at": _when(trial, 1.5 + i),
                },
            }
            for i, step in enumerate(trial.steps)
        ]
    return result


def model_name_of(trial: Trial) -> str | None:
    """The model name Harbor keys its evals by (``agent_info.model_info.name``)."""
    return None if trial.model is None else trial.model.split("/", 1)[-1]


def evals_key(trial: Trial) -> str:
    model = model_name_of(trial)
    dataset = trial.source or "adhoc"
    return f"{trial.agent}__{model}__{dataset}" if model else f"{trial.agent}__{dataset}"


def harbor_mean(rewards: list[dict[str, float] | None]) -> dict[str, float]:
    """Harbor's ``Mean`` over a group's trials: a missing reward counts 0; one key (or none)
    gives ``{"mean": …}``, several keys a mean per key."""
    keys = sorted({k for r in rewards if r for k in r})
    if len(keys) <= 1:
        values = [0 if r is None else next(iter(r.values()), 0) for r in rewards]
        return {"mean": sum(values) / len(values)}
    return {k: sum(0 if r is None else r.get(k, 0) for r in rewards) / len(rewards) for k in keys}


def write_job(
    root: Path,
    name: str,
    trials: list[Trial],
    *,
    n_attempts: int = 1,
    legacy_stats: bool = False,
    lock: bool = True,
    finished: bool = True,
    secret: str | None = None,
    seed: int = 7,
) -> Path:
    """A job dir ``root/name`` with ``trials`` (each in its own trial folder)."""
    rng = random.Random(f"{name}-{seed}")
    job_dir = root / name
    job_dir.mkdir(parents=True)
    names: list[str] = []
    groups: dict[str, list[dict[str, float] | None]] = {}
    exceptions: dict[str, dict[str, list[str]]] = {}
    for trial in trials:
        folder = trial.name or trial_name(trial.task, rng)
        names.append(folder)
        trial_dir = job_dir / folder
        (trial_dir / "agent").mkdir(parents=True)
        (trial_dir / "verifier").mkdir()
        result = trial_result(trial, folder, job_dir)
        (trial_dir / "result.json").write_text(json.dumps(result, indent=4))
        (trial_dir / "config.json").write_text(json.dumps(result["config"], indent=4))
        rewards = _rewards(trial.reward)
        if rewards is not None:
            (trial_dir / "verifier" / "reward.txt").write_text(str(next(iter(rewards.values()))))
            (trial_dir / "verifier" / "test-stdout.txt").write_text("tests ran\n")
        if trial.exception:
            (trial_dir / "exception.txt").write_text(
                result["exception_info"]["exception_traceback"]
            )
        if trial.trajectory is not None:
            doc = atif(trial, secret=secret) if trial.trajectory == "default" else trial.trajectory
            if trial.continued:
                doc["continued_trajectory_ref"] = "trajectory.cont-1.json"
                (trial_dir / "agent" / "trajectory.cont-1.json").write_text(
                    json.dumps(continuation(trial), indent=2)
                )
            text = doc if isinstance(doc, str) else json.dumps(doc, indent=2)
            if trial.steps:
                for step in trial.steps:
                    step_dir = trial_dir / "steps" / step / "agent"
                    step_dir.mkdir(parents=True)
                    (step_dir / "trajectory.json").write_text(text)
            else:
                (trial_dir / "agent" / "trajectory.json").write_text(text)
        key = evals_key(trial)
        reward_of = (result["verifier_result"] or {}).get("rewards")
        groups.setdefault(key, []).append(reward_of)
        if trial.exception:
            exceptions.setdefault(key, {}).setdefault(trial.exception, []).append(folder)
    config = {
        "job_name": name,
        "jobs_dir": str(root),
        "n_attempts": n_attempts,
        "agents": sorted(
            ({"name": t.agent, "model_name": t.model} for t in trials), key=json.dumps
        )[:1],
        "datasets": [{"name": DATASET}],
    }
    (job_dir / "config.json").write_text(json.dumps(config, indent=4))
    n_errors = sum(1 for t in trials if t.exception)
    stats: dict[str, Any] = {
        "n_completed_trials": len(trials) if finished else len(trials) - 1,
        "n_errored_trials": n_errors,
        "n_running_trials": 0 if finished else 1,
        "n_pending_trials": 0,
        "n_cancelled_trials": sum(1 for t in trials if t.exception == "CancelledError"),
        "n_retries": 1,
        "evals": {
            key: {
                "n_trials": sum(1 for r in rewards if r is not None),
                "n_errors": sum(len(v) for v in exceptions.get(key, {}).values()),
                "metrics": [harbor_mean(rewards)],
                "pass_at_k": {},
                "reward_stats": {},
                "exception_stats": exceptions.get(key, {}),
            }
            for key, rewards in groups.items()
        },
    }
    if legacy_stats:  # older Harbor: n_trials / n_errors, no running / pending counts
        stats = {
            "n_trials": stats["n_completed_trials"],
            "n_errors": n_errors,
            "evals": stats["evals"],
        }
    started = T0 + timedelta(minutes=min((t.minute for t in trials), default=0))
    job_result = {
        "id": str(uuid.uuid4()),
        "started_at": (started.replace(tzinfo=None) if legacy_stats else started).isoformat(),
        "updated_at": (T0 + timedelta(hours=1)).isoformat(),
        "finished_at": (T0 + timedelta(hours=1)).isoformat() if finished else None,
        "n_total_trials": len(trials),
        "stats": stats,
    }
    (job_dir / "result.json").write_text(json.dumps(job_result, indent=4))
    if lock:
        (job_dir / "lock.json").write_text(
            json.dumps(
                {
                    "schema_version": 3,
                    "created_at": T0.isoformat(),
                    "harbor": {"version": "0.25.0", "git_commit_hash": None, "is_editable": False},
                    "n_concurrent_trials": 4,
                    "retry": {"max_retries": 1},
                    "trials": [],
                },
                indent=4,
            )
        )
    return job_dir


def validate(job_dir: Path) -> None:
    """Every result.json and trajectory of ``job_dir`` against the schemas derived from
    harbor's models (raises jsonschema's ValidationError)."""
    import jsonschema

    trial_schema = json.loads((SCHEMAS / "trial_result.schema.json").read_text())
    job_schema = json.loads((SCHEMAS / "job_result.schema.json").read_text())
    atif_schema = json.loads((SCHEMAS / "atif_trajectory.schema.json").read_text())
    jsonschema.validate(json.loads((job_dir / "result.json").read_text()), job_schema)
    for result in job_dir.glob("*/result.json"):
        jsonschema.validate(json.loads(result.read_text()), trial_schema)
    for traj in job_dir.glob("*/**/trajectory*.json"):
        jsonschema.validate(json.loads(traj.read_text()), atif_schema)


LONG_TASK = "configure-git-webserver-with-ssl-and-hooks"  # its folders are cut to 32 characters
BILLING = "litellm.BadRequestError: AnthropicException - Your credit balance is too low"


def standard_trials(minute: int = 0) -> list[Trial]:
    """One job of 14 trials, n_attempts 3, every exception family. Harbor's mean: 6 / 14 (the
    link, harness and cancelled trials count 0); driftdesk's judged trials: 6 passes of 9."""
    m = minute
    return [
        Trial(LONG_TASK, 1.0, minute=m + 0),
        Trial(LONG_TASK, 0.0, minute=m + 1, commands=["ls", "rm -rf build"]),
        # a timed-out agent still verified: judged by its reward
        Trial(LONG_TASK, 1.0, "AgentTimeoutError", "Agent timed out after 900s", minute=m + 2),
        Trial("hello-world", 1.0, minute=m + 3),
        Trial("hello-world", 1.0, minute=m + 4),
        Trial(
            "hello-world",
            None,
            "ApiRateLimitError",
            "429 rate limited",
            minute=m + 5,
            trajectory=None,
        ),
        Trial("build-cython-ext", 0.0, minute=m + 6, commands=["pip install cython"]),
        Trial(
            "build-cython-ext",
            None,
            "SandboxBuildFailedError",
            "docker build failed",
            minute=m + 7,
            trajectory=None,
        ),
        Trial("build-cython-ext", None, "BadRequestError", BILLING, minute=m + 8),
        Trial("sqlite-recovery", None, "VerifierTimeoutError", "verifier timed out", minute=m + 9),
        Trial("sqlite-recovery", 1.0, minute=m + 10),
        Trial("sqlite-recovery", None, "CancelledError", "", minute=m + 11, trajectory=None),
        Trial("multi-step-deploy", 1.0, minute=m + 12, steps=["build", "deploy"]),
        Trial("multi-step-deploy", 0.0, minute=m + 13, steps=["build", "deploy"]),
    ]
