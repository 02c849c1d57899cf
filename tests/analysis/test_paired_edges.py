"""The paired tests' normal approximation and their switch to it, found unchecked by mutation
testing (tests/mutants): the exact tests are checked by brute force elsewhere
(test_analysis_compare.py), but the normal path was only checked to agree with its own CI."""

from __future__ import annotations

import math
from statistics import NormalDist

import pytest

from driftdesk.analysis.paired import (
    SIGN_FLIP,
    SIGN_FLIP_NORMAL,
    STRATIFIED,
    STRATIFIED_NORMAL,
    PairedTest,
    sign_flip,
    stratified_permutation,
)

Z = NormalDist().inv_cdf(0.975)


def _normal_expected(value: float, sd: float) -> tuple[list[float], float]:
    """CI d ± z σ and p = 2 Φ(−|d| / σ)."""
    return [value - Z * sd, value + Z * sd], 2 * NormalDist().cdf(-abs(value) / sd)


def _binomial_two_sided(n: int, k: int) -> float:
    """Twice the smaller tail of Binomial(n, ½) at k (the exact sign-flip test of ±1's)."""
    low = sum(math.comb(n, i) for i in range(k + 1)) / 2**n
    high = sum(math.comb(n, i) for i in range(k, n + 1)) / 2**n
    return min(1.0, 2 * min(low, high))


def test_sign_flip_on_many_tasks_is_the_normal_of_the_sign_flip_null() -> None:
    # 2500 tasks, each ±50 (1300 up, 1200 down): mean d = 2; under random signs the mean has
    # variance Σd² / T² = 2500·50² / 2500² = 1, so z = 2.
    differences = [50.0] * 1300 + [-50.0] * 1200
    test = sign_flip(differences)
    assert test.method == SIGN_FLIP_NORMAL
    ci, p_value = _normal_expected(2.0, 1.0)
    assert test.value == 2.0
    assert test.ci95 == pytest.approx(ci, abs=1e-12)
    assert test.p_value == pytest.approx(p_value, abs=1e-12)  # 0.0455
    # and it is close to the exact test it stands for: a binomial count of the up signs
    assert test.p_value == pytest.approx(_binomial_two_sided(2500, 1300), abs=0.005)


def _hypergeometric_variance(na: int, pa: int, nb: int, pb: int) -> float:
    """Var of a task's B − A success difference when its passes are dealt at random between
    its A and B attempts, by enumerating the deals."""
    total, passes = na + nb, pa + pb
    ways = math.comb(total, nb)
    outcomes = [
        (
            b / nb - (passes - b) / na,
            math.comb(passes, b) * math.comb(total - passes, nb - b) / ways,
        )
        for b in range(max(0, passes - na), min(nb, passes) + 1)
    ]
    mean = math.fsum(d * w for d, w in outcomes)
    return math.fsum((d - mean) ** 2 * w for d, w in outcomes)


def test_stratified_permutation_on_many_tasks_is_the_normal_of_its_null() -> None:
    # 3200 tasks, repeats differing per task and per run: B a little better (+1.8 pp, p ≈ 0.02)
    shapes = [(5, 4, 3, 1), (3, 0, 5, 2), (4, 2, 4, 2), (2, 1, 2, 1)]
    shapes += [(3, 3, 3, 3), (1, 0, 2, 1), (4, 3, 3, 3), (3, 2, 5, 2)]
    tables = shapes * 375 + [(2, 2, 2, 1)] * 200
    test = stratified_permutation(tables)
    assert test.method == STRATIFIED_NORMAL
    value = math.fsum(pb / nb - pa / na for na, pa, nb, pb in tables) / len(tables)
    sd = math.sqrt(math.fsum(_hypergeometric_variance(*t) for t in tables)) / len(tables)
    ci, p_value = _normal_expected(value, sd)
    assert test.value == pytest.approx(value, abs=1e-12)
    assert test.ci95 == pytest.approx(ci, abs=1e-9)
    assert test.p_value == pytest.approx(p_value, rel=1e-6)
    assert 0.01 < test.p_value < 0.05


