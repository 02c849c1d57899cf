"""How big a change a run can see: the noise floor of its success rate, from its own tasks.

A same-size rerun (the same tasks, each run as many times) gives a second estimate of the
success rate; the two differ by chance alone. With task i run n_i times and s_i² its sample
variance of the 0/1 outcomes (ddof = 1: p̂·(1 − p̂)·n / (n − 1)), the run's success rate (the
mean of the T task rates) has variance Σ s_i² / n_i / T², the difference of two independent
such runs twice that. The minimum detectable difference at power 1 − β and two-sided level α
is (z_{1−α/2} + z_{1−β}) · √(2 Σ s_i² / n_i) / T; the repeats per task needed to detect a
target difference δ solve the same equation for n: ⌈2 (z_{1−α/2} + z_{1−β})² Σ s_i² / (T δ)²⌉.
Tasks with fewer than 2 counted attempts carry no variance estimate and are left out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

POWER = 0.8
ALPHA = 0.05
TARGETS_PP: tuple[float, ...] = (1.0, 2.0, 5.0, 10.0)


@dataclass
class NoiseFloor:
    tasks: int  # tasks with n ≥ 2 (the estimate's basis)
    mde_pp: float | None  # minimum detectable difference in success rate, percentage points
    repeats_for_pp: dict[float, int | None] = field(default_factory=dict)  # target -> repeats
    power: float = POWER
    alpha: float = ALPHA

    def to_json(self) -> dict[str, Any]:
        return {
            "tasks": self.tasks,
            "power": self.power,
            "alpha": self.alpha,
            "mde_pp": None if self.mde_pp is None else round(self.mde_pp, 4),
            "repeats_for_pp": {f"{k:g}": v for k, v in self.repeats_for_pp.items()},
        }


def _z_sum(power: float, alpha: float) -> float:
    normal = NormalDist()
    return normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)


def noise_floor(
    counts: Sequence[tuple[int, int]],
    *,
    targets_pp: Sequence[float] = TARGETS_PP,
    power: float = POWER,
    alpha: float = ALPHA,
) -> NoiseFloor:
    """``counts``: (n, passes) per task. ``repeats_for_pp[δ]`` is None when the run shows no
    within-task variation (any change is then visible with one repeat: 1)."""
    usable = [(n, c) for n, c in counts if n >= 2]
    variances = [c / n * (1 - c / n) * n / (n - 1) for n, c in usable]  # s_i², ddof = 1
    return noise_floor_from_sums(
        len(usable),
        sum(v / n for v, (n, _) in zip(variances, usable, strict=True)),
        sum(variances),
        targets_pp=targets_pp,
        power=power,
        alpha=alpha,
    )


def noise_floor_from_sums(
    tasks: int,
    variance_over_n: float,
    variance: float,
    *,
    targets_pp: Sequence[float] = TARGETS_PP,
    power: float = POWER,
    alpha: float = ALPHA,
) -> NoiseFloor:
    """The noise floor from the tasks with n ≥ 2: their count, Σ s_i² / n_i and Σ s_i²."""
    floor = NoiseFloor(tasks=tasks, mde_pp=None, power=power, alpha=alpha)
    if not tasks:
        floor.repeats_for_pp = dict.fromkeys(targets_pp)
        return floor
    z = _z_sum(power, alpha)
    floor.mde_pp = 100 * z * math.sqrt(2 * variance_over_n) / tasks
    for target in targets_pp:
        delta = target / 100
        floor.repeats_for_pp[target] = max(
            1, math.ceil(2 * z * z * variance / (tasks * delta) ** 2)
        )
    return floor
