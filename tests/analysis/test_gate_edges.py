"""The gate's edges that mutation testing found unguarded (tests/mutants): the per-task list
past ten tasks, a clean run's link-error condition, the regression's exact size, its tasks
left out, and p = 0.05 exactly. In-process, on real run dirs read by ``build_report``."""

from __future__ import annotations

from pathlib import Path

from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.compare import compare_runs
from driftdesk.analysis.gate import check_run, regression_condition
from driftdesk.analysis.report import build_report
from driftdesk.analysis.run_report import RunReport

# Passes out of 4 per task: rates 0 (3 tasks), 0.25 (3), 0.5 (4), 0.75 (1), 1 (2), so that
# the order by rate differs from the order by task id.
PASSES = {
    "t00": 2, "t01": 0, "t02": 3, "t03": 1, "t04": 2, "t05": 0, "t06": 4,
    "t07": 1, "t08": 2, "t09": 0, "t10": 2, "t11": 1, "t12": 4,
}  # fmt: skip


def _report(root: Path, run_id: str, passes: dict[str, int], repeat: int) -> RunReport:
    rows = [
        attempt_row(run_id, task, a, "pass" if a < passed else "fail")
        for task, passed in passes.items()
        for a in range(repeat)
    ]
    (report,) = build_report(
        [write_run(root, run_id, list(rows), tasks=list(passes), repeat=repeat)]
    )
    return report


def test_the_tasks_below_are_listed_lowest_first_ten_at_most(tmp_path: Path) -> None:
    report = _report(tmp_path, "r", PASSES, 4)
    lowest_ten = (
        "t01 0.00, t05 0.00, t09 0.00, t03 0.25, t07 0.25, t11 0.25, "
        "t00 0.50, t04 0.50, t08 0.50, t10 0.50"
    )
    (eleven,) = check_run(report, task_min_success=1.0).conditions
    assert (eleven.passed, eleven.value) == (False, 11)
    assert eleven.detail == f"11 of 13 tasks below: {lowest_ten} … (+1)"  # t02 0.75 not named
    (ten,) = check_run(report, task_min_success=0.75).conditions
    assert ten.detail == f"10 of 13 tasks below: {lowest_ten}"  # all ten named: no "more"


def test_a_clean_run_meets_a_zero_link_error_rate_and_each_condition_says_its_value(
    tmp_path: Path,
) -> None:
    report = _report(tmp_path, "r", PASSES, 4)
    gap, hat2 = report.consistency_gap_pp, report.pass_hat_k[2]
    assert report.link_errors == 0 and gap is not None
    gate = check_run(report, max_link_error_rate=0.0, max_gap=gap, min_pass_hat_k=[(2, hat2)])
    gap_condition, pass_hat, links = gate.conditions  # in check_run's order
    assert links.passed and links.value == 0.0 and links.detail == "0.0000 (0 link errors)"
    assert gap_condition.passed and gap_condition.detail == f"{gap:.2f}"
    assert pass_hat.name == f"pass^2 >= {hat2:g}" and pass_hat.detail == f"{hat2:.4f}"
    assert gate.passed


def test_the_regression_is_the_success_drop_in_points_and_says_the_tasks_left_out(
    tmp_path: Path,
) -> None:
    # Baseline: t0..t3 all pass. Run: t0, t1 all fail, t2, t3 all pass: exactly −50 pp, and
    # every repeat agrees (p = 2 / 70² ≈ 0.0004).
    baseline = _report(tmp_path, "base", {"t0": 4, "t1": 4, "t2": 4, "t3": 4}, 4)
    run = _report(tmp_path, "run", {"t0": 0, "t1": 0, "t2": 4, "t3": 4}, 4)
    drop = regression_condition(baseline, run, 49.9)
    assert not drop.passed and drop.value == -50.0
    assert regression_condition(baseline, run, 50.0).passed  # larger than allowed to fail
    sentence = compare_runs(baseline, run).delta["success_rate"].sentence
    assert drop.detail == sentence  # nothing left out, nothing added
    # The baseline judged two more tasks: compared without them, and the detail says so.
    wider = _report(tmp_path, "wider", {"t0": 4, "t1": 4, "t2": 4, "t3": 4, "t4": 4, "t5": 0}, 4)
    left_out = regression_condition(wider, run, 5.0)
    assert not left_out.passed and left_out.value == -50.0
    assert left_out.detail == f"{sentence}; 2 baseline-only and 0 run-only tasks left out"
    extra = regression_condition(run, wider, 5.0)  # the other way round: run-only tasks
    assert extra.detail.endswith("; 0 baseline-only and 2 run-only tasks left out")


def test_a_drop_at_p_exactly_0_05_is_not_significant(tmp_path: Path) -> None:
    # One task: the baseline's one attempt passed, the run's 39 all failed. Under "no change"
    # the one pass is equally likely in any of the 40 slots: P(it is the baseline's) = 1/40,
    # so p = 2/40 = 0.05 exactly, which is not below 0.05: the gate holds.
    baseline = _report(tmp_path, "base", {"t0": 1}, 1)
    run = _report(tmp_path, "run", {"t0": 0}, 39)
    comparison = compare_runs(baseline, run)
    assert comparison.delta["success_rate"].p_value == 0.05
    condition = regression_condition(baseline, run, 5.0, comparison)
    assert condition.passed and condition.value == -100.0
    assert "could be noise (p = 0.05," in condition.detail
