"""Per-task and per-run arithmetic on aggregates (never on rows): pass^k, pass@k, bootstrap.

The SQL in ``analysis.volatility`` and the incremental state in ``analysis.live`` both produce
``TaskAggregate`` values; everything after that is shared, so both give identical numbers.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_MAX_DRAWS = 5_000_000  # resamples × tasks: bounds the cost on huge runs, where the
BOOTSTRAP_MIN_RESAMPLES = 100  # interval is narrow anyway; never fewer than 100 resamples
BOOTSTRAP_SEED = 20240611


@dataclass
class TaskAggregate:
    """What the reader knows about one task of one run (winning row per slot only)."""

    task_id: str
    scenario_id: str | None
    passes: int
    fails: int
    link_errors: int
    harness_errors: int
    latency_mean_ms: float | None = None  # over counted attempts
    latency_std_ms: float | None = None  # population std
    tokens_mean: float | None = None
    tokens_std: float | None = None
    last_error_kinds: list[str] = field(default_factory=list)
    attempts_present: list[int] = field(default_factory=list)
    first_seen: int = 0  # file order of the task's first row, for stable ordering
    f: int = 0  # index of the run (file) among those read together
    slots: int = 0  # slots with a row; with min/max attempt, tells whether 0..repeat−1 are all
    min_attempt: int | None = None  # present without listing them
    max_attempt: int | None = None
    model_latency_mean_ms: float | None = None  # provider-call time (proxy), counted attempts
    retries: int = 0  # winning rows, all outcomes
    model_mismatches: int = 0  # calls served by another model than requested, winning rows
    # HAL's resource CV inputs: mean and sample std (ddof=1) of the positive values
    latency_pos_mean: float | None = None
    latency_pos_std: float | None = None
    tokens_pos_mean: float | None = None
    tokens_pos_std: float | None = None
    cost_pos_mean: float | None = None
    cost_pos_std: float | None = None

    def counted(self, include_link_errors: bool) -> int:
        n = self.passes + self.fails
        if include_link_errors:
            n += self.link_errors + self.harness_errors
        return n


@lru_cache(maxsize=65536)
def pass_curves(n: int, c: int) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(pass^k, pass@k) for k = 1..n with c passes out of n: C(c,k)/C(n,k), 1 − C(n−c,k)/C(n,k).

    Built in O(n) as running products of (c−j)/(n−j), equal to the binomial ratios up to float
    rounding. Cached per (n, c): a report of thousands of tasks has few distinct pairs.
    """
    if not 0 <= c <= n:
        raise ValueError(f"passes {c} out of {n} attempts")
    hat: list[float] = []
    at: list[float] = []
    all_pass = all_fail = 1.0  # C(c,k)/C(n,k) and C(n−c,k)/C(n,k) for the current k
    for j in range(n):
        all_pass *= (c - j) / (n - j) if c > j else 0.0
        all_fail *= (n - c - j) / (n - j) if n - c > j else 0.0
        hat.append(all_pass)
        at.append(1.0 - all_fail)
    return tuple(hat), tuple(at)


def coefficient_of_variation(mean: float | None, std: float | None) -> float | None:
    if mean is None or std is None or mean == 0:
        return None
    return std / mean


def resample_count(tasks: int) -> int:
    if tasks == 0:
        return 0
    return max(BOOTSTRAP_MIN_RESAMPLES, min(BOOTSTRAP_RESAMPLES, BOOTSTRAP_MAX_DRAWS // tasks))


def bootstrap_ci95(
    columns: dict[str, list[float]], *, seed: int = BOOTSTRAP_SEED
) -> dict[str, list[float] | None]:
    """Percentile 95 % CIs of the mean of each column, resampling tasks with replacement.

    Runs in DuckDB: draw i of resample b picks task ``hash(seed·2³² + b·T + i) % T`` (one
    64-bit hash of a unique integer per draw; multi-argument ``hash()`` mixes its inputs too
    weakly in the low bits), joined to the values, so the same values in the same order always
    give the same interval. All columns share the resamples (a resample is a set of tasks).
    Fewer than 2 tasks: no interval.
    """
    names = list(columns)
    tasks = len(next(iter(columns.values()))) if columns else 0
    if tasks < 2:
        return dict.fromkeys(names)
    import duckdb

    resamples = resample_count(tasks)
    offset = (int(seed) % (1 << 30)) << 32
    con = duckdb.connect()
    try:
        con.execute("SET enable_progress_bar = false")
        unnest = ", ".join(f"unnest($v{i}) AS c{i}" for i in range(len(names)))
        con.execute(
            f"CREATE TEMP TABLE vals AS SELECT {unnest}, generate_subscripts($v0, 1) - 1 AS idx",
            {f"v{i}": [float(v) for v in columns[name]] for i, name in enumerate(names)},
        )
        means = ", ".join(f"avg(c{i}) AS m{i}" for i in range(len(names)))
        bounds = ", ".join(
            f"quantile_cont(m{i}, 0.025), quantile_cont(m{i}, 0.975)" for i in range(len(names))
        )
        row = con.execute(
            f"""
            WITH draws AS (
                SELECT b, hash({offset}::UBIGINT + b * {tasks} + i) % {tasks} AS idx
                FROM range({resamples}) r(b) CROSS JOIN range({tasks}) t(i)),
            resampled AS (SELECT b, {means} FROM draws JOIN vals USING (idx) GROUP BY b)
            SELECT {bounds} FROM resampled
            """
        ).fetchone()
    finally:
        con.close()
    assert row is not None
    return {name: [float(row[2 * i]), float(row[2 * i + 1])] for i, name in enumerate(names)}


# --- Published per-task formulas (each names its source; docs/report-json.md has the list) ---


def hal_outcome_consistency(n: int, passes: int) -> float | None:
    """HAL's C_out for one task (hal-harness ``reliability_eval/metrics/consistency.py``):
    (2·p̂ − 1)² with p̂ = passes / n; undefined (None, HAL's NaN) with fewer than 2 runs."""
    if n < 2:
        return None
    return (2 * passes / n - 1) ** 2


def hal_cv(mean: float | None, sample_std: float | None) -> float | None:
    """HAL's coefficient of variation: std(ddof=1) / mean over the positive values of a task's
    runs; None (HAL leaves the resource out) with fewer than 2 such values or mean ≤ 0."""
    if mean is None or sample_std is None or mean <= 0:
        return None
    return sample_std / mean


def hal_resource_consistency(cvs: list[float | None]) -> float | None:
    """HAL's C_res for one task: exp(−mean of the resources' CVs), the resources without a CV
    left out; None when no resource has one."""
    known = [cv for cv in cvs if cv is not None]
    if not known:
        return None
    return math.exp(-sum(known) / len(known))


def exp_neg(cv: float | None) -> float | None:
    return None if cv is None else math.exp(-cv)


def mean_or_none(values: list[float | None]) -> float | None:
    """Mean of the defined values (HAL's NaN-skipping average over tasks); None if none."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
