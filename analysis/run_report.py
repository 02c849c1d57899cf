"""What a run's report holds and its documented JSON (docs/report-json.md): ``RunReport``, with
a ``TaskStats`` per task and a ``ScenarioStats`` per scenario. ``analysis.report`` fills them
(``assemble_report``; the definitions of the figures are in its docstring) and writes them
(``write_report_json``); the CLI, the TUI, compare, the gate and the exports read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from driftdesk.analysis.metrics import pass_curves
from driftdesk.analysis.noise import NoiseFloor
from driftdesk.analysis.run_reader import SkippedLine

GroupBy = Literal["task", "scenario"]
# pass^k averaging: "driftdesk" averages each k over the tasks run at least k times; "tau2"
# caps k at the smallest per-task trial count and averages over every task (tau2-bench);
# "inspect" averages every task at every k, a task judged fewer than k times counting 0 (as
# inspect_ai's at_least_k reducer counts a sample short of k scored epochs; per task pass^k
# equals at_least_k at k = n, its epochs).
# "harbor": Harbor's pass@k (k = 2, 4, 8, … and 5, 10, … up to the fewest attempts of a task,
# every task averaged at every k).
PassKConvention = Literal["driftdesk", "tau2", "inspect", "harbor"]
PASS_K_CONVENTIONS: tuple[str, ...] = ("driftdesk", "tau2", "inspect", "harbor")


def _round(value: float | None, digits: int = 6) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class TaskStats:
    """One task's attempts in one run (only the winning row of each slot counts)."""

    task_id: str
    scenario_id: str | None
    n: int  # counted attempts: judged (+ link/harness errors with include_link_errors)
    passes: int
    fails: int  # judged failures (outcome "fail")
    link_errors: int
    harness_errors: int
    success_rate: float | None  # passes / n; None when n == 0
    spread: float | None  # max − min of the counted 0/1 outcomes; None when n == 0
    latency_mean_ms: float | None = None
    latency_cv: float | None = None  # coefficient of variation (population std / mean)
    tokens_mean: float | None = None
    tokens_cv: float | None = None
    model_latency_mean_ms: float | None = None  # provider-call time recorded by the proxy
    retries: int = 0
    model_mismatches: int = 0
    c_out: float | None = None  # HAL's outcome consistency (2p̂ − 1)²; None with n < 2
    latency_consistency: float | None = None  # HAL's exp(−CV), CV = std(ddof=1) / mean
    tokens_consistency: float | None = None
    cost_consistency: float | None = None
    resource_consistency: float | None = None  # HAL: exp(−mean of the resources' CVs)
    last_error_kinds: list[str] = field(default_factory=list)  # newest first, at most 3
    missing_attempts: list[int] = field(default_factory=list)

    @property
    def volatile(self) -> bool:
        return self.passes > 0 and self.n > self.passes

    @property
    def pass_hat_k(self) -> dict[int, float]:
        """k -> C(c,k)/C(n,k) for k = 1..n (computed on demand, cached per (n, c))."""
        return dict(enumerate(pass_curves(self.n, self.passes)[0], start=1)) if self.n else {}

    @property
    def pass_at_k(self) -> dict[int, float]:
        """k -> 1 − C(n−c,k)/C(n,k) for k = 1..n."""
        return dict(enumerate(pass_curves(self.n, self.passes)[1], start=1)) if self.n else {}

    def to_json(self, *, curves: bool = False) -> dict[str, Any]:
        """The task's JSON; ``curves`` adds pass^k / pass@k for k = 1..n (a function of n and
        passes, left out by default: on big runs they would be most of the output)."""
        data: dict[str, Any] = {
            "task_id": self.task_id,
            "scenario_id": self.scenario_id,
            "n": self.n,
            "passes": self.passes,
            "fails": self.fails,
            "link_errors": self.link_errors,
            "harness_errors": self.harness_errors,
            "success_rate": _round(self.success_rate),
            "spread": self.spread,
            "volatile": self.volatile,
            "latency_mean_ms": _round(self.latency_mean_ms, 3),
            "latency_cv": _round(self.latency_cv, 4),
            "tokens_mean": _round(self.tokens_mean, 3),
            "tokens_cv": _round(self.tokens_cv, 4),
            "model_latency_mean_ms": _round(self.model_latency_mean_ms, 3),
            "retries": self.retries,
            "model_mismatches": self.model_mismatches,
            "c_out": _round(self.c_out),
            "latency_consistency": _round(self.latency_consistency),
            "tokens_consistency": _round(self.tokens_consistency),
            "cost_consistency": _round(self.cost_consistency),
            "resource_consistency": _round(self.resource_consistency),
            "last_error_kinds": self.last_error_kinds,
            "missing_attempts": self.missing_attempts,
        }
        if curves:
            hat, at = pass_curves(self.n, self.passes) if self.n else ((), ())
            data["pass_hat_k"] = {str(k): round(v, 6) for k, v in enumerate(hat, start=1)}
            data["pass_at_k"] = {str(k): round(v, 6) for k, v in enumerate(at, start=1)}
        return data


