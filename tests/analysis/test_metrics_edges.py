"""The report's run arithmetic (``analysis.metrics``) at its edges, found unguarded by mutation
testing (tests/mutants): the bootstrap recomputed from its documented draws, the resample
count's bounds, the pass curves' refusals and ``mean_or_none``."""

from __future__ import annotations

import math

import duckdb
import pytest

from driftdesk.analysis.metrics import (
    BOOTSTRAP_SEED,
    bootstrap_ci95,
    mean_or_none,
    pass_curves,
    resample_count,
)


def _quantile_cont(sorted_values: list[float], q: float) -> float:
    """DuckDB's ``quantile_cont``: linear interpolation between the closest ranks."""
    position = q * (len(sorted_values) - 1)
    low = math.floor(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (position - low) * (sorted_values[high] - sorted_values[low])


def _brute_ci(columns: dict[str, list[float]], seed: int) -> dict[str, list[float]]:
    """The documented bootstrap, step by step: draw i of resample b picks task
    ``hash(seed·2³² + b·T + i) % T`` (DuckDB's 64-bit hash of that integer); each resample's
    mean per column; the 2.5th and 97.5th percentiles of those means."""
    tasks = len(next(iter(columns.values())))
    resamples = resample_count(tasks)
    keys = [seed * 2**32 + b * tasks + i for b in range(resamples) for i in range(tasks)]
    con = duckdb.connect()
    rows = con.execute("SELECT hash(k::UBIGINT) FROM unnest(?) t(k)", [keys]).fetchall()
    con.close()
    picks = [[rows[b * tasks + i][0] % tasks for i in range(tasks)] for b in range(resamples)]
    ci = {}
    for name, values in columns.items():
        means = sorted(math.fsum(values[j] for j in pick) / tasks for pick in picks)
        ci[name] = [_quantile_cont(means, 0.025), _quantile_cont(means, 0.975)]
    return ci


@pytest.mark.parametrize("seed", [BOOTSTRAP_SEED, 7])
def test_the_bootstrap_is_the_documented_draws_and_percentiles(seed: int) -> None:
    columns = {
        "success_rate": [1.0, 0.75, 0.5, 0.0, 0.25, 1.0, 0.5],
        "consistency_gap_pp": [0.0, 100.0, 100.0, 0.0, 100.0, 0.0, 100.0],
    }
    got = bootstrap_ci95(columns, seed=seed)
    expected = _brute_ci(columns, seed)
    assert list(got) == ["success_rate", "consistency_gap_pp"]
    for name in columns:
        assert got[name] == pytest.approx(expected[name], abs=1e-12), name
    low, high = got["success_rate"] or [0.0, 0.0]
    assert 0.0 <= low < high <= 1.0  # a real interval, not a point


def test_the_seed_changes_the_draws_and_the_same_seed_repeats_them() -> None:
    column = {"x": [float(i % 5) for i in range(23)]}
    assert bootstrap_ci95(column) == bootstrap_ci95(column, seed=BOOTSTRAP_SEED)
    assert bootstrap_ci95(column, seed=1) != bootstrap_ci95(column, seed=2)


def test_fewer_than_two_tasks_have_no_interval() -> None:
    assert bootstrap_ci95({"a": [0.5], "b": [1.0]}) == {"a": None, "b": None}
    assert bootstrap_ci95({}) == {}
    assert bootstrap_ci95({"a": [0.0, 1.0]})["a"] == [0.0, 1.0]  # two tasks: an interval


def test_the_resample_count_bounds_the_draws_never_below_100() -> None:
    assert resample_count(0) == 0
    assert resample_count(1) == 1000
    assert resample_count(5000) == 1000  # 5,000,000 draws: the budget exactly
    assert resample_count(5001) == 999  # past it: fewer resamples
    assert resample_count(50_000) == 100
    assert resample_count(50_001) == 100  # 99 by the budget: never fewer than 100
    assert resample_count(10**6) == 100


def test_the_pass_curves_refuse_impossible_counts_and_hold_at_the_ends() -> None:
    for n, c in ((3, 4), (3, -1)):
        with pytest.raises(ValueError, match=f"passes {c} out of {n} attempts"):
            pass_curves(n, c)
    assert pass_curves(0, 0) == ((), ())
    assert pass_curves(3, 0) == ((0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    assert pass_curves(3, 3) == ((1.0, 1.0, 1.0), (1.0, 1.0, 1.0))
    hat, at = pass_curves(5, 2)  # C(2,k)/C(5,k) and 1 − C(3,k)/C(5,k)
    assert hat == pytest.approx([2 / 5, 1 / 10, 0.0, 0.0, 0.0])
    assert at == pytest.approx([2 / 5, 7 / 10, 9 / 10, 1.0, 1.0])


def test_mean_or_none_skips_the_undefined() -> None:
    assert mean_or_none([None, 1.0, None, 0.5]) == 0.75
    assert mean_or_none([0.0, None]) == 0.0
    assert mean_or_none([None, None]) is None
    assert mean_or_none([]) is None
