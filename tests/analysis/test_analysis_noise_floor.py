"""The noise floor: the minimum detectable difference really has 80 % power, and the repeats
needed for a target difference really reach it (checked by simulating reruns)."""

from __future__ import annotations

import math
import random
from pathlib import Path
from statistics import NormalDist

import pytest
from analysis_fixtures import attempt_row, write_run

from driftdesk.analysis.noise import noise_floor
from driftdesk.analysis.report import build_report

approx = pytest.approx
Z = NormalDist().inv_cdf(0.975) + NormalDist().inv_cdf(0.8)


def test_noise_floor_by_hand() -> None:
    # two tasks, n = 4: p̂ = ½ -> s² = ¼ · 4/3 = 1/3; p̂ = 1 -> 0; T = 2
    floor = noise_floor([(4, 2), (4, 4), (1, 1)])  # the n = 1 task is left out
    assert floor.tasks == 2
    assert floor.mde_pp == approx(100 * Z * math.sqrt(2 * (1 / 3) / 4) / 2)
    # repeats for 10 pp: 2 · Z² · (1/3) / (2 · 0.1)²
    assert floor.repeats_for_pp[10.0] == math.ceil(2 * Z * Z * (1 / 3) / (2 * 0.1) ** 2)
    assert noise_floor([(3, 3), (3, 0)]).mde_pp == 0.0  # no within-task variation seen
    assert noise_floor([(1, 1)]).mde_pp is None


def simulated_power(rates: list[float], n: int, shift: float, trials: int, seed: int) -> float:
    """Share of simulated same-size rerun pairs whose success rates differ significantly
    (two-sided z-test at 5 % with each pair's own variance estimate)."""
    rng = random.Random(seed)
    hits = 0
    for _ in range(trials):
        runs = []
        for moved in (0.0, shift):
            counts = [sum(rng.random() < min(1.0, p + moved) for _ in range(n)) for p in rates]
            runs.append(counts)
        diff = sum(b - a for a, b in zip(*runs, strict=True)) / n / len(rates)
        var = sum(p * (1 - p) / n for p in rates) * 2 / len(rates) ** 2
        hits += abs(diff) > NormalDist().inv_cdf(0.975) * math.sqrt(var)
    return hits / trials


def test_mde_has_80_percent_power_on_simulated_reruns(tmp_path: Path) -> None:
    rng = random.Random(4)
    rates = [rng.choice([0.3, 0.5, 0.7]) for _ in range(40)]
    n = 6
    rows = [
        attempt_row("r", f"t{i:02d}", a, "pass" if rng.random() < p else "fail")
        for i, p in enumerate(rates)
        for a in range(n)
    ]
    (report,) = build_report([write_run(tmp_path, "r", list(rows))])
    floor = report.noise_floor
    assert floor is not None and floor.mde_pp is not None
    # with the true per-task rates, a shift of the (true-variance) MDE is found ~80 % of the time
    true_mde = Z * math.sqrt(2 * sum(p * (1 - p) / n for p in rates)) / len(rates)
    assert simulated_power(rates, n, true_mde, 1500, seed=9) == approx(0.8, abs=0.05)
    # the run's own estimate is close to the truth
    assert floor.mde_pp / 100 == approx(true_mde, rel=0.25)
    data = report.to_json()["noise_floor"]
    assert data["power"] == 0.8 and set(data["repeats_for_pp"]) == {"1", "2", "5", "10"}
    # the repeats suggested for 10 pp have at least 80 % power at 10 pp
    repeats = floor.repeats_for_pp[10.0]
    assert repeats is not None
    assert simulated_power(rates, repeats, 0.10, 800, seed=10) >= 0.75


def test_noise_floor_in_the_table(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    rows = [
        attempt_row("r", f"t{i}", a, "pass" if (i + a) % 2 else "fail")
        for i in range(6)
        for a in range(4)
    ]
    run = write_run(tmp_path, "r", list(rows))
    table = cli("report", str(run)).stdout
    assert "noise floor: a same-size rerun detects a success change of ≥" in table
    assert "repeats/task" in table
