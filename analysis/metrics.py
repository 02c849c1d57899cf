"""Per-task and per-run arithmetic on aggregates (never on rows): pass^k, pass@k, bootstrap.

The per-task formulas (HAL's C_out, CV and C_res) are SQL in ``analysis.task_report``;
``tests/analysis/test_analysis_published_metrics.py`` checks them against each source's own.
"""

from __future__ import annotations

import math
from functools import lru_cache

BOOTSTRAP_RESAMPLES = 1000
BOOTSTRAP_MAX_DRAWS = 5_000_000  # resamples × tasks: bounds the cost on huge runs, where the
BOOTSTRAP_MIN_RESAMPLES = 100  # interval is narrow anyway; never fewer than 100 resamples
BOOTSTRAP_SEED = 20240611


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


def harbor_k_values(max_k: int) -> list[int]:
    """The k Harbor reports pass@k at, up to ``max_k``: 2, 4, 8, … and 5, 10, 15, …
    (harbor 0.25's ``utils/pass_at_k.py``; never k = 1)."""
    ks = set(range(5, max_k + 1, 5))
    k = 2
    while k <= max_k:
        ks.add(k)
        k *= 2
    return sorted(ks)


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


def mean_or_none(values: list[float | None]) -> float | None:
    """Mean of the defined values (HAL's NaN-skipping average over tasks); None if none."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


# The pseudo-counts added to a task's passes and fails before its outcome variance is taken:
# a task whose few attempts all agree is not taken for a task that never varies (its p̂(1 − p̂)
# would be 0, and an interval built on it would be too narrow and cover too rarely).
VARIANCE_PSEUDO_COUNT = 0.5
Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval


def outcome_variance(passes: int, n: int) -> float:
    """A task's outcome variance p(1 − p) with p = (c + a) / (n + 2a), a = 0.5 (Jeffreys)."""
    a = VARIANCE_PSEUDO_COUNT
    p = (passes + a) / (n + 2 * a)
    return p * (1 - p)


def repeat_ci95(counts: list[tuple[int, int]]) -> tuple[float, float, float] | None:
    """(success, low, high): the mean task success over these tasks and its 95 % interval from
    the attempts' sampling error (the tasks are fixed; the bootstrap CI of the report resamples
    tasks instead, and does not narrow with more repeats). ``counts``: (n, passes) per task.

    success = mean of c_i / n_i (every task weighs the same, whatever its n); its variance is
    Σ v_i / n_i / T², v_i = ``outcome_variance``; the interval is success ± 1.96 σ, cut to
    [0, 1]. Unequal n is what it is made for: a task with more attempts is known better.
    None until every task has a judged attempt."""
    found = repeat_half_width(counts)
    if found is None:
        return None
    success, half = found
    return success, max(0.0, success - half), min(1.0, success + half)


def repeat_half_width(counts: list[tuple[int, int]]) -> tuple[float, float] | None:
    """(success, half width) of ``repeat_ci95``'s interval before it is cut to [0, 1] (an
    interval cut at 100 % is not known to ± its cut half)."""
    if not counts or any(n <= 0 for n, _ in counts):
        return None
    tasks = len(counts)
    success = sum(c / n for n, c in counts) / tasks
    variance = sum(outcome_variance(c, n) / n for n, c in counts) / tasks**2
    return success, Z95 * math.sqrt(variance)


def mixed_at_k(n: int, passes: int, k: int) -> float:
    """The chance that k attempts of a task are mixed (a pass and a fail), unbiased from its
    c passes in n ≥ k attempts: 1 − C(c,k)/C(n,k) − C(n−c,k)/C(n,k). The max − min gap of a
    task's own n attempts is this at k = n, so it grows with n; read at one k for every task,
    tasks with different numbers of attempts are measured alike."""
    if not 1 <= k <= n:
        raise ValueError(f"k = {k} needs 1 ≤ k ≤ n = {n}")
    hat, at = pass_curves(n, passes)
    return at[k - 1] - hat[k - 1]


def unequal_repeats(pairs: list[tuple[int, int, int]]) -> dict[str, object] | None:
    """For a run whose tasks have different numbers of counted attempts (an adaptive run, a
    partial one): the range of n, the consistency gap read at k = the smallest n (≥ 2) over
    the tasks with n ≥ k, and the success interval from the attempts' sampling error.
    ``pairs``: (n, passes, tasks). None when every task has the same n."""
    ns = [n for n, _, _ in pairs if n > 0]
    if not ns or min(ns) == max(ns):
        return None
    k = max(2, min(ns))
    measured = [(n, c, times) for n, c, times in pairs if n >= k]
    tasks = sum(times for _, _, times in measured)
    gap = sum(mixed_at_k(n, c, k) * times for n, c, times in measured) / tasks if tasks else None
    counts = [(n, c) for n, c, times in pairs if n > 0 for _ in range(times)]
    interval = repeat_ci95(counts)
    return {
        "n_min": min(ns),
        "n_max": max(ns),
        "gap_k": k,
        "gap_at_k_pp": None if gap is None else round(gap * 100, 4),
        "gap_at_k_tasks": tasks,
        "success_ci95_attempts": (
            None if interval is None else [round(interval[1], 6), round(interval[2], 6)]
        ),
    }
