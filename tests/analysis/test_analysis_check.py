"""``driftdesk check`` gates a CI job: the real CLI in a subprocess, read by its exit code."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_handmade_run, write_run


@pytest.fixture
def handmade(home, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    return write_handmade_run(tmp_path)


def test_every_condition_holds_exit_0(cli, handmade: Path) -> None:  # type: ignore[no-untyped-def]
    # handmade: success 0.6333, gap 40 pp, pass^2 0.375, link error rate 1/17
    done = cli(
        "check",
        str(handmade),
        "--min-success", "0.6",
        "--max-gap", "40",
        "--min-pass-hat-k", "2=0.375",
        "--max-link-error-rate", "0.06",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "PASS  success_rate >= 0.6" in done.stdout and "0.6333" in done.stdout
    assert "PASS  consistency_gap_pp <= 40" in done.stdout and "40.00" in done.stdout
    assert "PASS  pass^2 >= 0.375" in done.stdout
    assert "PASS  link_error_rate <= 0.06" in done.stdout and "0.0588" in done.stdout
    assert done.stdout.rstrip().endswith("result: PASS")


def test_a_failing_condition_exits_1_and_json_says_which(cli, handmade: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli(
        "check", str(handmade), "--min-success", "0.8", "--task-min-success", "0.6",
        "--min-pass-hat-k", "9=0.1", "--format", "json",
    )  # fmt: skip
    assert done.returncode == 1, done.stderr
    data = json.loads(done.stdout)
    assert data["passed"] is False and data["failed"] == 3
    by_name = {c["name"]: c for c in data["conditions"]}
    assert by_name["success_rate >= 0.8"]["value"] == pytest.approx(0.633333, abs=1e-6)
    # per-task threshold across repeats: t2 (0.5) and t3 (0) are below 0.6
    task = by_name["every task success >= 0.6"]
    assert task["value"] == 2 and "t3 0.00, t2 0.50" in task["detail"]
    assert "not measured at k = 9" in by_name["pass^9 >= 0.1"]["detail"]
    table = cli("check", str(handmade), "--min-success", "0.8")
    assert table.returncode == 1 and "FAIL  success_rate >= 0.8" in table.stdout
    assert "result: FAIL (1 of 1 conditions failed)" in table.stdout


def test_bad_input_is_exit_2(cli, handmade: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("check", str(handmade)).returncode == 2  # no condition
    assert cli("check", str(tmp_path / "nope"), "--min-success", "0.5").returncode == 2
    bad = cli("check", str(handmade), "--min-pass-hat-k", "3:0.5")
    assert bad.returncode == 2 and "K=RATE" in bad.stderr


def _run(root: Path, run_id: str, rate: float, seed: int, tasks: int = 40, repeat: int = 4) -> Path:
    rng = random.Random(seed)
    rows = [
        attempt_row(run_id, f"t{i:02d}", a, "pass" if rng.random() < rate else "fail")
        for i in range(tasks)
        for a in range(repeat)
    ]
    return write_run(
        root, run_id, list(rows), tasks=[f"t{i:02d}" for i in range(tasks)], repeat=repeat
    )


def test_regression_fails_only_when_significant_and_larger_than_allowed(
    cli, home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    baseline = _run(tmp_path, "base", 0.85, seed=1)
    worse = _run(tmp_path, "worse", 0.45, seed=2)  # a large, clear drop
    same = _run(tmp_path, "same", 0.85, seed=3)  # the same model rerun: noise only
    done = cli("check", str(worse), "--baseline", str(baseline), "--max-regression", "5")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL  no significant success drop > 5 pp vs base" in done.stdout
    assert "unlikely to be noise" in done.stdout
    noisy = cli(
        "check", str(same), "--baseline", str(baseline), "--max-regression", "5", "--format", "json"
    )
    assert noisy.returncode == 0, noisy.stdout
    (cond,) = json.loads(noisy.stdout)["conditions"]
    assert cond["passed"] and "could be noise" in cond["detail"]
    # a large drop allowed by the threshold passes too
    allowed = cli("check", str(worse), "--baseline", str(baseline), "--max-regression", "60")
    assert allowed.returncode == 0, allowed.stdout


def test_a_drop_in_five_of_twenty_tasks_fails_the_regression_gate(
    cli, home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Seen: baseline 20 tasks × 5 all pass, candidate 5 of them 0/5: 'worse by 25.0 pp … 95 %
    CI -45.0–-5.0 pp; could be noise (p = 0.0625)', exit 0. A sign flip over 5 changed tasks
    cannot go below 2/2⁵, whatever the repeats say; the test now permutes each task's attempts
    (a 5/5 → 0/5 split has probability 1/252 per task), and the CI comes from the same null."""
    tasks = [f"t{i:02d}" for i in range(20)]
    broken = set(tasks[:5])

    def run(run_id: str, fails: set[str]) -> Path:
        rows = [
            attempt_row(run_id, t, a, "fail" if t in fails else "pass")
            for t in tasks
            for a in range(5)
        ]
        return write_run(tmp_path, run_id, list(rows), tasks=tasks, repeat=5)

    base, cand = run("base", set()), run("cand", broken)
    done = cli(
        "check", str(cand), "--baseline", str(base), "--max-regression", "5", "--format", "json"
    )
    assert done.returncode == 1, done.stdout + done.stderr
    (cond,) = json.loads(done.stdout)["conditions"]
    assert not cond["passed"] and cond["value"] == pytest.approx(-25.0)
    assert "unlikely to be noise" in cond["detail"] and "stratified-permutation" in cond["detail"]
    # the CI said in the detail excludes 0, as p < 0.05 says
    low, high = (
        float(x) for x in cond["detail"].split("95 % CI ")[1].split(" pp")[0].split(" to ")
    )
    assert low < high < 0
    # the same tasks rerun without change pass
    same = cli("check", str(run("same", set())), "--baseline", str(base), "--max-regression", "5")
    assert same.returncode == 0, same.stdout


