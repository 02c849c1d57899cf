"""A provider's rate limit, played by the sandbox: token buckets per key.

Two buckets per key, as OpenAI and Anthropic meter: requests (``rps`` per second, holding at
most ``burst`` requests) and tokens (``tpm`` per minute, holding a minute's worth). A request
that finds either bucket short is answered 429 with the time until it would have fitted
(``Retry-After`` in whole seconds, ``retry-after-ms`` exactly); every answer, 429 or not,
carries the rate-limit headers both providers send:

- OpenAI: ``x-ratelimit-limit-requests`` (per minute, as OpenAI states its RPM),
  ``x-ratelimit-remaining-requests`` (whole requests the bucket holds now),
  ``x-ratelimit-reset-requests`` (until the bucket is full again, ``"250ms"``, ``"1.5s"``),
  and the same three for ``-tokens``;
- Anthropic: ``anthropic-ratelimit-requests-limit``/``-remaining``/``-reset`` (an RFC 3339
  time) and the same for ``tokens``.

So ``60 / limit-requests`` is the time one request's room takes to come back, which is what a
client reading ``remaining: 0`` needs to know (reruns/concurrency.py reads it).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta


@dataclass(frozen=True)
class RateLimit:
    """What the sandbox allows per key; None: no limit of that kind."""

    rps: float | None = None  # requests per second
    burst: int = 1  # requests the bucket holds: how many may come at once
    tpm: int | None = None  # tokens per minute (the bucket holds one minute's worth)
    # Send the rate-limit headers (False: a provider that states nothing but Retry-After)
    headers: bool = True

    def problem(self) -> str | None:
        """Why these settings cannot be served, or None."""
        if self.rps is not None and self.rps <= 0:
            return "--rps must be positive"
        if self.burst < 1:
            return "--burst must be at least 1"
        if self.tpm is not None and self.tpm < 1:
            return "--tpm must be at least 1"
        return None

    @property
    def active(self) -> bool:
        return self.rps is not None or self.tpm is not None


@dataclass
class TokenBucket:
    """``capacity`` units, refilled at ``rate`` units per second."""

    capacity: float
    rate: float
    level: float = field(default=-1.0)
    updated: float = 0.0

    def refill(self, now: float) -> None:
        if self.level < 0:  # a new key starts full
            self.level = self.capacity
        else:
            self.level = min(self.capacity, self.level + (now - self.updated) * self.rate)
        self.updated = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` fits (0: it fits now); call after ``refill``."""
        if self.level >= amount:
            return 0.0
        return (min(amount, self.capacity) - self.level) / self.rate

    def until_full(self) -> float:
        return (self.capacity - self.level) / self.rate


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    retry_after_s: float  # 0 when allowed
    headers: dict[str, str]


class RateLimiter:
    """The buckets of every key that has called, and the verdict on each new request."""

    def __init__(self, limit: RateLimit, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._clock = clock
        self._requests: dict[str, TokenBucket] = {}
        self._tokens: dict[str, TokenBucket] = {}
        self.refused = 0  # requests answered 429 (tests and benchmarks read it)
        self.admitted = 0

    def admit(self, key: str, tokens: int) -> Verdict:
        """Take one request and ``tokens`` tokens from ``key``'s buckets, or refuse."""
        now = self._clock()
        buckets: list[tuple[TokenBucket, float]] = []
        if self.limit.rps is not None:
            bucket = self._requests.setdefault(
                key, TokenBucket(float(self.limit.burst), self.limit.rps)
            )
            buckets.append((bucket, 1.0))
        if self.limit.tpm is not None:
            bucket = self._tokens.setdefault(
                key, TokenBucket(float(self.limit.tpm), self.limit.tpm / 60.0)
            )
            buckets.append((bucket, float(tokens)))
        for bucket, _ in buckets:
            bucket.refill(now)
        wait = max((bucket.wait_for(amount) for bucket, amount in buckets), default=0.0)
        if wait == 0.0:
            for bucket, amount in buckets:
                bucket.level -= amount
            self.admitted += 1
        else:
            self.refused += 1
        return Verdict(wait == 0.0, wait, self._headers(key, wait))

    def _headers(self, key: str, wait: float) -> dict[str, str]:
        headers: dict[str, str] = {}
        wall = datetime.now(UTC)
        stated: list[tuple[str, TokenBucket | None, float | None]] = [
            ("requests", self._requests.get(key), self.limit.rps and self.limit.rps * 60),
            ("tokens", self._tokens.get(key), self.limit.tpm),
        ]
        for kind, bucket, limit in stated if self.limit.headers else []:
            if bucket is None or not limit:
                continue
            remaining = str(max(0, math.floor(bucket.level)))
            reset = bucket.until_full()
            headers[f"x-ratelimit-limit-{kind}"] = str(round(limit))
            headers[f"x-ratelimit-remaining-{kind}"] = remaining
            headers[f"x-ratelimit-reset-{kind}"] = openai_duration(reset)
            at = (wall + timedelta(seconds=reset)).isoformat(timespec="milliseconds")
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(round(limit))
            headers[f"anthropic-ratelimit-{kind}-remaining"] = remaining
            headers[f"anthropic-ratelimit-{kind}-reset"] = at.replace("+00:00", "Z")
        if wait > 0:
            headers["retry-after-ms"] = str(max(1, math.ceil(wait * 1000)))
            headers["Retry-After"] = str(max(1, math.ceil(wait)))
        return headers


def openai_duration(seconds: float) -> str:
    """A duration as OpenAI's reset headers write it: ``"120ms"``, ``"1.5s"``, ``"6m0s"``."""
    if seconds < 1:
        return f"{max(0, round(seconds * 1000))}ms"
    if seconds < 60:
        return f"{seconds:.3g}s"
    minutes, rest = divmod(seconds, 60)
    return f"{int(minutes)}m{rest:.0f}s"


def describe_rate_limit(limit: RateLimit) -> str:
    """``20 requests/s (burst 5), 40000 tokens/min`` (the sandbox's startup line)."""
    parts = []
    if limit.rps is not None:
        parts.append(f"{limit.rps:g} requests/s (burst {limit.burst})")
    if limit.tpm is not None:
        parts.append(f"{limit.tpm} tokens/min")
    return ", ".join(parts) or "none"
