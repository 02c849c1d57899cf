"""Two runs side by side: metric deltas with CIs, and the tasks whose behaviour changed."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.volatility import RunReport


@dataclass
class MetricDelta:
    name: str
    a: float | None
    b: float | None
    delta: float | None  # b − a
    ci_a: list[float] | None = None
    ci_b: list[float] | None = None


@dataclass
class TaskChange:
    """A task classified "pass" (all passed), "fail" (all failed), "volatile" or "absent"."""

    task_id: str
    before: str
    after: str
    success_a: float | None
    success_b: float | None


@dataclass
class Comparison:
    a: RunReport
    b: RunReport
    metrics: list[MetricDelta] = field(default_factory=list)
    changed: list[TaskChange] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        raise NotImplementedError


def compare_runs(
    a: RunReport | Path | str, b: RunReport | Path | str, **report_options: Any
) -> Comparison:
    """Compare run ``a`` (before) with run ``b`` (after); paths are read with ``build_report``."""
    raise NotImplementedError
