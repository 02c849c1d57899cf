"""Paired significance tests for two runs over the same tasks (exact, dependency-free).

- McNemar's exact test: one attempt per task in each run, so each task is a pass/fail pair;
  only the discordant pairs carry information, and under "no difference" each discordant pair
  goes either way with probability ½ (a two-sided binomial test on them).
- Sign-flip permutation test on per-task differences (several attempts per task): under "no
  difference" each task's difference is as likely to have either sign. Exact when the tasks
  with a non-zero difference are few, else a seeded Monte Carlo estimate.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

EXACT_PERMUTATION_MAX_TASKS = 16  # 2^16 sign patterns, enumerated
PERMUTATION_RESAMPLES = 20_000
PERMUTATION_MAX_DRAWS = 5_000_000  # resamples × tasks, as the bootstrap bounds its cost
PERMUTATION_MIN_RESAMPLES = 2_000
PERMUTATION_SEED = 20240611


def mcnemar_exact(a_only: int, b_only: int) -> float:
    """Two-sided exact McNemar p-value from the discordant pairs (pass in A only, in B only)."""
    n = a_only + b_only
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(a_only, b_only) + 1)) / 2**n
    return min(1.0, 2 * tail)


def sign_flip_p_value(
    differences: Sequence[float],
    *,
    seed: int = PERMUTATION_SEED,
    resamples: int = PERMUTATION_RESAMPLES,
) -> float:
    """Two-sided p-value of the mean per-task difference under random sign flips."""
    nonzero = [d for d in differences if d != 0]
    if not nonzero:
        return 1.0
    observed = abs(sum(nonzero)) - 1e-12  # tolerance: equal sums must count as "as extreme"
    if len(nonzero) <= EXACT_PERMUTATION_MAX_TASKS:
        sums = [0.0]
        for d in nonzero:
            sums = [s + d for s in sums] + [s - d for s in sums]
        return sum(1 for s in sums if abs(s) >= observed) / len(sums)
    rng = random.Random(seed)
    resamples = max(
        PERMUTATION_MIN_RESAMPLES, min(resamples, PERMUTATION_MAX_DRAWS // len(nonzero))
    )
    hits = 0
    for _ in range(resamples):
        total = sum(d if rng.random() < 0.5 else -d for d in nonzero)
        hits += abs(total) >= observed
    return (hits + 1) / (resamples + 1)  # never 0 from a finite sample