def test_the_exact_tests_hold_while_the_convolution_costs_at_most_a_million_additions() -> None:
    # T identical tasks of two possible outcomes: the null's support after j tasks has j + 1
    # values, so the convolution costs Σ 2(j + 1) = T(T + 1) additions: 999 tasks are within
    # the 1,000,000 budget (999,000), 1000 are not (1,001,000).
    assert sign_flip([1.0] * 999).method == SIGN_FLIP
    assert sign_flip([1.0] * 1000).method == SIGN_FLIP_NORMAL
    # Two shapes whose two outcomes sit at opposite ends of what the counts allow: A's one
    # attempt passed and B passed 1 of 2 (B got 1 or 2 of the 2 passes); A passed 1 of 2 and
    # B's one attempt failed (B got 0 or 1 of the 1 pass).
    for shape in ((1, 1, 2, 1), (2, 1, 1, 0)):
        assert stratified_permutation([shape] * 999).method == STRATIFIED, shape
        assert stratified_permutation([shape] * 1000).method == STRATIFIED_NORMAL, shape
    # At the budget exactly: a task of 1841 then 254 of 1 (growth 1841, then 1 each) costs
    # 2 + Σ_{j<254} 2(1842 + j) = 1,000,000 additions, still exact; 1842 costs 1,000,508.
    assert sign_flip([1841.0] + [1.0] * 254).method == SIGN_FLIP
    assert sign_flip([1842.0] + [1.0] * 254).method == SIGN_FLIP_NORMAL


def test_no_informative_task_is_an_exact_null_of_one_point() -> None:
    # Every task passed (or failed) in both runs: nothing to permute, nothing to approximate.
    same = stratified_permutation([(3, 3, 3, 3), (2, 0, 2, 0)])
    assert same == PairedTest(0.0, [0.0, 0.0], 1.0, STRATIFIED)
    assert sign_flip([0.0, 0.0]) == PairedTest(0.0, [0.0, 0.0], 1.0, SIGN_FLIP)


def test_at_p_exactly_0_05_the_ci_touches_0() -> None:
    # A's one attempt passed, B's 39 all failed: the pass is A's in 1 deal of 40, p = 2/40.
    test = stratified_permutation([(1, 1, 39, 0)])
    assert (test.value, test.p_value) == (-1.0, 0.05)
    assert test.ci95[1] == 0.0  # on the edge: p < 0.05 exactly when the CI excludes 0


def test_a_difference_at_z_sigma_to_the_last_bit_keeps_p_and_the_ci_agreeing() -> None:
    # Found by bisecting the last task's difference to |d| = z σ: the CI's low end is 2e-16,
    # just above 0, while 2 Φ(−|d|/σ) rounds to 0.050000000000000044, just not below 0.05.
    # The p-value is moved to the float just below 0.05, so the two still agree.
    differences = [50.0] * 1300 + [-50.0] * 1199 + [-143.05324259915187]
    test = sign_flip(differences)
    assert test.method == SIGN_FLIP_NORMAL
    low, high = test.ci95
    assert 0.0 < low < 1e-15 and high > test.value
    sd = math.sqrt(math.fsum(d * d for d in differences)) / len(differences)
    assert _normal_expected(test.value, sd)[1] >= 0.05  # the formula alone would disagree
    assert test.p_value == math.nextafter(0.05, 0.0)


def test_sign_flip_of_differences_below_its_resolution_is_no_change() -> None:
    """Every difference rounds to key 0 (below 1 / KEY_RESOLUTION): the null is {0: 1}, so p
    is 1 and the interval holds 0. It raised ZeroDivisionError (a gcd of no steps)."""
    from driftdesk.analysis.paired import KEY_RESOLUTION, sign_flip

    tiny = 0.4 / KEY_RESOLUTION
    test = sign_flip([tiny, -tiny, tiny, 0.0])
    assert test.p_value == 1.0
    assert test.ci95[0] <= 0 <= test.ci95[1]
