"""Metrics when tasks have different numbers of attempts (adaptive runs): each estimator is
checked against simulated runs with known per-task rates."""

from __future__ import annotations

import json
import random
from math import comb
from pathlib import Path

from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.compare import compare_runs
from driftdesk.analysis.gate import check_run
from driftdesk.analysis.metrics import mixed_at_k, repeat_ci95, unequal_repeats
from driftdesk.analysis.report import build_report

RATES = [1.0, 0.95, 0.85, 0.7, 0.5, 0.3, 0.1, 0.0]


def _draw(rng: random.Random, p: float, n: int) -> int:
    return sum(rng.random() < p for _ in range(n))


def test_mixed_at_k_is_unbiased_whatever_n_while_max_minus_min_is_not() -> None:
    rng = random.Random(1)
    k = 3
    for p in (0.9, 0.6, 0.2):
        truth = 1 - p**k - (1 - p) ** k  # the expected max − min of k attempts
        for n in (3, 6, 12):
            draws = [_draw(rng, p, n) for _ in range(20000)]
            estimate = sum(mixed_at_k(n, c, k) for c in draws) / len(draws)
            assert abs(estimate - truth) < 0.012, (p, n, estimate, truth)
            spread = sum(0 < c < n for c in draws) / len(draws)
            if n == 12:  # the plain spread of 12 attempts overstates a 3-attempt gap
                assert spread - truth > 0.05, (p, spread, truth)


def test_pass_hat_k_per_task_is_unbiased_with_unequal_n() -> None:
    rng = random.Random(2)
    for p in (0.95, 0.7, 0.4):
        for n in (2, 5, 9):
            for k in range(1, n + 1):
                draws = [_draw(rng, p, n) for _ in range(6000)]
                estimate = sum(comb(c, k) / comb(n, k) for c in draws) / len(draws)
                assert abs(estimate - p**k) < 0.02, (p, n, k, estimate)


def test_success_interval_covers_the_true_rate_with_unequal_n() -> None:
    rng = random.Random(3)
    rates = [rng.choice(RATES) for _ in range(30)]
    truth = sum(rates) / len(rates)
    covered = 0
    estimates = []
    trials = 2000
    for _ in range(trials):
        counts = []
        for p in rates:
            n = rng.randint(2, 15)  # unequal, unrelated to the outcomes
            counts.append((n, _draw(rng, p, n)))
        found = repeat_ci95(counts)
        assert found is not None
        estimates.append(found[0])
        covered += found[1] <= truth <= found[2]
    assert abs(sum(estimates) / trials - truth) < 0.004  # mean p̂: no task favoured
    assert 0.93 <= covered / trials <= 0.995, covered / trials


def test_the_report_says_how_unequal_repeats_are_read(tmp_path: Path) -> None:
    rng = random.Random(4)
    rows = []
    pairs: dict[tuple[int, int], int] = {}
    for i, p in enumerate(RATES * 3):
        n = 2 + i % 9
        outcomes = ["pass" if rng.random() < p else "fail" for _ in range(n)]
        for attempt, outcome in enumerate(outcomes):
            rows.append(attempt_row("uneq", f"t{i}", attempt, outcome))
        key = (n, outcomes.count("pass"))
        pairs[key] = pairs.get(key, 0) + 1
    run_dir = write_run(tmp_path, "uneq", rows, tasks=[f"t{i}" for i in range(24)], repeat=2)
    (report,) = build_report([run_dir], prices={})
    expected = unequal_repeats([(n, c, times) for (n, c), times in pairs.items()])
    assert expected is not None and expected["gap_k"] == 2 and expected["n_max"] == 10
    assert report.unequal_repeats == expected
    data = report.to_json()
    assert data["unequal_repeats"]["gap_at_k_tasks"] == 24
    assert data["adaptive"] is None
    # the same tasks all at n = 4: nothing to say
    fixed = [attempt_row("even", f"t{i}", a, "pass") for i in range(3) for a in range(4)]
    (even,) = build_report([write_run(tmp_path, "even", fixed, repeat=4)], prices={})
    assert even.unequal_repeats is None


def _adaptive_run(root: Path, run_id: str, seed: int) -> Path:
    """A run as ``--adaptive --target volatile`` leaves it: volatile tasks stop early."""
    rng = random.Random(seed)
    rows = []
    for i, p in enumerate(RATES):
        outcomes: list[str] = []
        while len(outcomes) < 8 and len(set(outcomes)) < 2:
            outcomes.append("pass" if rng.random() < p else "fail")
        rows += [attempt_row(run_id, f"t{i}", a, o) for a, o in enumerate(outcomes)]
    run_dir = write_run(root, run_id, rows, tasks=[f"t{i}" for i in range(len(RATES))], repeat=2)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["adaptive"] = {"target": "volatile", "min_repeats": 2, "max_repeats": 8}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def test_compare_and_check_say_how_adaptive_repeats_are_read(tmp_path: Path) -> None:
    a, b = _adaptive_run(tmp_path, "ada-a", 5), _adaptive_run(tmp_path, "ada-b", 6)
    comparison = compare_runs(a, b)
    said = [w for w in comparison.warnings if "repeats were adaptive" in w]
    assert len(said) == 2 and "pass^k averages each k over the tasks with n ≥ k" in said[0]
    (report,) = build_report([a], prices={})
    assert report.adaptive is not None and report.unequal_repeats is not None
    (condition,) = check_run(report, max_gap=100).conditions
    assert "(adaptive), and max − min grows with n: at k = 2" in condition.detail
