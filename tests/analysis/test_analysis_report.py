"""The report's numbers against a run computed by hand (see analysis_fixtures.handmade_rows)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, report_of, write_handmade_run, write_run

from driftdesk.analysis.prices import load_prices
from driftdesk.analysis.report import build_report
from driftdesk.analysis.run_report import RunReport
from driftdesk.analysis.selection import select_task_ids

approx = pytest.approx


@pytest.fixture
def handmade(tmp_path: Path) -> Path:
    return write_handmade_run(tmp_path)


def by_id(report: RunReport) -> dict:
    return {t.task_id: t for t in [*report.tasks, *report.tasks_below_min_runs]}


def test_per_task_counts_success_and_spread(handmade: Path) -> None:
    tasks = by_id(report_of(handmade))
    # t4: the 429 row of slot #0 is superseded by the later pass; #2 stays a link error.
    assert (tasks["t4"].n, tasks["t4"].passes, tasks["t4"].fails) == (3, 2, 1)
    assert tasks["t4"].link_errors == 1
    assert tasks["t4"].success_rate == approx(2 / 3)
    assert [(t, tasks[t].n, tasks[t].passes) for t in ("t1", "t2", "t3", "t5")] == [
        ("t1", 4, 4),
        ("t2", 4, 2),
        ("t3", 4, 0),
        ("t5", 1, 1),
    ]
    # spread = max − min of 0/1 outcomes: 1 only where passes and fails mix (t2, t4)
    assert {t: s.spread for t, s in tasks.items()} == {
        "t1": 0.0,
        "t2": 1.0,
        "t3": 0.0,
        "t4": 1.0,
        "t5": 0.0,
    }
    # t2 latencies 100, 200, 300, 400: mean 250; population std sqrt(12500) = 111.80;
    # CV = 111.80 / 250 = 0.44721
    assert tasks["t2"].latency_mean_ms == approx(250.0)
    assert tasks["t2"].latency_cv == approx(math.sqrt(12500) / 250)
    assert tasks["t1"].latency_cv == approx(0.0)
    # newest first, winners only: t4 #2 timeout (line 13) after #1 fail (line 9)
    assert tasks["t4"].last_error_kinds == ["timeout", "fail"]
    assert tasks["t3"].last_error_kinds == ["fail", "fail", "fail"]
    # t4: pass^2 = C(2,2)/C(3,2) = 1/3; pass@2 = 1 − C(1,2)/C(3,2) = 1
    assert tasks["t4"].pass_hat_k == approx({1: 2 / 3, 2: 1 / 3, 3: 0.0})
    assert tasks["t4"].pass_at_k == approx({1: 2 / 3, 2: 1.0, 3: 1.0})


def test_run_metrics(handmade: Path) -> None:
    report = report_of(handmade)
    assert report.run_id == "handmade"
    assert report.tasks_judged == 5
    assert report.attempts_judged == 4 + 4 + 4 + 3 + 1  # 16
    # success = mean task success = (1 + 1/2 + 0 + 2/3 + 1) / 5 = 0.63333
    assert report.success_rate == approx((1 + 0.5 + 0 + 2 / 3 + 1) / 5)
    # gap = mean spread × 100 = (0 + 1 + 0 + 1 + 0) / 5 × 100 = 40 pp; all agree: 1 − 0.4
    assert report.consistency_gap_pp == approx(40.0)
    assert report.all_agree_rate == approx(0.6)
    # HAL's C_out, tasks with n ≥ 2 (t5 has 1): t1 (2·1 − 1)² = 1, t2 (2·½ − 1)² = 0, t3 1,
    # t4 (2·⅔ − 1)² = 1/9 -> (1 + 0 + 1 + 1/9) / 4 (was 0.6, "1 − gap", which is not C_out)
    assert report.c_out == approx((1 + 0 + 1 + 1 / 9) / 4)
    assert report.c_out_tasks == 4
    # pass^k over the tasks with n ≥ k (t5 has n = 1, so only k = 1 counts it):
    # k=2: t1 1, t2 C(2,2)/C(4,2) = 1/6, t3 0, t4 1/3 -> 1.5 / 4 = 0.375
    # k=3: t1 1, t2 0, t3 0, t4 0 -> 0.25;  k=4 (t1, t2, t3): 1/3
    assert report.pass_hat_k == approx({1: 0.633333333, 2: 0.375, 3: 0.25, 4: 1 / 3})
    # pass@2: t1 1, t2 1 − 1/6, t3 0, t4 1 -> (17/6) / 4;  pass@3: 3/4;  pass@4 (t1..t3): 2/3
    assert report.pass_at_k == approx({1: 0.633333333, 2: 17 / 24, 3: 0.75, 4: 2 / 3})
    assert report.pass_k_tasks == {1: 5, 2: 4, 3: 4, 4: 3}
    # link errors: winners only (the 429 was superseded); 17 slots present
    assert report.link_errors == 1
    assert report.link_errors_by_kind == {"timeout": 1}
    assert report.link_error_rate == approx(1 / 17)
    assert report.missing_slots == [
        {"task_id": "t5", "attempt": 1},
        {"task_id": "t5", "attempt": 2},
        {"task_id": "t5", "attempt": 3},
    ]
    assert by_id(report)["t5"].missing_attempts == [1, 2, 3]
    assert report.skipped_line_count == 0


def test_tokens_and_cost_from_the_price_table(handmade: Path, tmp_path: Path) -> None:
    report = report_of(handmade)
    # 16 rows × (100 prompt, 20 completion) + the superseded 429 row (50, 0) + timeout (none)
    assert report.tokens == {"prompt": 1650, "completion": 320, "total": 1970}
    # built-in gpt-4o: $2.50 in, $10 out per million: 1650 × 2.5e-6 + 320 × 1e-5 = 0.007325
    assert report.cost_usd == approx(0.007325)
    prices = tmp_path / "prices.toml"
    prices.write_text('[models."gpt-4o"]\ninput_per_mtok = 1.0\noutput_per_mtok = 2.0\n')
    custom = report_of(handmade, prices=load_prices(prices))
    assert custom.cost_usd == approx((1650 * 1.0 + 320 * 2.0) / 1e6)
    unknown = report_of(handmade, prices={})
    assert unknown.cost_usd is None
    assert unknown.unpriced_models == ["gpt-4o"]


def test_include_link_errors_counts_them_as_failures(handmade: Path) -> None:
    report = report_of(handmade, include_link_errors=True)
    t4 = by_id(report)["t4"]
    # t4 winners: pass, fail, link_error, pass -> n = 4, c = 2
    assert (t4.n, t4.passes, t4.success_rate) == (4, 2, 0.5)
    # (1 + 1/2 + 0 + 1/2 + 1) / 5 = 0.6
    assert report.success_rate == approx(0.6)
    assert report.include_link_errors


def test_min_runs_reports_short_tasks_apart(handmade: Path) -> None:
    report = report_of(handmade, min_runs=2)
    assert [t.task_id for t in report.tasks_below_min_runs] == ["t5"]
    assert "t5" not in {t.task_id for t in report.tasks}
    # (1 + 1/2 + 0 + 2/3) / 4 = 0.541667; gap = 2/4 × 100
    assert report.success_rate == approx((1 + 0.5 + 0 + 2 / 3) / 4)
    assert report.consistency_gap_pp == approx(50.0)
    assert report.tasks_judged == 4


def test_scenario_grouping_tgc_and_sgc(handmade: Path) -> None:
    report = report_of(handmade, group_by="scenario")
    # TGC = mean task success × 100 = 63.3
    assert report.task_goal_completion == 63.3
    # SGC = mean over scenarios of the minimum: s1 min(1, .5) = .5, s2 0, s3 min(2/3, 1)
    # -> (0.5 + 0 + 0.6667) / 3 × 100 = 38.9
    assert report.scenario_goal_completion == 38.9
    data = report.to_json()
    assert data["task_goal_completion"] == 63.3
    assert data["scenario_goal_completion"] == 38.9
    assert data["tgc_sgc_gap"] == 24.4
    assert [(s["scenario_id"], s["tasks"]) for s in data["scenarios"]] == [
        ("s1", 2),
        ("s2", 1),
        ("s3", 2),
    ]
    assert "task_goal_completion" not in report_of(handmade).to_json()


def test_sort_and_top(handmade: Path) -> None:
    # spread first; among equals the closest to a coin flip, then the id
    assert [t.task_id for t in report_of(handmade).tasks] == ["t2", "t4", "t1", "t3", "t5"]
    by_success = report_of(handmade, sort="success")
    assert [t.task_id for t in by_success.tasks] == ["t3", "t2", "t4", "t1", "t5"]
    top = report_of(handmade, sort="task", top=2)
    assert [t.task_id for t in top.tasks] == ["t1", "t2"]
    assert top.tasks_total == 5
    assert top.success_rate == approx(report_of(handmade).success_rate)  # metrics use all


def test_bootstrap_ci_is_seeded_and_brackets_the_estimate(handmade: Path) -> None:
    first, second = report_of(handmade), report_of(handmade)
    assert first.ci95 == second.ci95
    low, high = first.ci95["success_rate"] or [None, None]
    assert low is not None and high is not None
    assert 0.0 <= low <= first.success_rate <= high <= 1.0  # type: ignore[operator]
    assert low < high
    gap_low, gap_high = first.ci95["consistency_gap_pp"] or [None, None]
    assert 0.0 <= gap_low <= 40.0 <= gap_high <= 100.0  # type: ignore[operator]


def test_identical_tasks_give_a_degenerate_ci(tmp_path: Path) -> None:
    rows = [attempt_row("same", f"t{i}", a, "pass") for i in range(4) for a in range(2)]
    report = report_of(write_run(tmp_path, "same", list(rows), tasks=None, repeat=None))
    assert report.ci95["success_rate"] == [1.0, 1.0]
    assert report.ci95["consistency_gap_pp"] == [0.0, 0.0]


def test_json_contract(handmade: Path) -> None:
    data = report_of(handmade).to_json()
    for key in (
        "run_id",
        "tasks_judged",
        "attempts_judged",
        "link_errors",
        "success_rate",
        "consistency_gap_pp",
        "pass_hat_k",
        "pass_at_k",
        "c_out",
        "ci95",
        "tasks",
    ):
        assert key in data
    assert set(data["pass_hat_k"]) == {"1", "2", "3", "4"}  # keyed by k as a string
    assert data["pass_hat_k"]["2"] == 0.375
    first = data["tasks"][0]
    for key in ("task_id", "n", "passes", "success_rate", "spread"):
        assert key in first
    assert first["task_id"] == "t2"
    assert "pass_hat_k" not in first  # per-task curves only on request (they are big)
    curves = report_of(handmade).to_json(task_curves=True)["tasks"][0]
    # t2: c = 2 of n = 4: pass^2 = C(2,2)/C(4,2) = 1/6; pass@2 = 1 − C(2,2)/C(4,2) = 5/6
    assert curves["pass_hat_k"] == {"1": 0.5, "2": round(1 / 6, 6), "3": 0.0, "4": 0.0}
    assert curves["pass_at_k"] == {"1": 0.5, "2": round(5 / 6, 6), "3": 1.0, "4": 1.0}
    assert data["ci_resamples"] == 1000


def test_several_runs_and_globs(tmp_path: Path) -> None:
    write_handmade_run(tmp_path, "run-a")
    write_handmade_run(tmp_path, "run-b")
    reports = build_report([tmp_path / "run-*"])
    assert [r.run_id for r in reports] == ["run-a", "run-b"]
    assert reports[0].success_rate == approx(reports[1].success_rate)
    # the same run named twice (dir and file) is read once
    again = build_report([tmp_path / "run-a", tmp_path / "run-a" / "attempts.jsonl"])
    assert len(again) == 1


def test_a_run_without_attempts_yet_is_empty_not_an_error(tmp_path: Path) -> None:
    run = write_run(tmp_path, "fresh", [], tasks=["a", "b"], repeat=2, status="running")
    (run / "attempts.jsonl").unlink()
    report = report_of(run)
    assert report.tasks_judged == 0 and report.success_rate is None
    assert len(report.missing_slots) == 4
    assert [t.task_id for t in report.tasks_below_min_runs] == ["a", "b"]


def test_unknown_source_is_a_clear_error(tmp_path: Path) -> None:
    from driftdesk.analysis.sources import SourceError

    with pytest.raises(SourceError, match="no such run dir"):
        build_report([tmp_path / "nope"])
    with pytest.raises(SourceError, match="matches no run"):
        build_report([tmp_path / "nope-*"])


def test_select_task_ids(handmade: Path, tmp_path: Path) -> None:
    assert select_task_ids([handmade], "failed") == ["t2", "t3", "t4"]
    assert select_task_ids([handmade], "volatile") == ["t2", "t4"]
    # pooled over runs: t1 passes here and fails in the other run -> volatile
    other = write_run(tmp_path, "other", [attempt_row("other", "t1", 0, "fail")])
    assert "t1" in select_task_ids([handmade, other], "volatile")
    with pytest.raises(ValueError):
        select_task_ids([handmade], "flaky")  # type: ignore[arg-type]
