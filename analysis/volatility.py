"""Per-task volatility of one or many runs, aggregated by DuckDB over ``attempts.jsonl``.

Definitions (the numbers the CLI, the TUI and ``docs/report-json.md`` promise):

- The outcome is the truth. ``pass``/``fail`` are judged attempts; ``link_error`` and
  ``harness_error`` are not model behaviour and stay out of the model metrics unless
  ``include_link_errors`` is set, which counts them as failures.
- Several rows can exist for one (task_id, attempt) slot (a resume with ``--retry-link-errors``
  appends a new row): the last row in file order wins.
- Per task: n counted attempts, c passes; success = c / n; spread = max − min of the 0/1
  outcomes (1 when mixed); pass^k = C(c,k)/C(n,k) and pass@k = 1 − C(n−c,k)/C(n,k), k = 1..n.
- Per run (over tasks with at least ``min_runs`` counted attempts; the others are listed apart
  in ``tasks_below_min_runs``): success = mean task success; consistency gap (pp) = mean spread
  × 100; C_out = 1 − gap / 100; the pass^k / pass@k curve at k is the mean over the tasks with
  n ≥ k (``pass_k_tasks`` says how many), so a task with fewer attempts never drags a curve it
  cannot be measured on; 95 % bootstrap CIs resample tasks (seeded, reproducible).
- Scenarios (``group_by="scenario"``): TGC = mean task success (%), SGC = mean over scenarios of
  the minimum task success (%) — a scenario only passes when all its tasks pass — one decimal.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

GroupBy = Literal["task", "scenario"]
SortKey = Literal["spread", "success", "task"]
Source = Path | str


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
    pass_hat_k: dict[int, float] = field(default_factory=dict)
    pass_at_k: dict[int, float] = field(default_factory=dict)
    latency_mean_ms: float | None = None
    latency_cv: float | None = None  # coefficient of variation (population std / mean)
    tokens_mean: float | None = None
    tokens_cv: float | None = None
    last_error_kinds: list[str] = field(default_factory=list)  # newest first, at most 3
    missing_attempts: list[int] = field(default_factory=list)

    @property
    def volatile(self) -> bool:
        return self.passes > 0 and self.n > self.passes

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


@dataclass
class ScenarioStats:
    scenario_id: str
    tasks: int
    min_success_rate: float
    mean_success_rate: float


@dataclass
class SkippedLine:
    """A line of an attempts file that could not be used (never fatal)."""

    file: str
    line: int
    reason: str
    torn: bool = False  # the unterminated last line of a file a writer was killed during


@dataclass
class RunReport:
    """The volatility report of one run; ``to_json()`` is the documented, stable JSON."""

    run_id: str
    source: str  # the attempts.jsonl read
    model: str | None = None
    status: str | None = None  # manifest status ("running", "completed", …) if known
    group_by: GroupBy = "task"
    include_link_errors: bool = False
    min_runs: int = 1
    tasks_judged: int = 0
    attempts_judged: int = 0
    link_errors: int = 0
    harness_errors: int = 0
    link_errors_by_kind: dict[str, int] = field(default_factory=dict)
    link_error_rate: float | None = None  # link errors / attempt slots present
    success_rate: float | None = None
    consistency_gap_pp: float | None = None
    c_out: float | None = None
    pass_hat_k: dict[int, float] = field(default_factory=dict)
    pass_at_k: dict[int, float] = field(default_factory=dict)
    pass_k_tasks: dict[int, int] = field(default_factory=dict)
    ci95: dict[str, list[float] | None] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=dict)  # prompt/completion/total, all rows
    cost_usd: float | None = None  # None when any model has no price
    unpriced_models: list[str] = field(default_factory=list)
    tasks: list[TaskStats] = field(default_factory=list)
    tasks_below_min_runs: list[TaskStats] = field(default_factory=list)
    missing_slots: list[dict[str, Any]] = field(default_factory=list)
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    task_goal_completion: float | None = None
    scenario_goal_completion: float | None = None
    scenarios: list[ScenarioStats] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


def build_report(
    sources: Sequence[Source],
    *,
    min_runs: int = 1,
    include_link_errors: bool = False,
    group_by: GroupBy = "task",
    sort: SortKey = "spread",
    top: int | None = None,
    prices: dict[str, Any] | None = None,
) -> list[RunReport]:
    """One ``RunReport`` per attempts file found in ``sources`` (in order).

    A source is a run dir, an ``attempts.jsonl`` file, or a glob of either. All runs are read by
    one DuckDB query. ``sort``/``top`` order and cut ``tasks`` only (run metrics always use every
    task). ``prices`` overrides the price table (``analysis.prices.load_prices()``).
    """
    raise NotImplementedError


def pooled_task_outcomes(run_dirs: Sequence[Path]) -> dict[str, tuple[int, int]]:
    """task_id -> (passes, fails) pooled over runs (last row per slot wins), in task order."""
    raise NotImplementedError
