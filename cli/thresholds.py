"""Argument types for thresholds: a rate is a fraction in [0, 1] or a percentage ("5%"), points
are finite and in [0, 100]; anything else is refused by argparse (exit 2, the reason in one line).

Seen: ``--max-link-error-rate 5`` (meant as 5 %) passed a run with 50 % link errors, and
``--min-success -0.1``, ``--max-regression -5`` or ``inf`` made conditions that always hold.
"""

from __future__ import annotations

import argparse
import math


def rate(text: str) -> float:
    """``0.05`` or ``5%`` -> 0.05."""
    body = text.strip()
    percent = body.endswith("%")
    try:
        value = float(body[:-1] if percent else body)
    except ValueError:
        value = math.nan
    if percent:
        value /= 100
    if not (math.isfinite(value) and 0.0 <= value <= 1.0):
        raise argparse.ArgumentTypeError(
            f"a rate is a fraction from 0 to 1 or a percentage (0.05 or 5%), got {text!r}"
        )
    return value


def points(text: str) -> float:
    """Percentage points, ``5`` or ``5pp``, from 0 to 100."""
    body = text.strip().removesuffix("pp").strip()
    try:
        value = float(body)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0.0 <= value <= 100.0):
        raise argparse.ArgumentTypeError(
            f"percentage points are a number from 0 to 100 (5 or 5pp), got {text!r}"
        )
    return value


def k_rate(text: str) -> tuple[int, float]:
    """``K=RATE``, K ≥ 1, RATE as ``rate``."""
    k, sep, value = text.partition("=")
    try:
        if not sep or int(k) < 1:
            raise ValueError
        return int(k), rate(value)
    except (ValueError, argparse.ArgumentTypeError):
        raise argparse.ArgumentTypeError(
            f"expected K=RATE such as 3=0.5 or 3=50% (K ≥ 1, RATE from 0 to 1), got {text!r}"
        ) from None


def at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number ≥ 1, got {text!r}")
    return value