def test_no_change_reruns_pass_the_gate_at_the_stated_false_alarm_rate() -> None:
    """1,000 simulated pairs of the same 20 tasks × 5 repeats (no change): the two-sided test
    rejects at most 5 % (± noise) of them, and the gate (a significant drop) at most half that."""
    import math

    from driftdesk.analysis.gate import check_run
    from driftdesk.analysis.run_report import RunReport, TaskStats

    rng = random.Random(31)

    def report(run_id: str, rates: list[float]) -> RunReport:
        tasks = []
        for i, rate in enumerate(rates):
            passes = sum(rng.random() < rate for _ in range(5))
            spread = 1.0 if 0 < passes < 5 else 0.0
            tasks.append(
                TaskStats(f"t{i:02d}", None, 5, passes, 5 - passes, 0, 0, passes / 5, spread)
            )
        return RunReport(run_id=run_id, source=run_id, tasks=tasks, repeat=5)

    pairs, rejected, gate_failed = 1000, 0, 0
    for _ in range(pairs):
        # a realistic suite: most tasks settled (always or never pass), some volatile
        rates = [rng.choice([1.0, 1.0, 0.0, rng.random()]) for _ in range(20)]
        result = check_run(report("cand", rates), baseline=report("base", rates))
        (cond,) = result.conditions
        rejected += "unlikely to be noise" in cond.detail
        gate_failed += not cond.passed
    noise = 3 * math.sqrt(0.05 * 0.95 / pairs)  # three standard errors of a 5 % rate
    assert rejected / pairs <= 0.05 + noise, rejected
    assert gate_failed / pairs <= 0.025 + noise, gate_failed
    assert gate_failed > 0  # the gate can fire on noise at all: the test is not vacuous


@pytest.mark.parametrize(
    ("option", "value", "reason"),
    [
        ("--max-link-error-rate", "5", "a rate is a fraction"),  # meant as 5 %: was accepted
        ("--max-link-error-rate", "inf", "a rate is a fraction"),
        ("--min-success", "-0.1", "a rate is a fraction"),
        ("--min-success", "1.5", "a rate is a fraction"),  # was exit 1 (a failed gate)
        ("--min-success", "nan", "a rate is a fraction"),
        ("--task-min-success", "150%", "a rate is a fraction"),
        ("--min-pass-hat-k", "3=1.5", "K=RATE"),
        ("--max-gap", "-1", "percentage points"),
        ("--max-gap", "nan", "percentage points"),
        ("--max-regression", "-5", "percentage points"),  # was a gate that always held
        ("--max-regression", "inf", "percentage points"),
        ("--min-runs", "0", "a whole number ≥ 1"),
    ],
)
def test_a_threshold_out_of_range_is_bad_input(  # type: ignore[no-untyped-def]
    cli, handmade: Path, option: str, value: str, reason: str
) -> None:
    done = cli("check", str(handmade), "--baseline", str(handmade), f"{option}={value}")
    assert done.returncode == 2, done.stdout + done.stderr
    (error,) = [line for line in done.stderr.splitlines() if "error:" in line]
    assert option in error and reason in error and value in error
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_rate_may_be_given_as_a_percentage(cli, handmade: Path) -> None:  # type: ignore[no-untyped-def]
    # handmade: link error rate 1/17 = 5.9 %
    assert cli("check", str(handmade), "--max-link-error-rate", "6%").returncode == 0
    done = cli("check", str(handmade), "--max-link-error-rate", "5%")
    assert done.returncode == 1 and "FAIL  link_error_rate <= 0.05" in done.stdout
    assert cli("check", str(handmade), "--min-success", "60%").returncode == 0


