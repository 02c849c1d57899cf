"""Injected faults in the report and in compare: the accounting per run and task, R_fault."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

from driftdesk.analysis.compare import compare_runs
from driftdesk.analysis.injection_report import injection_summary, r_fault, read_injection
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

KEY = "sk-test-REALKEY-faults-report-0123"


def test_r_fault_is_the_ratio_of_mean_success() -> None:
    result = r_fault([(1.0, 0.5), (0.5, 0.5), (0.5, 0.25)])
    assert result.value is not None
    assert abs(result.value - (1.25 / 3) / (2.0 / 3)) < 1e-12
    assert result.ci95 is not None and result.ci95[0] < result.value < result.ci95[1]
    assert r_fault([(0.0, 0.0), (0.0, 0.5)]).value is None  # a clean run that passed nothing
    assert r_fault([]).tasks == 0


def test_r_fault_ci_covers_the_true_ratio_about_95_percent_of_the_time() -> None:
    """Simulated runs: tasks drawn with a true success p (a Beta spread), the clean run passes
    each attempt with p, the faulted one with p × rho; the true R_fault is rho."""
    rng = random.Random(42)
    rho, tasks, repeats, trials = 0.85, 40, 5, 1000
    covered = 0
    for _ in range(trials):
        pairs = []
        for _ in range(tasks):
            p = rng.betavariate(2, 1.5)
            clean = sum(rng.random() < p for _ in range(repeats)) / repeats
            faulted = sum(rng.random() < p * rho for _ in range(repeats)) / repeats
            pairs.append((clean, faulted))
        ci = r_fault(pairs).ci95
        assert ci is not None
        covered += ci[0] <= rho <= ci[1]
    coverage = covered / trials
    # 1000 trials: a 95 % CI's coverage lands in 0.93..0.97 (±2.8 sd); the delta method may
    # run a little narrow at 40 tasks, so the floor is 0.92.
    assert 0.92 <= coverage <= 0.975, coverage


def test_the_summary_names_misattributed_attempts_and_keeps_the_last_row_per_slot() -> None:
    rows = [
        {"task_id": "a", "attempt": 0, "injected_faults": 2, "injected_surfaced": 2},
        {"task_id": "a", "attempt": 0, "injected_faults": 1, "injected_recovered": 1},  # wins
        {"task_id": "b", "attempt": 1, "injected_faults": 1, "injected_misattributed": 1},
        {"task_id": "c", "attempt": 0, "injected_faults": 0},
    ]
    summary = injection_summary(rows, "500=5%")
    total = summary.total
    assert (total.faults, total.recovered, total.surfaced, total.misattributed) == (2, 1, 0, 1)
    assert summary.accounted
    assert summary.misattributed_attempts == [("b", 1)]
    assert [t.task_id for t in summary.by_task] == ["a", "b"]


async def _run(url: str, out: Path, inject: str | None) -> Path:
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="sim", protocol="openai", base_url=url, model=SIM_MODEL),
            suite="basic",
            repeat=4,
            concurrency=16,
            timeout_s=10.0,
            seed=1,
            out_dir=out,
            api_key=KEY,
            retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.005, max_delay_s=0.05),
            inject=inject,
        )
    )
    return outcome.run_dir


async def test_report_and_compare_of_a_clean_and_a_faulted_run(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        clean = await _run(server.base_url, tmp_path / "clean", None)
        faulted = await _run(server.base_url, tmp_path / "faulted", "429=10%:0.01s,500=10%")
    summary = read_injection(faulted)
    assert summary is not None and read_injection(clean) is None
    assert summary.total.faults > 0 and summary.accounted
    assert summary.total.misattributed == 0

    comparison = compare_runs(clean, faulted)
    assert comparison.injection == (None, "429=10%:0.01s,500=10%")
    assert any("B injected faults" in w for w in comparison.warnings)
    assert comparison.r_fault is not None and comparison.r_fault.value is not None
    assert comparison.r_fault.ci95 is not None
    assert comparison.r_fault.tasks == comparison.shared_tasks
    swapped = compare_runs(faulted, clean)
    assert swapped.r_fault is not None and swapped.r_fault.value == comparison.r_fault.value
    assert compare_runs(clean, clean).r_fault is None

    cli = [sys.executable, "-m", "driftdesk"]
    shown = subprocess.run(
        [*cli, "compare", str(clean), str(faulted)], capture_output=True, text=True, check=True
    ).stdout
    assert "R_fault (faulted success / clean success) = " in shown
    assert "delta-method-over-tasks" in shown
    as_json = json.loads(
        subprocess.run(
            [*cli, "compare", str(clean), str(faulted), "--format", "json"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    assert as_json["r_fault"]["value"] == comparison.r_fault.value
    assert as_json["injection"] == {"a": None, "b": "429=10%:0.01s,500=10%"}
    report = subprocess.run(
        [*cli, "report", str(faulted)], capture_output=True, text=True, check=True
    ).stdout
    total = summary.total
    assert (
        f"injected faults (429=10%:0.01s,500=10%): {total.faults}: recovered {total.recovered}, "
        f"surfaced as link errors {total.surfaced}, misattributed 0"
    ) in report
    assert "RECOVERED" in report
    clean_report = subprocess.run(
        [*cli, "report", str(clean)], capture_output=True, text=True, check=True
    ).stdout
    assert "injected faults" not in clean_report
