"""The exact paired tests' dense convolution against a straightforward one: a dict from each
value of the sum to its probability, every value of every part added to every value so far,
and p and the CI read off the sorted values by their definitions (``analysis.paired``)."""

from __future__ import annotations

import math
import random

import pytest

from driftdesk.analysis.paired import (
    ALPHA,
    DENSE_BUDGET,
    KEY_RESOLUTION,
    SIGN_FLIP,
    STRATIFIED,
    PairedTest,
    _dense,
    _fixed_point,
    sign_flip,
    stratified_permutation,
)


def reference_convolution(parts: list[dict[int, float]]) -> dict[int, float]:
    dist = {0: 1.0}
    for part in parts:
        summed: dict[int, float] = {}
        for key, prob in dist.items():
            for shift, weight in part.items():
                summed[key + shift] = summed.get(key + shift, 0.0) + prob * weight
        dist = summed
    return dist


def reference_p_and_ci(null: dict[int, float], observed: int, scale: int) -> tuple[float, list]:
    """p = 2 min(F(d), S(d)); CI [d − q_hi, d − q_lo], q_lo the least value with F ≥ α/2,
    q_hi the largest with S ≥ α/2."""
    keys = sorted(null)
    # F summed from the least value up, S from the largest down
    cdf, sf, total = [], [], 0.0
    for k in keys:
        total += null[k]
        cdf.append(total)
    total = 0.0
    for k in reversed(keys):
        total += null[k]
        sf.insert(0, total)
    below = sum(null[k] for k in keys if k <= observed)
    above = sum(null[k] for k in reversed(keys) if k >= observed)
    low_q = next(k for k, c in zip(keys, cdf, strict=True) if c >= ALPHA / 2)
    high_q = max(k for k, s in zip(keys, sf, strict=True) if s >= ALPHA / 2)
    return min(1.0, 2 * min(below, above)), [
        (observed - high_q) / scale,
        (observed - low_q) / scale,
    ]


def reference_stratified(
    tables: list[tuple[int, int, int, int]], support: list[int] | None = None
) -> tuple[float, list]:
    """p and CI; ``support``: given a list, the null's number of values is appended."""
    informative = [t for t in tables if 0 < t[1] + t[3] < t[0] + t[2]]
    grid = math.lcm(*(na * nb for na, _, nb, _ in informative)) if informative else 1
    parts, observed = [], 0
    for na, pa, nb, pb in informative:
        total, m, unit = na + nb, pa + pb, grid // (na * nb)
        ways = math.comb(total, nb)
        parts.append(
            {
                (a * total - m * nb) * unit: math.comb(m, a) * math.comb(total - m, nb - a) / ways
                for a in range(max(0, m - na), min(nb, m) + 1)
            }
        )
        observed += (pb * total - m * nb) * unit
    null = reference_convolution(parts)
    if support is not None:
        support.append(len(null))
    return reference_p_and_ci(null, observed, len(tables) * grid)


def reference_sign_flip(differences: list[float]) -> tuple[float, list]:
    keys = [k for k in (round(d * KEY_RESOLUTION) for d in differences) if k]
    null = reference_convolution([{k: 0.5, -k: 0.5} for k in keys])
    return reference_p_and_ci(null, sum(keys), len(differences) * KEY_RESOLUTION)


def _close(a: list[float], b: list[float]) -> bool:
    return all(abs(x - y) <= 1e-12 for x, y in zip(a, b, strict=True))


def _agrees(test: PairedTest, method: str, reference: tuple[float, list], case: object) -> None:
    """``test`` took the exact path (``method``) and gives the reference's p and CI."""
    p_value, ci = reference
    assert test.method == method, case
    assert abs(test.p_value - p_value) <= 1e-12, (case, test, p_value)
    assert _close(test.ci95, ci), (case, test, ci)


def test_the_stratified_test_gives_the_reference_p_and_ci_on_many_random_tables() -> None:
    rng = random.Random(32)
    significant = identical = 0
    for case in range(400):
        equal_repeats = case % 2 == 0  # one grid step; else steps with gaps between values
        tables = []
        for _ in range(rng.choice([1, 2, 3, 5, 8, 13, 25, 40])):
            na, nb = (5, 5) if equal_repeats else (rng.choice([1, 2, 3, 4]), rng.choice([1, 3, 6]))
            skill = rng.random()
            drift = rng.choice([0.0, -0.6, 0.6])
            pa = sum(rng.random() < skill for _ in range(na))
            pb = sum(rng.random() < min(1.0, max(0.0, skill + drift)) for _ in range(nb))
            tables.append((na, pa, nb, pb))
        test = stratified_permutation(tables)
        p_value, ci = reference = reference_stratified(tables)
        _agrees(test, STRATIFIED, reference, tables)
        significant += test.p_value < 0.05
        if equal_repeats:  # sums collected in the same order: the same floats
            identical += (test.p_value, test.ci95) == (p_value, ci)
    assert 30 < significant < 370, significant  # both verdicts were seen
    assert identical == 200