@dataclass
class ScenarioStats:
    scenario_id: str
    tasks: int
    min_success_rate: float
    mean_success_rate: float

    def to_json(self) -> dict[str, Any]:
        return {
            "scenario_id": self.scenario_id,
            "tasks": self.tasks,
            "min_success_rate": _round(self.min_success_rate),
            "mean_success_rate": _round(self.mean_success_rate),
        }


@dataclass
class RunReport:
    """The volatility report of one run; ``to_json()`` is the documented, stable JSON."""

    run_id: str
    source: str  # the attempts.jsonl read
    run_dir: str | None = None
    model: str | None = None
    status: str | None = None  # manifest status ("running", "completed", …) if known
    started_at: str | None = None  # manifest start time (compare puts the newer run as B)
    repeat: int | None = None  # manifest repeat (attempts asked per task)
    models: list[str] = field(default_factory=list)  # models named by the rows
    group_by: GroupBy = "task"
    include_link_errors: bool = False
    min_runs: int = 1
    tasks_judged: int = 0  # tasks in the run metrics (n ≥ max(1, min_runs))
    attempts_judged: int = 0  # their counted attempts
    link_errors: int = 0  # winning rows with outcome link_error, all tasks
    harness_errors: int = 0
    link_errors_by_kind: dict[str, int] = field(default_factory=dict)
    harness_errors_by_kind: dict[str, int] = field(default_factory=dict)
    link_error_rate: float | None = None  # link errors / attempt slots present
    success_rate: float | None = None
    consistency_gap_pp: float | None = None
    c_out: float | None = None  # HAL's C_out: mean over tasks with n ≥ 2 of (2p̂ − 1)²
    c_out_tasks: int = 0  # tasks C_out averages (n ≥ 2)
    all_agree_rate: float | None = None  # share of tasks whose counted attempts all agree
    resource_consistency: dict[str, float | None] = field(default_factory=dict)
    attempt_success_rate: float | None = None  # passes / counted attempts (tau2's avg reward)
    # inspect's mean: over tasks, each task's mean judged score (None: no attempt has a score)
    mean_score: float | None = None
    score_tasks: int = 0  # tasks with a score
    partial_scores: int = 0  # judged scores neither 0 nor 1: the scorer is not binary
    # ``run --inject``: faults injected, recovered, surfaced, misattributed (``analysis.injection_report``)
    injection: dict[str, Any] | None = None
    # ``run --link-faults absorb``: what the proxy absorbed and what surfaced
    # (``analysis.link_faults_report``); None: the run did not absorb (the key is left out).
    link_faults: dict[str, Any] | None = None
    # How the run's concurrency ran: setting, range, rate-limit episodes, surfaced 429s,
    # retunes (``analysis.concurrency_report``); None: nothing recorded (the key is left out).
    concurrency: dict[str, Any] | None = None
    pass_k_convention: PassKConvention = "driftdesk"
    retries: int = 0
    model_mismatches: int = 0
    # attempts kept out of the success denominator, by kind (empty with include_link_errors)
    removed_from_denominator: dict[str, int] = field(default_factory=dict)
    # with include_link_errors: the same attempts, counted as failures, by kind
    errors_counted_as_failures: dict[str, int] = field(default_factory=dict)
    empty_reason: str | None = None  # why no task has a success rate, when none has
    noise_floor: NoiseFloor | None = None  # what a same-size rerun can tell apart
    pass_hat_k: dict[int, float] = field(default_factory=dict)
    pass_at_k: dict[int, float] = field(default_factory=dict)
    pass_k_tasks: dict[int, int] = field(default_factory=dict)  # tasks averaged at each k
    ci95: dict[str, list[float] | None] = field(default_factory=dict)
    ci_resamples: int = 0
    tokens: dict[str, int] = field(default_factory=dict)  # prompt/completion/total, all rows
    cost_usd: float | None = None  # None when a model with tokens has no price
    unpriced_models: list[str] = field(default_factory=list)
    tasks: list[TaskStats] = field(default_factory=list)  # sorted, cut to ``top``
    tasks_total: int = 0  # tasks in the run metrics before ``top``
    tasks_below_min_runs: list[TaskStats] = field(default_factory=list)
    missing_slots: list[dict[str, Any]] = field(default_factory=list)
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    skipped_line_count: int = 0
    task_goal_completion: float | None = None
    scenario_goal_completion: float | None = None
    scenarios: list[ScenarioStats] = field(default_factory=list)
    # The run's adaptive design and how it ended (its manifest's ``adaptive``); None: fixed.
    adaptive: dict[str, Any] | None = None
    # Tasks with different numbers of attempts: how each metric reads them (metrics.py).
    unequal_repeats: dict[str, Any] | None = None
    # Who made the run (``analysis.agent_identity``: kind, client, version, recorded).
    agent: dict[str, Any] | None = None
    check_rule: str | None = None  # the rule that judged its checks (``analysis.check_rule``)
    check_warnings: list[str] = field(default_factory=list)
    # A Harbor import: Harbor's own mean beside driftdesk's, and what each left out
    # (the manifest's ``imported_from.harbor``, ``analysis.harbor_jobs.figures``)
    harbor: dict[str, Any] | None = None

    def to_json(self, *, task_curves: bool = False) -> dict[str, Any]:
        """The documented report JSON (docs/report-json.md); ``task_curves`` adds each task's
        pass^k / pass@k."""
        data: dict[str, Any] = {
            "run_id": self.run_id,
            "source": self.source,
            "run_dir": self.run_dir,
            "model": self.model,
            "status": self.status,
            "started_at": self.started_at,
            "repeat": self.repeat,
            "models": self.models,
            "agent": self.agent,
            "check_rule": self.check_rule,
            "check_warnings": self.check_warnings,
            "group_by": self.group_by,
            "include_link_errors": self.include_link_errors,
            "min_runs": self.min_runs,
            "tasks_judged": self.tasks_judged,
            "attempts_judged": self.attempts_judged,
            "link_errors": self.link_errors,
            "harness_errors": self.harness_errors,
            "link_errors_by_kind": self.link_errors_by_kind,
            "harness_errors_by_kind": self.harness_errors_by_kind,
            "link_error_rate": _round(self.link_error_rate),
            "success_rate": _round(self.success_rate),
            "consistency_gap_pp": _round(self.consistency_gap_pp, 4),
            "c_out": _round(self.c_out),
            "c_out_tasks": self.c_out_tasks,
            "all_agree_rate": _round(self.all_agree_rate),
            "resource_consistency": {
                name: _round(value) for name, value in self.resource_consistency.items()
            },
            "attempt_success_rate": _round(self.attempt_success_rate),
            "mean_score": _round(self.mean_score),
            "score_tasks": self.score_tasks,
            "partial_scores": self.partial_scores,
            "injection": self.injection,
            "pass_k_convention": self.pass_k_convention,
            "retries": self.retries,
            "model_mismatches": self.model_mismatches,
            "removed_from_denominator": self.removed_from_denominator,
            "errors_counted_as_failures": self.errors_counted_as_failures,
            "empty_reason": self.empty_reason,
            "noise_floor": None if self.noise_floor is None else self.noise_floor.to_json(),
            "pass_hat_k": {str(k): round(v, 6) for k, v in self.pass_hat_k.items()},
            "pass_at_k": {str(k): round(v, 6) for k, v in self.pass_at_k.items()},
            "pass_k_tasks": {str(k): v for k, v in self.pass_k_tasks.items()},
            "ci95": {
                name: None if ci is None else [round(ci[0], 6), round(ci[1], 6)]
                for name, ci in self.ci95.items()
            },
            "tokens": self.tokens,
            "cost_usd": _round(self.cost_usd),
            "unpriced_models": self.unpriced_models,
            "tasks_total": self.tasks_total,
            "ci_resamples": self.ci_resamples,
            "adaptive": self.adaptive,
            "unequal_repeats": self.unequal_repeats,
            "tasks": [task.to_json(curves=task_curves) for task in self.tasks],
            "tasks_below_min_runs": [
                task.to_json(curves=task_curves) for task in self.tasks_below_min_runs
            ],
            "missing_slots": self.missing_slots,
            "skipped_line_count": self.skipped_line_count,
            "skipped_lines": [
                {"file": s.file, "line": s.line, "reason": s.reason, "torn": s.torn}
                for s in self.skipped_lines
            ],
        }
        if self.link_faults is not None:
            data["link_faults"] = self.link_faults
        if self.concurrency is not None:
            data["concurrency"] = self.concurrency
        if self.harbor is not None:
            data["harbor"] = self.harbor
        if self.group_by == "scenario":
            data["task_goal_completion"] = self.task_goal_completion
            data["scenario_goal_completion"] = self.scenario_goal_completion
            tgc, sgc = self.task_goal_completion, self.scenario_goal_completion
            data["tgc_sgc_gap"] = None if tgc is None or sgc is None else round(tgc - sgc, 1)
            data["scenarios"] = [s.to_json() for s in self.scenarios]
        return data
