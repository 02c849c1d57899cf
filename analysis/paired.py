"""Paired tests for two runs over the same tasks, each giving its p-value AND its 95 % CI from
one null distribution, so the two can never disagree (p < 0.05 exactly when the CI excludes 0).

- Success: a **stratified permutation test over attempts** (exact conditional test). Under "no
  change", a task's attempts in the two runs are exchangeable: given how many of its
  n_A + n_B attempts passed, which run got the passes is a hypergeometric draw, independently
  per task (strata = tasks). The statistic is the mean per-task difference of success rates,
  B − A, so a task run 25 times weighs its 25 attempts, and one that went from 5/5 to 0/5 is
  strong evidence on its own (the permutation probability of that split is 1/252). Its null
  distribution is the exact convolution of the tasks' hypergeometrics while that is cheap
  (a large one in fixed point, to ~1e-28), else its normal approximation (same mean 0 and
  variance; the sum of many independent bounded terms). With one attempt per task in each run
  it is McNemar's exact test.
- Gap: a **sign-flip permutation test** on per-task differences (each task's difference is as
  likely to have either sign), exact by the same convolution, else normal.

The p-value is two-sided, twice the smaller tail: P(D ≤ d) and P(D ≥ d) for the observed d.
The CI is d minus the null's 97.5th and 2.5th percentiles (the null distribution shifted to
the observed difference), with percentiles defined on the same tails, hence the agreement.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add, mul
from statistics import NormalDist

ALPHA = 0.05
EXACT_BUDGET = 1_000_000  # additions of the exact convolution (~0.02 s); past it: normal
KEY_RESOLUTION = 10**6  # sign-flip differences are summed exactly on a grid of 1e-6
DENSE_BUDGET = 20_000  # additions up to which the convolution is in floats; past it: fixed point
FIXED_BITS = 96  # fraction bits of the fixed-point convolution (a multiple of 8)
# Bytes per coefficient of a product: a probability times a distribution's total is below
# 2^(2·96 + 1), so one never carries into the next.
_SLOT = (2 * FIXED_BITS + 8) // 8
_DROPPED = FIXED_BITS // 8

STRATIFIED = "stratified-permutation"
STRATIFIED_NORMAL = "stratified-permutation-normal"
SIGN_FLIP = "sign-flip-permutation"
SIGN_FLIP_NORMAL = "sign-flip-normal"


# A part of a sum: its least value, the step between its values, and their probabilities
# (least value first).
Part = tuple[int, int, list[float]]
# A distribution on a grid: the least value, the step, the probability of each grid point
# (0.0 where the sum cannot be).
Null = tuple[int, int, list[float]]


@dataclass(frozen=True)
class PairedTest:
    value: float  # the observed mean per-task difference, B − A
    ci95: list[float]  # [low, high]
    p_value: float
    method: str


def stratified_permutation(
    tables: Sequence[tuple[int, int, int, int]], *, alpha: float = ALPHA
) -> PairedTest:
    """``tables``: per task (n_A, passes_A, n_B, passes_B), every n ≥ 1; at least one task."""
    tasks = len(tables)
    value = math.fsum(pb / nb - pa / na for na, pa, nb, pb in tables) / tasks
    informative = [(na, nb, pa, pb) for na, pa, nb, pb in tables if 0 < pa + pb < na + nb]
    # Var of a task's difference given its passes m out of N (hypergeometric): m(N−m) /
    # (n_A n_B (N − 1)); a task that all passed or all failed adds nothing.
    variance = math.fsum(
        (pa + pb) * (na + nb - pa - pb) / (na * nb * (na + nb - 1))
        for na, nb, pa, pb in informative
    )
    # Exact on an integer grid: a task's difference × lcm(n_A n_B) is an integer.
    grid = math.lcm(*(na * nb for na, nb, _, _ in informative)) if informative else 1
    steps = [(na + nb) * (grid // (na * nb)) for na, nb, _, _ in informative]
    widths = [min(nb, pa + pb) - max(0, pa + pb - na) + 1 for na, nb, pa, pb in informative]
    if not _affordable(steps, widths):
        return _normal(value, variance / tasks**2, alpha, STRATIFIED_NORMAL)
    parts: list[Part] = []
    observed = 0
    known: dict[tuple[int, int, int], Part] = {}  # tasks alike share one part
    for na, nb, pa, pb in informative:
        total, m, unit = na + nb, pa + pb, grid // (na * nb)
        part = known.get((na, nb, m))
        if part is None:
            ways = math.comb(total, nb)
            low = max(0, m - na)
            probs = [
                math.comb(m, a) * math.comb(total - m, nb - a) / ways
                for a in range(low, min(nb, m) + 1)
            ]
            part = known[(na, nb, m)] = ((low * total - m * nb) * unit, total * unit, probs)
        parts.append(part)
        observed += (pb * total - m * nb) * unit
    return _exact(value, observed, _convolve(parts), tasks * grid, alpha, STRATIFIED)


def sign_flip(differences: Sequence[float], *, alpha: float = ALPHA) -> PairedTest:
    """The mean of ``differences`` (at least one) against random signs per task."""
    tasks = len(differences)
    value = math.fsum(differences) / tasks
    # A difference that rounds to key 0 adds a ±0 part: nothing to the null (and no step).
    keys = [k for k in (round(d * KEY_RESOLUTION) for d in differences) if k]
    steps = [2 * abs(k) for k in keys]
    if not _affordable(steps, [2] * len(keys)):
        variance = math.fsum(d * d for d in differences)
        return _normal(value, variance / tasks**2, alpha, SIGN_FLIP_NORMAL)
    null = _convolve([(-abs(k), 2 * abs(k), [0.5, 0.5]) for k in keys])
    return _exact(value, sum(keys), null, tasks * KEY_RESOLUTION, alpha, SIGN_FLIP)


def _affordable(steps: list[int], widths: list[int]) -> bool:
    """Whether the exact convolution of parts (``widths`` values ``steps`` apart) stays within
    ``EXACT_BUDGET`` additions: the support after each part is at most its span / the common
    step + 1 (known before anything is built, so a huge run goes straight to normal)."""
    if not steps:
        return True
    common = math.gcd(*steps)
    support, cost = 1, 0
    for step, width in zip(steps, widths, strict=True):
        cost += support * width
        if cost > EXACT_BUDGET:
            return False
        support += (width - 1) * step // common
    return True


def _convolve(parts: Sequence[Part]) -> Null:
    """The distribution of the sum of independent integer-valued parts, as a ``Null``: a
    list over the grid of the parts' common step (where the sum's values lie). A small one
    in floats (``_dense``), a large one in fixed point (``_fixed_point``)."""
    common = math.gcd(*(step for _, step, _ in parts)) or 1
    spread = [(probs, step // common) for _, step, probs in parts]
    cost, size = 0, 1
    for probs, stride in spread:
        cost += size * len(probs)
        size += (len(probs) - 1) * stride
    dist = _dense(spread) if cost <= DENSE_BUDGET else _fixed_point(spread)
    return sum(start for start, _, _ in parts), common, dist


def _dense(spread: list[tuple[list[float], int]]) -> list[float]:
    """Each value of a part adds the whole distribution so far, scaled, at its offset, in one
    slice (C loops, no dict). A part's values are added from its largest down, so each sum
    collects its terms in the order of the values they came from, smallest first: the very
    floats of adding term by term in key order."""
    dist = [1.0]
    for probs, stride in spread:
        size = len(dist)
        summed = [0.0] * (size + (len(probs) - 1) * stride)
        last = len(probs) - 1
        at = last * stride
        summed[at : at + size] = map(mul, dist, repeat(probs[last]))  # untouched yet: 0 + x
        for index in range(last - 1, -1, -1):
            at = index * stride
            summed[at : at + size] = map(
                add, summed[at : at + size], map(mul, dist, repeat(probs[index]))
            )
        dist = summed
    return dist


def _fixed_point(spread: list[tuple[list[float], int]]) -> list[float]:
    """The same sums by whole-number arithmetic: probabilities as multiples of 2^-96, a
    distribution as one big integer with a coefficient every ``_SLOT`` bytes, two
    distributions' convolution as the product of their integers (Python multiplies big
    integers in sub-quadratic time). Equal parts (tasks with the same attempts and passes:
    most of a large run's) are raised to their count by squaring, then the powers multiplied
    in a balanced tree. Each product is cut back to 96 fraction bits, so a probability is off
    by less than 2^-96 per product (~1e-28, where a float near 0.01 carries ~1e-18), and one
    below 2^-96 is 0: the far tails, left out of the integers (most of a large null's grid)."""
    counts: dict[tuple[tuple[float, ...], int], int] = {}
    for probs, stride in spread:
        key = (tuple(probs), stride)
        counts[key] = counts.get(key, 0) + 1
    leaves = []
    for (part, stride), count in counts.items():
        vector = [0] * ((len(part) - 1) * stride + 1)
        vector[::stride] = [int(math.ldexp(p, FIXED_BITS)) for p in part]
        leaves.append(_power((0, b"".join(x.to_bytes(_SLOT, "little") for x in vector)), count))
    # the two shortest first (as Huffman merges), so long ones are multiplied least often
    queue = [(len(leaf[1]), order, leaf) for order, leaf in enumerate(leaves)]
    heapq.heapify(queue)
    while len(queue) > 1:
        _, order, a = heapq.heappop(queue)
        _, _, b = heapq.heappop(queue)
        merged = _product(a, b)
        heapq.heappush(queue, (len(merged[1]), order, merged))
    first, digits = queue[0][2]
    one = 1 << FIXED_BITS
    values = [  # each rounded to the nearest float
        int.from_bytes(digits[at : at + _SLOT], "little") / one
        for at in range(0, len(digits), _SLOT)
    ]
    size = sum((len(probs) - 1) * stride for probs, stride in spread) + 1
    return [0.0] * first + values + [0.0] * (size - first - len(values))


def _power(base: tuple[int, bytes], count: int) -> tuple[int, bytes]:
    """``base`` convolved with itself ``count`` (≥ 1) times, by squaring."""
    result = None
    while True:
        if count & 1:
            result = base if result is None else _product(result, base)
        count >>= 1
        if not count:
            assert result is not None
            return result
        base = _product(base, base)


def _product(a: tuple[int, bytes], b: tuple[int, bytes]) -> tuple[int, bytes]:
    """The convolution of two fixed-point distributions (each its first grid point and its
    digits), cut back to ``FIXED_BITS``: each coefficient's low ``_DROPPED`` bytes go, byte
    by byte for all coefficients at once (strided slices, no loop over coefficients); then
    the coefficients that are 0 at either end."""
    size = len(a[1]) // _SLOT + len(b[1]) // _SLOT - 1
    left = int.from_bytes(a[1], "little")
    # one object squared: CPython's multiplication squares faster than it multiplies
    product = left * left if a is b else left * int.from_bytes(b[1], "little")
    full = product.to_bytes(size * _SLOT, "little")
    kept = bytearray(size * _SLOT)
    for byte in range(_SLOT - _DROPPED):
        kept[byte::_SLOT] = full[_DROPPED + byte :: _SLOT]
    leading = (len(kept) - len(kept.lstrip(b"\0"))) // _SLOT
    trailing = (len(kept) - len(kept.rstrip(b"\0"))) // _SLOT
    return a[0] + b[0] + leading, bytes(kept[leading * _SLOT : len(kept) - trailing * _SLOT])


def _exact(
    value: float, observed: int, null: Null, scale: int, alpha: float, method: str
) -> PairedTest:
    """p and CI from one discrete null (keys = statistic × ``scale``). With F the null's CDF
    and S its survival function, p = 2 min(F(d), S(d)); the CI is [d − q_hi, d − q_lo] with
    q_lo the least key where F ≥ α/2 and q_hi the largest where S ≥ α/2. So p ≥ α ⟺
    q_lo ≤ d ≤ q_hi ⟺ 0 in the CI, on the very same floats. A grid point the sum cannot
    reach has probability 0, so it is never q_lo or q_hi (the value before or after it, with
    the same F or S, is taken first)."""
    first, step, probs = null
    cdf = list(itertools.accumulate(probs))
    sf = list(itertools.accumulate(reversed(probs)))[::-1]
    at, off_grid = divmod(observed - first, step)
    assert not off_grid and 0 <= at < len(probs)  # the observed split is one of the deals
    p_value = min(1.0, 2 * min(cdf[at], sf[at]))
    low_q = first + step * next(i for i, c in enumerate(cdf) if c >= alpha / 2)
    high_q = first + step * max(i for i, s in enumerate(sf) if s >= alpha / 2)
    return PairedTest(
        value, [(observed - high_q) / scale, (observed - low_q) / scale], p_value, method
    )


def _normal(value: float, variance: float, alpha: float, method: str) -> PairedTest:
    """The same null by its normal approximation: p = 2 Φ(−|d|/σ), CI d ± z σ."""
    sd = math.sqrt(variance)
    if sd == 0:
        return PairedTest(value, [value, value], 1.0 if value == 0 else 0.0, method)
    normal = NormalDist()
    half = normal.inv_cdf(1 - alpha / 2) * sd
    p_value = 2 * normal.cdf(-abs(value) / sd)
    # the two floats must not straddle α when |d| is within rounding of z σ
    outside = abs(value) > half
    if outside != (p_value < alpha):
        p_value = math.nextafter(alpha, 0.0) if outside else alpha
    return PairedTest(value, [value - half, value + half], p_value, method)