def test_a_large_null_in_fixed_point_gives_the_reference_p_and_ci() -> None:
    """Hundreds of tasks of 5 or 10 attempts a run (a nightly suite): past ``DENSE_BUDGET``,
    so convolved in fixed point; the same p and CI as the float reference."""
    rng = random.Random(34)
    support: list[int] = []
    significant = 0
    for case in range(10):
        tables = []
        for _ in range(rng.choice([100, 200, 300])):
            na, nb = (10, 10) if case % 2 else (rng.choice([5, 10]), rng.choice([5, 10]))
            skill = rng.choice([1.0, 0.9, 0.6, 0.2, 0.0])
            drift = -0.1 if case % 3 == 0 else 0.0
            pa = sum(rng.random() < skill for _ in range(na))
            pb = sum(rng.random() < skill + drift for _ in range(nb))
            tables.append((na, pa, nb, pb))
        test = stratified_permutation(tables)
        _agrees(test, STRATIFIED, reference_stratified(tables, support), tables)
        significant += test.p_value < 0.05
    # every null had hundreds of values: its convolution cost past the float path's budget
    assert min(support) ** 2 / 2 > DENSE_BUDGET, support
    assert 0 < significant < 10, significant


def test_the_sign_flip_test_gives_the_reference_p_and_ci_on_many_random_differences() -> None:
    rng = random.Random(33)
    significant = 0
    for _ in range(300):
        shift = rng.choice([0, 0, 25, -25])
        differences = [
            float(rng.choice([-100, -50, -25, 0, 0, 25, 50, 100]) + shift)
            for _ in range(rng.choice([1, 2, 4, 9, 20, 50]))
        ]
        test = sign_flip(differences)
        _agrees(test, SIGN_FLIP, reference_sign_flip(differences), differences)
        significant += test.p_value < 0.05
    assert 20 < significant < 280, significant  # both verdicts were seen


# 13 tasks that went from 5/5 to 0/5 (a tail of ~1e-22) and tasks of 10 attempts a run: the
# null's exact convolution costs DENSE_BUDGET additions with the first list, one more with the
# second. The (5, 5) tasks' values lie every other point of the (10, 10) tasks' grid.
_DROPS = [(5, 5, 5, 0)] * 13
AT_THE_BUDGET = _DROPS + [(10, 5, 10, 5)] * 7 + [(10, 1, 10, 1), (10, 0, 10, 1), (10, 4, 10, 4)]
PAST_THE_BUDGET = _DROPS + [(10, 5, 10, 5)] * 6 + [(10, 2, 10, 3), (10, 3, 10, 4), (10, 5, 10, 5)]


def _additions(tables: list[tuple[int, int, int, int]]) -> int:
    """The exact convolution's cost counted on the reference: each part's values times the
    grid points (of the parts' common step) that the sum so far spans."""
    informative = [t for t in tables if 0 < t[1] + t[3] < t[0] + t[2]]
    grid = math.lcm(*(na * nb for na, _, nb, _ in informative))
    parts = []
    for na, pa, nb, pb in informative:
        step = (na + nb) * (grid // (na * nb))
        parts.append({a * step: 1.0 for a in range(max(0, pa + pb - na), min(nb, pa + pb) + 1)})
    common = math.gcd(*(min(set(part) - {min(part)}) - min(part) for part in parts))
    cost, so_far = 0, {0: 1.0}
    for part in parts:
        cost += len(part) * ((max(so_far) - min(so_far)) // common + 1)
        so_far = reference_convolution([so_far, part])
    return cost


def test_at_the_float_budget_the_null_is_in_floats_and_past_it_in_fixed_point() -> None:
    assert _additions(AT_THE_BUDGET) == DENSE_BUDGET
    assert _additions(PAST_THE_BUDGET) == DENSE_BUDGET + 1
    # in floats: the very floats of adding term by term (the tasks' values in key order)
    exact = stratified_permutation(AT_THE_BUDGET)
    p_value, ci = reference_stratified(AT_THE_BUDGET)
    assert (exact.method, exact.p_value, exact.ci95) == (STRATIFIED, p_value, ci)
    assert 0 < p_value < 1e-20
    # in fixed point: the far tail short by the probabilities under 2^-96 it leaves out
    fixed = stratified_permutation(PAST_THE_BUDGET)
    p_value, ci = reference_stratified(PAST_THE_BUDGET)
    assert fixed.method == STRATIFIED and _close(fixed.ci95, ci)
    assert 0 < p_value - fixed.p_value < 1e-25 and 0 < p_value < 1e-20


@pytest.mark.parametrize(
    "spread",
    [
        [([0.5, 0.5], 2)],  # one part, a grid point between its values
        [([0.2, 0.3, 0.5], 2), ([0.6, 0.4], 3), ([0.1, 0.9], 1)],  # an odd number of parts
        [([0.5, 0.5], 1)] * 100,  # tails of 2^-100: under the fixed point's 2^-96
    ],
)
def test_the_float_and_fixed_point_convolutions_give_the_null_on_its_grid(
    spread: list[tuple[list[float], int]],
) -> None:
    reference = reference_convolution(
        [{index * stride: prob for index, prob in enumerate(probs)} for probs, stride in spread]
    )
    expected = [reference.get(point, 0.0) for point in range(max(reference) + 1)]
    for name, null in (("float", _dense(spread)), ("fixed point", _fixed_point(spread))):
        assert len(null) == len(expected), name  # one probability per grid point, no more
        # a point the sum cannot reach is 0 exactly: never a percentile (_exact)
        assert all(null[point] == 0.0 for point in range(len(null)) if point not in reference)
        assert all(abs(a - b) <= 1e-15 for a, b in zip(null, expected, strict=True)), name
    if len(spread) == 100:
        assert expected[0] > 0.0 and _fixed_point(spread)[0] == 0.0  # left out, as it says
