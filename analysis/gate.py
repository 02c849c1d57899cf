"""``driftdesk check``: a run against thresholds, for a CI job (every condition is reported).

A regression against a baseline is judged on the paired comparison over the shared tasks
(``analysis.compare``): it fails only when the drop in success rate is larger than the allowed
points AND unlikely to be noise (p < 0.05 in the stratified permutation test over attempts of
``analysis.paired``, whose CI, from the same null, is the one shown), so a noisy rerun does not
break the build while a drop that every repeat of a few tasks confirms does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from driftdesk.analysis.compare import (
    SIGNIFICANCE,
    Comparison,
    PairedDelta,
    agent_warnings,
    compare_runs,
)
from driftdesk.analysis.run_report import RunReport


@dataclass
class Condition:
    name: str  # e.g. "success_rate >= 0.8"
    passed: bool
    value: float | int | None
    detail: str  # the value in words (what failed, by how much)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "passed": self.passed,
            "value": None if self.value is None else round(self.value, 6),
            "detail": self.detail,
        }


@dataclass
class GateResult:
    run_id: str
    conditions: list[Condition]

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.conditions)

    def to_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "passed": self.passed,
            "failed": sum(1 for c in self.conditions if not c.passed),
            "conditions": [c.to_json() for c in self.conditions],
        }


def _at_least(name: str, value: float | None, threshold: float, fmt: str) -> Condition:
    if value is None:
        return Condition(name, False, None, "no judged task, so no value")
    return Condition(name, value >= threshold, value, format(value, fmt))


def unequal_repeats_note(report: RunReport) -> str:
    """What a max − min gap means when the tasks have different numbers of attempts (an
    adaptive run): it grows with n, so the same gap read at one k is given beside it."""
    uneven = report.unequal_repeats
    if not uneven or uneven.get("gap_at_k_pp") is None:
        return ""
    design = " (adaptive)" if report.adaptive else ""
    return (
        f"; tasks have {uneven['n_min']}..{uneven['n_max']} attempts{design}, and max − min "
        f"grows with n: at k = {uneven['gap_k']} for every task the gap is "
        f"{uneven['gap_at_k_pp']:.2f} pp (docs/report-json.md, Unequal repeats)"
    )


def check_run(
    report: RunReport,
    *,
    min_success: float | None = None,
    max_gap: float | None = None,
    min_pass_hat_k: list[tuple[int, float]] | None = None,
    task_min_success: float | None = None,
    max_link_error_rate: float | None = None,
    baseline: RunReport | None = None,
    max_regression_pp: float | None = None,
) -> GateResult:
    """Each given threshold becomes one condition; ``report`` must list all its tasks."""
    conditions: list[Condition] = []
    if min_success is not None:
        conditions.append(
            _at_least(f"success_rate >= {min_success:g}", report.success_rate, min_success, ".4f")
        )
    if max_gap is not None:
        gap = report.consistency_gap_pp
        conditions.append(
            Condition(f"consistency_gap_pp <= {max_gap:g}", False, None, "no judged task")
            if gap is None
            else Condition(
                f"consistency_gap_pp <= {max_gap:g}",
                gap <= max_gap,
                gap,
                f"{gap:.2f}{unequal_repeats_note(report)}",
            )
        )
    for k, threshold in min_pass_hat_k or []:
        name = f"pass^{k} >= {threshold:g}"
        if k not in report.pass_hat_k:
            measured = max(report.pass_hat_k, default=0)
            conditions.append(
                Condition(name, False, None, f"not measured at k = {k} (largest k: {measured})")
            )
        else:
            conditions.append(_at_least(name, report.pass_hat_k[k], threshold, ".4f"))
    if task_min_success is not None:
        below = sorted(
            (t for t in report.tasks if (t.success_rate or 0.0) < task_min_success),
            key=lambda t: (t.success_rate or 0.0, t.task_id),
        )
        named = ", ".join(f"{t.task_id} {t.success_rate or 0:.2f}" for t in below[:10])
        more = f" … (+{len(below) - 10})" if len(below) > 10 else ""
        conditions.append(
            Condition(
                f"every task success >= {task_min_success:g}",
                bool(report.tasks) and not below,
                len(below),
                (
                    f"{len(below)} of {len(report.tasks)} tasks below: {named}{more}"
                    if below
                    else f"all {len(report.tasks)} tasks at or above"
                    if report.tasks
                    else "no judged task"
                ),
            )
        )
    if max_link_error_rate is not None:
        rate = report.link_error_rate or 0.0
        conditions.append(
            Condition(
                f"link_error_rate <= {max_link_error_rate:g}",
                rate <= max_link_error_rate,
                rate,
                f"{rate:.4f} ({report.link_errors} link errors)",
            )
        )
    if baseline is not None:
        conditions.append(regression_condition(baseline, report, max_regression_pp or 0.0))
    return GateResult(report.run_id, conditions)


def regression_condition(
    baseline: RunReport,
    report: RunReport,
    allowed_pp: float,
    comparison: Comparison | None = None,
) -> Condition:
    """The regression condition of ``check --baseline``; ``comparison``:
    ``compare_runs(baseline, report)`` if the caller has it."""
    if comparison is None:
        comparison = compare_runs(baseline, report)
    condition = regression_verdict(
        baseline.run_id,
        comparison.delta["success_rate"],
        allowed_pp,
        comparison.only_in_a,
        comparison.only_in_b,
    )
    # another agent or client than the baseline's: the drop may be the agent's, say so
    condition.detail += "".join(f"; {w}" for w in agent_warnings(baseline, report))
    return condition


def regression_verdict(
    baseline_id: str, delta: PairedDelta, allowed_pp: float, only_in_a: int, only_in_b: int
) -> Condition:
    """The regression condition on ``delta`` (``compare.success_delta`` of a run against
    ``baseline_id`` over their shared tasks; ``only_in_*``: the tasks left out): failed by a
    drop larger than ``allowed_pp`` with p < 0.05. ``driftdesk trend`` flags a run by it too,
    so the two never disagree."""
    name = f"no significant success drop > {allowed_pp:g} pp vs {baseline_id}"
    if delta.value is None:
        return Condition(name, False, None, "no task judged by both runs: nothing to compare")
    change_pp = delta.value * 100
    drop = -change_pp
    significant = delta.p_value is not None and delta.p_value < SIGNIFICANCE
    failed = drop > allowed_pp and significant
    left_out = (
        f"; {only_in_a} baseline-only and {only_in_b} run-only tasks left out"
        if only_in_a or only_in_b
        else ""
    )
    return Condition(name, not failed, change_pp, f"{delta.sentence}{left_out}")
