"""Injected faults in a run (``driftdesk run --inject``): what became of them, and R_fault.

Every attempt row of a run that injected faults carries ``injected_faults`` and its split
(``injected_recovered`` / ``_surfaced`` / ``_misattributed``, defined in
``driftdesk.reruns.injection``): recovered = a later call of the attempt got a whole answer;
surfaced = the attempt ended unjudged (a link error); misattributed = the attempt was judged
pass/fail although its model answer never arrived. Misattributed is expected to be 0: any other
count is an attribution bug or an agent that hides faults, and the attempts are named.

R_fault (HAL's robustness to faults) = faulted success / clean success, over the tasks both
runs judged, each run's success the mean of its per-task success rates (link errors are not
judged, so this is what the faults cost when the agent recovered). Its 95 % CI is the delta
method over tasks: with f_i, c_i a task's faulted and clean rates and R = f̄ / c̄, the
standard error is sqrt(Σ (f_i − R c_i)² / (n (n − 1))) / c̄, the CI R ± 1.96 se (tasks are the
sampled unit; a task's two rates stay paired). tests/analysis/test_injection_report.py checks its
coverage on simulated runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from statistics import NormalDist
from typing import Any

from driftdesk.analysis.sources import SourceError, manifest_or_empty
from driftdesk.fileio import iter_jsonl
from driftdesk.rundir import ATTEMPTS_FILE, RunManifest, latest_rows

FIGURES = ("injected_faults", "injected_recovered", "injected_surfaced", "injected_misattributed")
R_FAULT_METHOD = "delta-method-over-tasks"


@dataclass
class TaskInjection:
    task_id: str
    faults: int = 0
    recovered: int = 0
    surfaced: int = 0
    misattributed: int = 0
    absorbed: int = 0  # held at the proxy (--link-faults absorb): the agent never saw them

    def add(self, row: dict[str, Any]) -> None:
        self.faults += _count(row, "injected_faults")
        self.recovered += _count(row, "injected_recovered")
        self.surfaced += _count(row, "injected_surfaced")
        self.misattributed += _count(row, "injected_misattributed")
        self.absorbed += _count(row, "injected_absorbed")


@dataclass
class InjectionSummary:
    """A run's injected faults, whole and per task (tasks with a fault, in suite order)."""

    spec: str | None
    attempts: int = 0
    total: TaskInjection = field(default_factory=lambda: TaskInjection("*"))
    by_task: list[TaskInjection] = field(default_factory=list)
    misattributed_attempts: list[tuple[str, int]] = field(default_factory=list)

    @property
    def accounted(self) -> bool:
        """Every fault is recovered, surfaced or misattributed (a row that says otherwise is
        hand-made or broken)."""
        t = self.total
        return t.recovered + t.surfaced + t.misattributed == t.faults

    def to_json(self) -> dict[str, Any]:
        t = self.total
        return {
            "spec": self.spec,
            "attempts": self.attempts,
            "faults": t.faults,
            "recovered": t.recovered,
            "surfaced": t.surfaced,
            "misattributed": t.misattributed,
            "absorbed": t.absorbed,
            "misattributed_attempts": [
                {"task_id": task, "attempt": attempt}
                for task, attempt in self.misattributed_attempts
            ],
            "tasks": [
                {
                    "task_id": x.task_id,
                    "faults": x.faults,
                    "recovered": x.recovered,
                    "surfaced": x.surfaced,
                    "misattributed": x.misattributed,
                }
                for x in self.by_task
            ],
        }


def _count(row: dict[str, Any], name: str) -> int:
    value = row.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def injection_summary(rows: Iterable[dict[str, Any]], spec: str | None = None) -> InjectionSummary:
    """The summary of a run's attempt rows (the last row per slot counts, as everywhere)."""
    latest = latest_rows(rows)
    summary = InjectionSummary(spec, attempts=len(latest))
    tasks: dict[str, TaskInjection] = {}
    for (task_id, attempt), row in latest.items():
        if not _count(row, "injected_faults"):
            continue
        summary.total.add(row)
        tasks.setdefault(task_id, TaskInjection(task_id)).add(row)
        if _count(row, "injected_misattributed"):
            summary.misattributed_attempts.append((task_id, attempt))
    summary.by_task = list(tasks.values())
    return summary