def test_an_improvement_never_fails_the_regression_gate(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # The same pair as above, the other way round: a large, clear gain (the gate judges the
    # drop, not the size of the change).
    baseline = _run(tmp_path, "base", 0.45, seed=2)
    better = _run(tmp_path, "better", 0.85, seed=1)
    done = cli(
        "check", str(better), "--baseline", str(baseline), "--max-regression", "5",
        "--format", "json",
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (cond,) = json.loads(done.stdout)["conditions"]
    assert cond["passed"] and cond["value"] > 30  # points gained, signed
    assert "better" in cond["detail"] and "unlikely to be noise" in cond["detail"]


def test_each_condition_at_its_threshold_in_process(handmade: Path, tmp_path: Path) -> None:
    """The gate's conditions at and just past their thresholds (≥ and ≤ hold at equality),
    called in-process: what each says and how it is named."""
    from driftdesk.analysis.gate import check_run
    from driftdesk.analysis.report import build_report

    (report,) = build_report([handmade])
    rate = report.success_rate
    assert rate is not None and report.consistency_gap_pp == 40
    at = check_run(
        report,
        min_success=rate,
        max_gap=40,
        min_pass_hat_k=[(2, report.pass_hat_k[2]), (9, 0.1)],
        task_min_success=0.5,
        max_link_error_rate=1 / 17,
    )
    by_name = {c.name: c for c in at.conditions}
    assert [c.passed for c in at.conditions] == [True, True, True, False, False, True]
    assert by_name[f"success_rate >= {rate:g}"].detail == f"{rate:.4f}"
    assert by_name["consistency_gap_pp <= 40"].value == 40
    assert by_name["pass^9 >= 0.1"].detail == "not measured at k = 9 (largest k: 4)"
    assert by_name["every task success >= 0.5"].detail == "1 of 5 tasks below: t3 0.00"
    assert by_name["link_error_rate <= 0.0588235"].detail == "0.0588 (1 link errors)"
    assert not at.passed and at.to_json()["failed"] == 2
    assert at.to_json()["conditions"][0]["value"] == round(rate, 6) != rate  # 6 decimals
    past = check_run(report, min_success=rate + 1e-9, max_gap=39.99, task_min_success=0.0)
    assert [c.passed for c in past.conditions] == [False, False, True]
    assert past.conditions[2].detail == "all 5 tasks at or above"
    assert check_run(report).conditions == [] and check_run(report).passed


def test_the_regression_condition_in_process(tmp_path: Path) -> None:
    from driftdesk.analysis.gate import check_run
    from driftdesk.analysis.report import build_report

    (low,) = build_report([_run(tmp_path, "low", 0.45, seed=2)])
    (high,) = build_report([_run(tmp_path, "high", 0.85, seed=1)])
    (drop,) = check_run(low, baseline=high, max_regression_pp=5).conditions
    assert not drop.passed and drop.value is not None and drop.value < -30
    assert drop.name == "no significant success drop > 5 pp vs high"
    (gain,) = check_run(high, baseline=low, max_regression_pp=5).conditions
    assert gain.passed and gain.value == -drop.value
    # Allowed up to the size of the drop itself (a drop must be larger than allowed to fail).
    assert check_run(low, baseline=high, max_regression_pp=-drop.value).passed
    assert not check_run(low, baseline=high, max_regression_pp=-drop.value - 0.01).passed


def test_a_run_with_no_judged_task_fails_every_condition_saying_why(tmp_path: Path) -> None:
    from driftdesk.analysis.gate import check_run
    from driftdesk.analysis.report import build_report

    rows = [attempt_row("none", "t1", a, "link_error", error_code="500") for a in range(2)]
    (report,) = build_report([write_run(tmp_path, "none", rows, tasks=["t1"], repeat=2)])
    gate = check_run(
        report,
        min_success=0.5,
        max_gap=40,
        min_pass_hat_k=[(1, 0.5)],
        task_min_success=0.5,
        max_link_error_rate=0.5,
        baseline=report,
    )
    assert gate.to_json() == {
        "run_id": "none",
        "passed": False,
        "failed": 6,
        "conditions": [
            {"name": "success_rate >= 0.5", "passed": False, "value": None,
             "detail": "no judged task, so no value"},
            {"name": "consistency_gap_pp <= 40", "passed": False, "value": None,
             "detail": "no judged task"},
            {"name": "pass^1 >= 0.5", "passed": False, "value": None,
             "detail": "not measured at k = 1 (largest k: 0)"},
            {"name": "every task success >= 0.5", "passed": False, "value": 0,
             "detail": "no judged task"},
            {"name": "link_error_rate <= 0.5", "passed": False, "value": 1.0,
             "detail": "1.0000 (2 link errors)"},
            {"name": "no significant success drop > 0 pp vs none", "passed": False,
             "value": None, "detail": "no task judged by both runs: nothing to compare"},
        ],
    }  # fmt: skip
