"""One retry layer for link errors: which are worth retrying, and how long to wait.

Retried: 429 (except ``insufficient_quota``), 408, 5xx, timeouts and connection errors.
Final: 401/403/404, ``insufficient_quota`` and everything else. The delay is exponential with
full jitter, but a server's ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date) wins
when present; both are capped by ``max_delay_s``. A server that asks for more than the cap is
not retried at all: asking again before it said would only buy the same answer (seen:
``Retry-After: 1e9`` waited out 30 s four times, ~123 s, for the same 429).
"""

from __future__ import annotations

import email.utils
import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

RETRYABLE_KINDS = frozenset({"timeout", "connection", "408", "429"})


def is_retryable(error_code: str | None) -> bool:
    if not error_code:
        return False
    if error_code in RETRYABLE_KINDS:
        return True
    return error_code.isdigit() and 500 <= int(error_code) <= 599


def _finite_seconds(raw: str, per_second: float) -> float | None:
    """A number of seconds, or None. ``nan`` and ``inf`` are no numbers of seconds: a ``nan``
    would slip past every ``min`` and ``max`` (all comparisons with it are false)."""
    try:
        value = float(raw) / per_second
    except ValueError:
        return None
    return max(value, 0.0) if math.isfinite(value) else None


def parse_retry_after(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """Seconds to wait as the server asked, from ``retry-after-ms`` or ``Retry-After``."""
    if not headers:
        return None
    lowered = {k.lower(): v for k, v in headers.items()}
    raw_ms = lowered.get("retry-after-ms")
    if raw_ms:
        seconds = _finite_seconds(raw_ms, 1000.0)
        if seconds is not None:
            return seconds
    raw = lowered.get("retry-after")
    if not raw:
        return None
    seconds = _finite_seconds(raw, 1.0)
    if seconds is not None:
        return seconds
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(when.timestamp() - (now if now is not None else time.time()), 0.0)


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 4  # per attempt, across all its calls
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0

    def to_manifest(self) -> dict[str, float | int]:
        return {
            "max_retries": self.max_retries,
            "base_delay_seconds": self.base_delay_s,
            "max_delay_seconds": self.max_delay_s,
        }

    @classmethod
    def from_manifest(cls, manifest: Mapping[str, object]) -> RetryPolicy:
        """The policy a run recorded (the defaults for what it did not record)."""
        info = manifest.get("retry_policy")
        recorded: Mapping[str, object] = info if isinstance(info, Mapping) else {}
        return cls(
            max_retries=int(str(recorded.get("max_retries", cls.max_retries))),
            base_delay_s=float(str(recorded.get("base_delay_seconds", cls.base_delay_s))),
            max_delay_s=float(str(recorded.get("max_delay_seconds", cls.max_delay_s))),
        )

    def waits_too_long(self, retry_after_s: float | None) -> bool:
        """The server asked for a wait past the cap: retrying sooner would be refused again."""
        return retry_after_s is not None and retry_after_s > self.max_delay_s

    def delay(self, retry_number: int, retry_after_s: float | None, rng: random.Random) -> float:
        """Seconds to wait before retry ``retry_number`` (1 for the first retry)."""
        if retry_after_s is not None and math.isfinite(retry_after_s):
            return min(max(retry_after_s, 0.0), self.max_delay_s)
        ceiling = min(self.base_delay_s * (2 ** (retry_number - 1)), self.max_delay_s)
        # "Equal jitter": at least half the backoff, so retries never bunch up at zero.
        return ceiling / 2 + rng.uniform(0, ceiling / 2)


def too_long_message(code: str | None, retry_after_s: float | None, policy: RetryPolicy) -> str:
    """What the attempt's log says when a server's wait is past the cap."""
    return (
        f"{code}: the server asks to wait {retry_after_s:g}s (Retry-After), over the "
        f"{policy.max_delay_s:g}s cap (--max-retry-delay): not retried"
    )
