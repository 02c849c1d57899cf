"""Absorbing link faults at the proxy (``--link-faults absorb``): hold the call, send it again.

Claude Code and Codex run with their own retries off, so a 429 ends their try and driftdesk
reruns the whole try from a fresh workspace: every token spent before the fault is paid again
and the trajectory starts over. Absorbing moves the retry to the one place every call passes:
a 429 (its ``Retry-After`` honoured), 408, 5xx, connection error or first-byte timeout that
happens *before the first byte of the answer reached the client* is held at the proxy and the
same request is sent again after a backoff; the client sees only the final answer, or, when the
budget is spent, the last fault (and the try is retried as under ``retry``). A fault after the
first byte has gone out (a stream cut short, ``truncate``) cannot be taken back and surfaces.

One retry layer: which faults are retryable and how long to wait come from
``reruns/retry.py`` (``is_retryable``, ``RetryPolicy.delay``, ``waits_too_long`` for a
``Retry-After`` past ``--max-retry-delay``). The budget is time, not a count: a wait is taken
only when it ends inside the first ``ABSORB_SHARE`` of the try's timeout, so a provider that
stays down leaves the client the rest of its time to see the fault and end the try as a
``link_error`` (rerun as today) instead of being killed at its timeout, and a call is sent
again ``MAX_RESENDS`` times at most. Absorbed waits are
not ``--max-retries`` retries (those count whole tries).

Each absorbed fault is a calls.jsonl row of its own (``absorbed: true``, ``wait_s``: the hold
that followed it); the attempt row counts them (``call_verdicts.call_figures``).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from typing import Literal

from driftdesk.reruns.retry import RetryPolicy, is_retryable

LinkFaults = Literal["absorb", "retry"]
LINK_FAULT_MODES: tuple[LinkFaults, ...] = ("absorb", "retry")
# A runs's mode when its manifest does not say (a run from before absorbing existed retried).
MANIFEST_DEFAULT_LINK_FAULTS: LinkFaults = "retry"
# Waits are taken only while they end inside this share of the try's timeout.
ABSORB_SHARE = 0.75
# How long the upstream gets for its first byte before the call is held and sent again, as a
# share of the try's timeout, within bounds: a non-streamed long answer can take minutes to
# start, and sending it again while the provider is still working would pay for it twice.
FIRST_BYTE_SHARE = 0.25
FIRST_BYTE_MIN_S = 10.0
FIRST_BYTE_MAX_S = 120.0
# Re-sends of one call at most: a provider that keeps refusing is not helped by being asked
# again and again (a 5 ms Retry-After let one call be sent 1,233 times inside a 1.5 s budget).
MAX_RESENDS = 8


def link_faults_problem(text: str | None) -> str | None:
    """Why ``text`` is no ``--link-faults`` mode (one line), or None."""
    if text is None or text in LINK_FAULT_MODES:
        return None
    return f"--link-faults {text!r}: use absorb or retry"


@dataclass(frozen=True)
class AbsorbPolicy:
    """How a run absorbs: its retry policy's delays and cap, and its tries' timeout."""

    retry: RetryPolicy
    try_timeout_s: float
    # None: derived from the try's timeout (FIRST_BYTE_*); tests set it short.
    first_byte_timeout_s: float | None = None

    @property
    def first_byte_s(self) -> float:
        if self.first_byte_timeout_s is not None:
            return self.first_byte_timeout_s
        share = self.try_timeout_s * FIRST_BYTE_SHARE
        return min(max(share, FIRST_BYTE_MIN_S), FIRST_BYTE_MAX_S)

    def deadline(self, try_opened_at: float) -> float:
        """The monotonic time by which an absorbed wait must have ended."""
        return try_opened_at + self.try_timeout_s * ABSORB_SHARE


class CallAbsorber:
    """One proxied model call's absorbing: whether its next fault is held, and how long."""

    def __init__(self, policy: AbsorbPolicy, rng: random.Random, try_opened_at: float) -> None:
        self._policy = policy
        self._rng = rng
        self._deadline = policy.deadline(try_opened_at)
        self.resends = 0  # how many times this call was sent again

    def hold(self, kind: str | None, retry_after_s: float | None) -> float | None:
        """Seconds to hold the call before sending it again, or None: the client sees it."""
        if not is_retryable(kind) or self.resends >= MAX_RESENDS:
            return None
        retry = self._policy.retry
        if retry.waits_too_long(retry_after_s):
            return None  # asking again before the server said would buy the same answer
        wait = retry.delay(self.resends + 1, retry_after_s, self._rng)
        if time.monotonic() + wait > self._deadline:
            return None
        self.resends += 1
        return wait


@dataclass(frozen=True)
class Held:
    """An exchange whose fault the client was not sent: wait ``wait_s``, then send again."""

    kind: str
    wait_s: float
