"""Each published metric against its source's own formula, on data the tests generate.

The reference functions below are written from each source's definition (cited per function);
they work on plain per-attempt lists, independently of driftdesk's SQL and aggregates.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path

import numpy as np
import pytest
from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.imports import import_results
from driftdesk.analysis.prices import ModelPrice
from driftdesk.analysis.report import build_report
from driftdesk.analysis.run_report import RunReport

approx = pytest.approx
PRICE = ModelPrice(2.0, 8.0)


def report_of(run: Path, **options: object) -> RunReport:
    options.setdefault("prices", {"gpt-4o": PRICE})
    (report,) = build_report([run], **options)  # type: ignore[arg-type]
    return report


def generated_run(root: Path, seed: int = 7) -> tuple[Path, dict[str, list[dict]]]:
    """Tasks with 1..6 judged attempts, random outcomes, latencies (some 0) and tokens, and a
    link error or two that must stay out of every model metric."""
    rng = random.Random(seed)
    rows: list[dict] = []
    by_task: dict[str, list[dict]] = {}
    for t in range(25):
        task = f"task-{t:02d}"
        p = rng.choice([0.0, 0.2, 0.5, 0.8, 1.0])
        for a in range(rng.randint(1, 6)):
            outcome = "pass" if rng.random() < p else "fail"
            prompt, completion = rng.randint(0, 3000), rng.randint(0, 400)
            row = attempt_row(
                "gen",
                task,
                a,
                outcome,
                latency_ms=rng.choice([0.0, rng.uniform(100, 9000)]),
                prompt_tokens=prompt,
                completion_tokens=completion,
                total_tokens=prompt + completion,
            )
            rows.append(row)
            by_task.setdefault(task, []).append(row)
        if rng.random() < 0.2:
            rows.append(attempt_row("gen", task, 99, "link_error", error_code="timeout"))
    return write_run(root, "gen", rows), by_task


# --- HAL (princeton-pli/hal-harness, reliability_eval/metrics/consistency.py) ---


def hal_outcome(successes: list[int]) -> float:
    """consistency_outcome(t) = (2·p̂ − 1)², NaN for K < 2."""
    if len(successes) < 2:
        return math.nan
    return float((2 * np.mean(successes) - 1) ** 2)


def hal_cv(values: list[float]) -> float | None:
    """CV over the positive values: std(ddof=1) / mean; none below 2 values or mean ≤ 0."""
    values = [v for v in values if v > 0]
    if len(values) < 2 or np.mean(values) <= 0:
        return None
    return float(np.std(values, ddof=1) / np.mean(values))


def hal_resource(cvs: list[float | None]) -> float:
    known = [c for c in cvs if c is not None]
    return float(np.exp(-np.mean(known))) if known else math.nan


def test_c_out_is_hals_outcome_consistency(tmp_path: Path) -> None:
    run, by_task = generated_run(tmp_path)
    report = report_of(run)
    per_task = {
        t: hal_outcome([r["outcome"] == "pass" for r in rows]) for t, rows in by_task.items()
    }
    # HAL: tasks with K < 2 are skipped, the rest averaged
    defined = [v for v in per_task.values() if not math.isnan(v)]
    assert len(defined) < len(per_task)  # the data has K = 1 tasks, so exclusion is tested
    assert report.c_out == approx(float(np.mean(defined)))
    assert report.c_out_tasks == len(defined)
    tasks = {t.task_id: t for t in [*report.tasks, *report.tasks_below_min_runs]}
    for task_id, expected in per_task.items():
        if math.isnan(expected):
            assert tasks[task_id].c_out is None
        else:
            assert tasks[task_id].c_out == approx(expected)


def test_four_of_five_is_036_and_the_old_number_has_its_own_name(tmp_path: Path) -> None:
    rows = [attempt_row("r", "t", a, "pass" if a < 4 else "fail") for a in range(5)]
    report = report_of(write_run(tmp_path, "r", list(rows)))
    # HAL: (2 × 0.8 − 1)² = 0.36; the old "1 − mean spread" gave 0 and is now all_agree_rate
    assert report.c_out == approx(0.36)
    assert report.all_agree_rate == approx(0.0)
    data = report.to_json()
    assert data["c_out"] == 0.36 and data["all_agree_rate"] == 0.0


def test_resource_consistency_is_hals_exp_minus_cv(tmp_path: Path) -> None:
    run, by_task = generated_run(tmp_path)
    report = report_of(run)
    tasks = {t.task_id: t for t in [*report.tasks, *report.tasks_below_min_runs]}
    expected: dict[str, list[float]] = {"latency": [], "tokens": [], "cost": [], "resource": []}
    for task_id, rows in by_task.items():
        if len(rows) < 2:  # HAL: only tasks with K ≥ 2
            assert tasks[task_id].resource_consistency is None
            continue
        cvs = {
            "latency": hal_cv([r["latency_ms"] for r in rows]),
            "tokens": hal_cv([r["total_tokens"] for r in rows]),
            "cost": hal_cv([PRICE.cost(r["prompt_tokens"], r["completion_tokens"]) for r in rows]),
        }
        for name, cv in cvs.items():
            got = getattr(tasks[task_id], f"{name}_consistency")
            if cv is None:
                assert got is None, (task_id, name)
            else:
                assert got == approx(math.exp(-cv)), (task_id, name)
                expected[name].append(math.exp(-cv))
        combined = hal_resource(list(cvs.values()))
        if not math.isnan(combined):
            assert tasks[task_id].resource_consistency == approx(combined)
            expected["resource"].append(combined)
    # run level: HAL averages the per-task values it has (NaN skipped)
    for name, values in expected.items():
        assert values, name
        assert report.resource_consistency[name] == approx(float(np.mean(values))), name
    assert set(report.to_json()["resource_consistency"]) == {
        "latency",
        "tokens",
        "cost",
        "resource",
    }


def test_resource_consistency_edge_cases(tmp_path: Path) -> None:
    rows = [
        # mean 0 (every latency 0): HAL has no CV; one positive value: none either
        attempt_row("e", "zero", 0, "pass", latency_ms=0.0, total_tokens=10),
        attempt_row("e", "zero", 1, "pass", latency_ms=0.0, total_tokens=10),
        attempt_row("e", "one", 0, "pass", latency_ms=0.0, total_tokens=0),
        attempt_row("e", "one", 1, "fail", latency_ms=500.0, total_tokens=0),
        attempt_row("e", "single", 0, "pass", latency_ms=10.0),
    ]
    report = report_of(write_run(tmp_path, "e", list(rows)), prices={})
    tasks = {t.task_id: t for t in report.tasks}
    assert tasks["zero"].latency_consistency is None
    assert tasks["zero"].tokens_consistency == approx(1.0)  # identical values: CV 0
    assert tasks["one"].latency_consistency is None and tasks["one"].tokens_consistency is None
    assert tasks["zero"].cost_consistency is None  # no price, no cost
    assert tasks["single"].c_out is None and tasks["single"].resource_consistency is None


# --- tau2-bench (sierra-research/tau2-bench, src/tau2/metrics/agent_metrics.py) ---


def tau2_results(path: Path, seed: int = 3) -> dict:
    """A tau2 results.json with uneven trials: num_trials 4, some tasks short of trials and
    some simulations infrastructure errors (tau2 drops those before counting)."""
    rng = random.Random(seed)
    simulations = []
    for t in range(12):
        trials = rng.choice([2, 3, 4, 4, 4])
        p = rng.choice([0.1, 0.5, 0.9])
        for trial in range(trials):
            infra = rng.random() < 0.1 and trial > 0
            reward = 1.0 if rng.random() < p else rng.choice([0.0, 0.5])
            simulations.append(
                {
                    "id": f"sim-{t}-{trial}",
                    "task_id": str(t),
                    "trial": trial,
                    "duration": rng.uniform(5, 60),
                    "termination_reason": "infrastructure_error" if infra else "user_stop",
                    "reward_info": {"reward": reward},
                    "messages": [],
                }
            )
    document = {
        "info": {"num_trials": 4, "agent_info": {"llm": "gpt-4.1"}},
        "tasks": [],
        "simulations": simulations,
    }
    path.write_text(json.dumps(document))
    return document


def tau2_pass_hat_ks(document: dict) -> dict[int, float]:
    """tau2: drop infrastructure errors; success = reward within 1e-6 of 1; max k = the
    smallest per-task trial count (at most num_trials); pass^k = mean over every task of
    C(c, k) / C(n, k)."""
    sims = [s for s in document["simulations"] if s["termination_reason"] != "infrastructure_error"]
    per_task: dict[str, list[bool]] = {}
    for s in sims:
        per_task.setdefault(s["task_id"], []).append(abs(s["reward_info"]["reward"] - 1) <= 1e-6)
    max_k = min(document["info"]["num_trials"], min(len(v) for v in per_task.values()))
    return {
        k: float(np.mean([math.comb(sum(v), k) / math.comb(len(v), k) for v in per_task.values()]))
        for k in range(1, max_k + 1)
    }


def test_pass_k_tau2_convention_reproduces_tau2_on_uneven_trials(tmp_path: Path) -> None:
    document = tau2_results(tmp_path / "results.json")
    run = import_results(tmp_path / "results.json", out=tmp_path / "runs").run_dir
    expected = tau2_pass_hat_ks(document)
    assert len(expected) < 4  # the trials really are uneven
    tau2 = report_of(run, pass_k_convention="tau2")
    assert tau2.pass_k_convention == "tau2"
    assert tau2.pass_hat_k == approx(expected, abs=1e-12)
    # every task averaged at every k
    assert set(tau2.pass_k_tasks.values()) == {tau2.tasks_judged}
    # tau2's average reward (0/1 rewards): passes over all evaluated simulations
    sims = [s for s in document["simulations"] if s["termination_reason"] != "infrastructure_error"]
    assert tau2.attempt_success_rate == approx(
        np.mean([abs(s["reward_info"]["reward"] - 1) <= 1e-6 for s in sims])
    )
    # driftdesk's own convention differs on the same data, and says which it used
    ours = report_of(run)
    assert ours.pass_k_convention == "driftdesk"
    assert max(ours.pass_hat_k) == 4 and ours.pass_hat_k != approx(expected)
    assert ours.to_json()["pass_k_convention"] == "driftdesk"


def test_pass_k_convention_is_a_cli_option(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    document = tau2_results(tmp_path / "results.json")
    run = import_results(tmp_path / "results.json", out=tmp_path / "runs").run_dir
    done = cli("report", str(run), "--format", "json", "--pass-k-convention", "tau2")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["pass_k_convention"] == "tau2"
    assert data["pass_hat_k"] == {
        str(k): round(v, 6) for k, v in tau2_pass_hat_ks(document).items()
    }
    table = cli("report", str(run), "--pass-k-convention", "tau2").stdout
    assert "pass^k (tau2 convention" in table


# --- inspect_ai reducers (the real ones) and tau-bench's pass^k ---


def test_task_curves_and_success_match_inspect_ai_reducers(tmp_path: Path) -> None:
    from inspect_ai.scorer import Score, mean_score, pass_at, pass_k

    run, by_task = generated_run(tmp_path)
    report = report_of(run)
    tasks = {t.task_id: t for t in [*report.tasks, *report.tasks_below_min_runs]}
    means = []
    for task_id, rows in by_task.items():
        scores = [Score(value=1.0 if r["outcome"] == "pass" else 0.0) for r in rows]
        task = tasks[task_id]
        mean = mean_score()(scores).value
        means.append(mean)
        assert task.success_rate == approx(mean)
        for k in range(1, len(rows) + 1):
            assert task.pass_at_k[k] == approx(pass_at(k)(scores).value), (task_id, k)
            assert task.pass_hat_k[k] == approx(pass_k(k)(scores).value), (task_id, k)
            # tau-bench (arXiv:2406.12045): C(c, k) / C(n, k)
            c = sum(r["outcome"] == "pass" for r in rows)
            assert task.pass_hat_k[k] == approx(math.comb(c, k) / math.comb(len(rows), k))
    # success rate: inspect_ai's per-sample mean over epochs, then the mean over samples
    assert report.success_rate == approx(float(np.mean(means)))


def test_driftdesk_pass_k_convention_averages_tasks_run_at_least_k_times(tmp_path: Path) -> None:
    run, by_task = generated_run(tmp_path)
    report = report_of(run)
    longest = max(len(rows) for rows in by_task.values())
    assert longest >= 2 and sorted(report.pass_hat_k) == list(range(1, longest + 1))
    for k, value in report.pass_hat_k.items():
        eligible = [rows for rows in by_task.values() if len(rows) >= k]
        expected = np.mean(
            [
                math.comb(sum(r["outcome"] == "pass" for r in rows), k) / math.comb(len(rows), k)
                for rows in eligible
            ]
        )
        assert value == approx(float(expected))
        assert report.pass_k_tasks[k] == len(eligible)


def test_tgc_and_sgc_follow_appworld(tmp_path: Path) -> None:
    """AppWorld: TGC = tasks passed / tasks × 100; SGC = scenarios whose every task passed /
    scenarios × 100 (one attempt per task, as AppWorld runs them)."""
    rng = random.Random(11)
    rows, outcome = [], {}
    for s in range(9):
        for t in range(rng.randint(1, 3)):
            task = f"{s:03d}_{t}"
            outcome[task] = rng.random() < 0.6
            rows.append(
                attempt_row(
                    "aw", task, 0, "pass" if outcome[task] else "fail", scenario_id=f"{s:03d}"
                )
            )
    report = report_of(write_run(tmp_path, "aw", rows), group_by="scenario")
    scenarios: dict[str, list[bool]] = {}
    for task, passed in outcome.items():
        scenarios.setdefault(task.split("_")[0], []).append(passed)
    assert report.task_goal_completion == round(100 * sum(outcome.values()) / len(outcome), 1)
    assert report.scenario_goal_completion == round(
        100 * sum(all(v) for v in scenarios.values()) / len(scenarios), 1
    )
