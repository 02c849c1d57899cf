"""Two runs side by side: metric deltas with CIs, and the tasks whose behaviour changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.analysis.volatility import RunReport, TaskStats, build_report

# Run metrics compared, with the CI that goes with each (if any).
COMPARED_METRICS: tuple[tuple[str, str | None], ...] = (
    ("success_rate", "success_rate"),
    ("consistency_gap_pp", "consistency_gap_pp"),
    ("c_out", None),
    ("tasks_judged", None),
    ("attempts_judged", None),
    ("link_errors", None),
    ("link_error_rate", None),
    ("cost_usd", None),
)


@dataclass
class MetricDelta:
    name: str
    a: float | None
    b: float | None
    delta: float | None  # b − a
    ci_a: list[float] | None = None
    ci_b: list[float] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "a": self.a,
            "b": self.b,
            "delta": None if self.delta is None else round(self.delta, 6),
            "ci_a": self.ci_a,
            "ci_b": self.ci_b,
        }


@dataclass
class TaskChange:
    """A task classified "pass" (all passed), "fail" (all failed), "volatile" or "absent"."""

    task_id: str
    before: str
    after: str
    success_a: float | None
    success_b: float | None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Comparison:
    a: RunReport
    b: RunReport
    metrics: list[MetricDelta] = field(default_factory=list)
    changed: list[TaskChange] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a.run_id,
            "b": self.b.run_id,
            "metrics": [m.to_json() for m in self.metrics],
            "changed": [c.to_json() for c in self.changed],
        }


def classify(task: TaskStats | None) -> str:
    """ "pass" when every counted attempt passed, "fail" when none did, else "volatile"."""
    if task is None or task.n == 0:
        return "absent"
    if task.passes == task.n:
        return "pass"
    if task.passes == 0:
        return "fail"
    return "volatile"


def compare_runs(
    a: RunReport | Path | str, b: RunReport | Path | str, **report_options: Any
) -> Comparison:
    """Compare run ``a`` (before) with run ``b`` (after); paths are read with ``build_report``.

    Reports passed in should list all their tasks (no ``top``); tasks below ``min_runs`` count
    as absent. ``changed`` lists every task whose class differs, in task id order.
    """
    report_a = a if isinstance(a, RunReport) else build_report([a], **report_options)[0]
    report_b = b if isinstance(b, RunReport) else build_report([b], **report_options)[0]
    comparison = Comparison(report_a, report_b)
    for name, ci_name in COMPARED_METRICS:
        value_a = getattr(report_a, name)
        value_b = getattr(report_b, name)
        delta = None if value_a is None or value_b is None else value_b - value_a
        comparison.metrics.append(
            MetricDelta(
                name,
                value_a,
                value_b,
                delta,
                report_a.ci95.get(ci_name) if ci_name else None,
                report_b.ci95.get(ci_name) if ci_name else None,
            )
        )
    tasks_a = {t.task_id: t for t in report_a.tasks}
    tasks_b = {t.task_id: t for t in report_b.tasks}
    for task_id in sorted(tasks_a.keys() | tasks_b.keys()):
        before, after = tasks_a.get(task_id), tasks_b.get(task_id)
        class_a, class_b = classify(before), classify(after)
        if class_a != class_b:
            comparison.changed.append(
                TaskChange(
                    task_id,
                    class_a,
                    class_b,
                    before.success_rate if before else None,
                    after.success_rate if after else None,
                )
            )
    return comparison