def injection_spec(run_dir: Path | str | None) -> str | None:
    """The ``--inject`` spec a run recorded (None: none, or no readable manifest)."""
    try:
        manifest = manifest_or_empty(Path(run_dir) if run_dir is not None else None)
    except SourceError:
        return None
    return manifest_injection_spec(manifest)


def manifest_injection_spec(manifest: dict[str, Any]) -> str | None:
    """The ``--inject`` spec recorded in a run's manifest (None: it injected nothing)."""
    injection = RunManifest.from_json(manifest).injection
    spec = injection.get("spec") if injection is not None else None
    return str(spec) if spec else None


def read_injection(run_dir: Path | str | None) -> InjectionSummary | None:
    """The run's injection summary (None: not a run dir, or it injected nothing)."""
    spec = injection_spec(run_dir)
    if spec is None or run_dir is None:
        return None
    path = Path(run_dir) / ATTEMPTS_FILE
    rows = [row for _, row in iter_jsonl(path, [])] if path.is_file() else []
    return injection_summary(rows, spec)


def summary_line(summary: InjectionSummary) -> str:
    t = summary.total
    line = (
        f"injected faults ({summary.spec or '?'}): {t.faults}: recovered {t.recovered}, "
        f"surfaced as link errors {t.surfaced}, misattributed {t.misattributed}"
    )
    if t.absorbed:
        line += f"; {t.absorbed} of them absorbed at the proxy (the agent never saw them)"
    if t.misattributed:
        named = ", ".join(f"{task}/{attempt}" for task, attempt in summary.misattributed_attempts)
        line += f" (expected 0: judged although the model's answer never came: {named[:400]})"
    return line


def report_lines(summary: InjectionSummary, top: int | None = None) -> list[str]:
    """The report's injection section: the run's line, then one line per task with faults."""
    lines = ["  " + summary_line(summary)]
    if not summary.by_task:
        return lines
    width = max(len(x.task_id) for x in summary.by_task)
    lines.append(
        f"    {'TASK':<{width}}  {'FAULTS':>6}  {'RECOVERED':>9}  {'SURFACED':>8}  MISATTRIBUTED"
    )
    shown = summary.by_task if top is None else summary.by_task[:top]
    for x in shown:
        lines.append(
            f"    {x.task_id:<{width}}  {x.faults:>6}  {x.recovered:>9}  {x.surfaced:>8}  "
            f"{x.misattributed}"
        )
    if len(shown) < len(summary.by_task):
        lines.append(f"    … {len(summary.by_task) - len(shown)} more tasks with faults")
    return lines


@dataclass(frozen=True)
class RFault:
    """HAL's R_fault: faulted success / clean success, with its 95 % CI."""

    value: float | None
    ci95: list[float] | None
    tasks: int
    method: str = R_FAULT_METHOD

    def to_json(self) -> dict[str, Any]:
        return {"value": self.value, "ci95": self.ci95, "tasks": self.tasks, "method": self.method}

    def sentence(self) -> str:
        if self.value is None:
            return f"R_fault: undefined (the clean run passed nothing over {self.tasks} tasks)"
        ci = f", 95 % CI {self.ci95[0]:.3f} to {self.ci95[1]:.3f}" if self.ci95 else ""
        return (
            f"R_fault (faulted success / clean success) = {self.value:.3f}{ci} "
            f"({self.method}, {self.tasks} tasks)"
        )


def r_fault(pairs: Sequence[tuple[float, float]], *, alpha: float = 0.05) -> RFault:
    """``pairs``: per task (clean success rate, faulted success rate)."""
    n = len(pairs)
    clean = math.fsum(c for c, _ in pairs) / n if n else 0.0
    if n == 0 or clean == 0:
        return RFault(None, None, n)
    faulted = math.fsum(f for _, f in pairs) / n
    value = faulted / clean
    if n < 2:
        return RFault(value, None, n)
    residuals = math.fsum((f - value * c) ** 2 for c, f in pairs)
    se = math.sqrt(residuals / (n * (n - 1))) / clean
    half = NormalDist().inv_cdf(1 - alpha / 2) * se
    return RFault(value, [value - half, value + half], n)


__all__ = [
    "FIGURES",
    "InjectionSummary",
    "RFault",
    "TaskInjection",
    "injection_spec",
    "injection_summary",
    "manifest_injection_spec",
    "r_fault",
    "read_injection",
    "report_lines",
    "summary_line",
]
