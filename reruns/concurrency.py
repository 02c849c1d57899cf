"""How many model calls a run has in flight per provider endpoint, and how many attempts run.

``--concurrency N`` fixes it; ``--concurrency auto`` (or ``auto:MIN-START-MAX``) hands it to a
controller per endpoint over *model calls in flight at the metering proxy* (the ``CallGate`` of
reruns/call_gate.py: a client's parallel calls queue there). New attempts start while the
running ones are fewer than the limit (``AttemptAdmission``), so a one-call attempt is one call.

The control law (justified with tests/benchmarks/bench_concurrency.py in docs/ARCHITECTURE.md):

- slow start: +1 per successful call (the limit doubles per round trip) until the provider
  shows its edge (a 429, or ``remaining-requests: 0`` in its rate-limit headers);
- then additive increase, +1 per round (``1/limit`` per successful call), only while the work
  fills the limit (no growth when the calls in flight are fewer: the limit would be untested);
- the provider's headers lead: a success that says ``remaining: 0`` took the last room, so
  the limit steps back a little (x0.95, at most once per round trip) and new sends wait the
  time one request's room takes to come back (``60 / limit-requests`` s) — the limit settles
  at the edge before 429s come, which a 429-only law (inspect_ai's) cannot do;
- a rate-limit episode (429s) cuts the limit x0.8; the 429s of calls sent before the cut
  (within a round trip of it) belong to the same episode and cut nothing more; every send waits
  for the Retry-After the provider named (``retry-after-ms`` first);
- 5xx, connection errors and timeouts do not move the limit: they say nothing about the rate.

A ``ctl`` change (reruns/run_control.py) sets a fixed limit, or gives it back to ``auto``; a
fixed limit is the same gate without the law. Every change of the whole limit is handed to
``on_change`` (the run records it in ``control.jsonl`` and its events).
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import math
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

DEFAULT_AUTO = (1, 4, 64)  # ``--concurrency auto``: MIN-START-MAX
DECREASE = 0.8  # the cut of a rate-limit episode
EDGE_STEP = 0.95  # the step back when the provider says its room is spent
HEADROOM = 2  # requests of room the provider must report for the limit to grow
PACE_SHARE = 0.98  # sends are paced at this share of the request rate the provider states
PACE_BACKLOG = 2  # unused pace slots that may still be taken (a small burst)
MAX_HOLD_S = 60.0  # the longest Retry-After honoured before the next send


class ConcurrencyError(ValueError):
    """A concurrency that cannot be used (one line, for the CLI and the launch form)."""


@dataclass(frozen=True)
class AutoBounds:
    """``auto:MIN-START-MAX``: the limit starts at ``start`` and moves within [min, max]."""

    min: int
    start: int
    max: int

    def text(self) -> str:
        return f"auto:{self.min}-{self.start}-{self.max}"


Concurrency = int | AutoBounds


def parse_concurrency(value: str | Concurrency) -> Concurrency:
    """``4``, ``auto`` or ``auto:2-8-64`` (``auto:2-64``: start at the smaller of 4 and 64);
    bounds given as such are checked."""
    if isinstance(value, AutoBounds):
        return parse_concurrency(value.text())
    if isinstance(value, int):
        if value < 1:
            raise ConcurrencyError("--concurrency must be at least 1")
        return value
    text = value.strip().lower()
    if text.isdigit():
        return parse_concurrency(int(text))
    if text == "auto":
        return AutoBounds(*DEFAULT_AUTO)
    if text.startswith("auto:"):
        parts = text[5:].split("-")
        if all(p.isdigit() for p in parts) and len(parts) in (2, 3):
            numbers = [int(p) for p in parts]
            if len(numbers) == 2:
                numbers.insert(1, max(numbers[0], min(DEFAULT_AUTO[1], numbers[1])))
            low, start, high = numbers
            if not 1 <= low <= start <= high:
                raise ConcurrencyError(
                    f"--concurrency {value}: needs 1 <= MIN <= START <= MAX (auto:2-8-64)"
                )
            return AutoBounds(low, start, high)
    raise ConcurrencyError(
        f"--concurrency {value}: give a number, auto, or auto:MIN-START-MAX (auto:2-8-64)"
    )


def concurrency_text(value: Concurrency) -> str:
    return value.text() if isinstance(value, AutoBounds) else str(value)


def start_of(value: Concurrency) -> int:
    return value.start if isinstance(value, AutoBounds) else value


def retry_after_s(headers: Mapping[str, str]) -> float | None:
    """The wait a 429 names: ``retry-after-ms``, else ``Retry-After`` (seconds or a date)."""
    lowered = {k.lower(): v for k, v in headers.items()}
    try:
        if "retry-after-ms" in lowered:
            return max(0.0, float(lowered["retry-after-ms"]) / 1000)
        raw = lowered.get("retry-after")
        if raw is None:
            return None
        if raw.strip().replace(".", "", 1).isdigit():
            return float(raw)
        when = email.utils.parsedate_to_datetime(raw)
        return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _number(headers: Mapping[str, str], *names: str) -> float | None:
    lowered = {k.lower(): v for k, v in headers.items()}
    for name in names:
        raw = lowered.get(name)
        if raw is None:
            continue
        try:
            value = float(raw)
        except ValueError:
            continue
        if math.isfinite(value) and value >= 0:
            return value
    return None


def remaining_requests(headers: Mapping[str, str]) -> float | None:
    return _number(
        headers, "x-ratelimit-remaining-requests", "anthropic-ratelimit-requests-remaining"
    )


def requests_per_minute(headers: Mapping[str, str]) -> float | None:
    return _number(headers, "x-ratelimit-limit-requests", "anthropic-ratelimit-requests-limit")


@dataclass(frozen=True)
class LimitChange:
    endpoint: str
    limit: int
    previous: int
    reason: str  # "slow start" | "grow" | "at the provider's edge" | "rate-limit episode" | "set"


@dataclass
class EndpointLimit:
    """One endpoint's limit and what the controller knows of it."""

    limit: float
    bounds: AutoBounds | None  # None: fixed
    in_flight: int = 0
    slow_start: bool = True
    hold_until: float = 0.0  # no send before this (monotonic): a Retry-After, a spent room
    episode_until: float = 0.0  # 429s before this belong to the current episode
    edge_until: float = 0.0  # no second step back before this
    round_trip_s: float = 0.0  # smoothed time a call takes (0: none seen yet)
    rate: float | None = None  # requests/s the provider states (its limit-requests / 60)
    next_send: float = 0.0  # paced: no send before this (monotonic)
    sent_at: deque[float] = field(default_factory=deque)
    waiters: deque[asyncio.Future[None]] = field(default_factory=deque)  # first come, first in
    timer: asyncio.TimerHandle | None = None  # wakes the waiters when a hold ends
    episodes: int = 0
    rate_limited: int = 0  # upstream 429s
    calls: int = 0
    # Seconds spent at each whole limit (the range the report gives is time-weighted)
    time_at: dict[int, float] = field(default_factory=dict)
    since: float = 0.0  # when the limit took its current whole value (0: not yet)

    @property
    def whole(self) -> int:
        return max(1, math.floor(self.limit + 1e-9))


class ConcurrencyController:
    """The run's ``CallGate``: one limit per endpoint, fixed or under the control law."""

    def __init__(
        self,
        setting: Concurrency,
        *,
        on_change: Callable[[LimitChange], None] | None = None,
        saturated: Callable[[], bool] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.setting = setting
        self._on_change = on_change
        # Whether more work waits than the limit lets run (the execution knows): growth only
        # then, else the limit would rise untested.
        self._saturated = saturated or (lambda: True)
        self._clock = clock
        self._limits: dict[str, EndpointLimit] = {}
        self._default = start_of(setting)

    # --- the gate ---------------------------------------------------------------------------

    def endpoint(self, endpoint: str) -> EndpointLimit:
        state = self._limits.get(endpoint)
        if state is None:
            bounds = self.setting if isinstance(self.setting, AutoBounds) else None
            state = EndpointLimit(float(self._default), bounds)
            state.since = self._clock()
            self._limits[endpoint] = state
        return state

    async def acquire(self, endpoint: str) -> None:
        state = self.endpoint(endpoint)
        if not state.waiters and self._room(state):
            self._take(state)
            return
        granted: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        state.waiters.append(granted)
        self._dispatch(state)  # a hold's end is what it waits for: set its timer
        try:
            await granted
        except asyncio.CancelledError:
            if granted.done() and not granted.cancelled():  # let in, then cancelled: give back
                state.in_flight -= 1
                self._dispatch(state)
            else:
                with contextlib.suppress(ValueError):
                    state.waiters.remove(granted)
            raise

    def _room(self, state: EndpointLimit) -> bool:
        return state.in_flight < state.whole and self._not_before(state) <= self._clock()

    @staticmethod
    def _not_before(state: EndpointLimit) -> float:
        paced = state.rate is not None and state.bounds is not None  # a fixed limit: no pace
        return max(state.hold_until, state.next_send if paced else 0.0)

    def _take(self, state: EndpointLimit) -> None:
        now = self._clock()
        state.in_flight += 1
        state.sent_at.append(now)
        if state.rate and state.bounds is not None:
            # A pace slot nobody used may be taken a little late (PACE_BACKLOG of them), as a
            # bucket's burst allows; never more: the provider's own burst covers the rest.
            interval = 1.0 / (state.rate * PACE_SHARE)
            state.next_send = max(now - PACE_BACKLOG * interval, state.next_send) + interval

    def _dispatch(self, state: EndpointLimit) -> None:
        """Let waiting calls in, first come first in, while there is room; a hold (Retry-After)
        wakes them when it ends."""
        while state.waiters and state.waiters[0].done():
            state.waiters.popleft()  # cancelled while waiting
        while state.waiters and state.in_flight < state.whole:
            wait = self._not_before(state) - self._clock()
            if wait > 0:
                if state.timer is None:
                    loop = asyncio.get_running_loop()
                    state.timer = loop.call_later(wait, self._hold_over, state)
                return
            granted = state.waiters.popleft()
            if granted.done():
                continue
            self._take(state)
            granted.set_result(None)

    def _hold_over(self, state: EndpointLimit) -> None:
        state.timer = None
        self._dispatch(state)

    def release(
        self,
        endpoint: str,
        status: int | None,
        headers: Mapping[str, str],
        error_kind: str | None,
    ) -> None:
        state = self.endpoint(endpoint)
        now = self._clock()
        state.in_flight = max(0, state.in_flight - 1)
        state.calls += 1
        if state.sent_at:  # FIFO: close enough to a call's own time to smooth the round trip
            took = now - state.sent_at.popleft()
            state.round_trip_s = (
                took if not state.round_trip_s else 0.8 * state.round_trip_s + 0.2 * took
            )
        if state.bounds is not None:
            per_minute = requests_per_minute(headers)
            state.rate = per_minute / 60.0 if per_minute else state.rate
        if status == 429:
            state.rate_limited += 1
            self._rate_limited(endpoint, state, now, retry_after_s(headers))
        elif status is not None and 200 <= status < 300 and error_kind is None:
            self._succeeded(endpoint, state, now, headers)
        self._dispatch(state)

    # --- the law ------------------------------------------------------------------------------

    def _rate_limited(
        self, endpoint: str, state: EndpointLimit, now: float, wait: float | None
    ) -> None:
        fixed = state.bounds is None  # counted all the same: the report says how it ran
        if wait and not fixed:
            state.hold_until = max(state.hold_until, now + min(wait, MAX_HOLD_S))
        if now < state.episode_until:
            return  # sent before the cut: the same episode
        state.episodes += 1
        state.episode_until = now + max(state.round_trip_s, wait or 0.0) * 1.5
        if not fixed:
            state.slow_start = False
            self._set(endpoint, state, state.limit * DECREASE, "rate-limit episode")

    def _succeeded(
        self, endpoint: str, state: EndpointLimit, now: float, headers: Mapping[str, str]
    ) -> None:
        if state.bounds is None:
            return
        remaining = remaining_requests(headers)
        if remaining is not None and remaining < 1:
            # The provider's room is spent: step back a little, once per round trip, and let
            # one request's room come back before the next send.
            state.slow_start = False
            per_minute = requests_per_minute(headers)
            if per_minute:
                state.hold_until = max(state.hold_until, now + 60.0 / per_minute)
            if now >= state.edge_until:
                state.edge_until = now + state.round_trip_s
                self._set(endpoint, state, state.limit * EDGE_STEP, "at the provider's edge")
            return
        if remaining is not None and remaining < HEADROOM:
            return  # near the edge: hold where it is
        if now < max(state.episode_until, state.edge_until) or not self._saturated():
            return
        if state.waiters:
            state.slow_start = False  # the pace binds: the limit is about where it should be
            return  # calls queue here already (a pace, a hold): more room would not be used
        if state.slow_start:
            self._set(endpoint, state, state.limit + 1, "slow start")
        else:
            self._set(endpoint, state, state.limit + 1 / state.limit, "grow")

    def _set(self, endpoint: str, state: EndpointLimit, value: float, reason: str) -> None:
        previous = state.whole
        if state.bounds is not None:
            value = min(float(state.bounds.max), max(float(state.bounds.min), value))
        state.limit = value
        if state.whole != previous:
            self._spent_at(state, previous)
            if self._on_change is not None:
                self._on_change(LimitChange(endpoint, state.whole, previous, reason))

    def _spent_at(self, state: EndpointLimit, whole: int) -> None:
        now = self._clock()
        if state.since:
            state.time_at[whole] = state.time_at.get(whole, 0.0) + now - state.since
        state.since = now

    # --- what the run and ctl read and set ------------------------------------------------------

    def limit(self, endpoint: str | None = None) -> int:
        """The whole limit of ``endpoint`` (None: the smallest of all, or the start)."""
        if endpoint is not None:
            return self.endpoint(endpoint).whole
        return min((s.whole for s in self._limits.values()), default=max(1, self._default))

    def in_flight(self) -> int:
        return sum(s.in_flight for s in self._limits.values())

    def set(self, setting: Concurrency) -> None:
        """A ``ctl`` change: a fixed limit for every endpoint, or ``auto`` again (from where
        the limit stands, within the run's auto bounds or the default's)."""
        self.setting = setting
        self._default = start_of(setting)
        for endpoint, state in self._limits.items():
            if isinstance(setting, AutoBounds):
                state.bounds = setting
                self._set(endpoint, state, state.limit, "set")
            else:
                state.bounds = None
                state.slow_start = False
                self._set(endpoint, state, float(setting), "set")
            self._dispatch(state)

    def summary(self) -> dict[str, object]:
        """What the manifest keeps of how the run ran (all endpoints together)."""
        states = list(self._limits.values())
        time_at: dict[int, float] = {}
        for state in states:
            self._spent_at(state, state.whole)
            for whole, seconds in state.time_at.items():
                time_at[whole] = time_at.get(whole, 0.0) + seconds
        low, high = time_weighted_range(time_at, self._default)
        return {
            "setting": concurrency_text(self.setting),
            "low": low,  # the limit's range over the run: 10th to 90th percentile of its time
            "high": high,
            "last": self.limit(),
            "episodes": sum(s.episodes for s in states),
            "rate_limited": sum(s.rate_limited for s in states),
            "calls": sum(s.calls for s in states),
        }


def time_weighted_range(time_at: dict[int, float], default: int) -> tuple[int, int]:
    """The 10th and 90th percentile of the time spent at each limit (the run's range, without
    the moments it passed through on the way)."""
    total = sum(time_at.values())
    if total <= 0:
        return default, default
    low = high = None
    seen = 0.0
    for whole in sorted(time_at):
        seen += time_at[whole]
        if low is None and seen >= 0.1 * total:
            low = whole
        if high is None and seen >= 0.9 * total:
            high = whole
    return low or default, high or default


class AttemptAdmission:
    """Whether a new attempt may start: fewer running than the limit, and not paused."""

    def __init__(self, limit: Callable[[], int]) -> None:
        self._limit = limit
        self.running = 0
        self.paused = False
        self._changed = asyncio.Event()

    def changed(self) -> None:
        """The limit or the pause changed: waiting workers look again."""
        self._changed.set()

    def room(self) -> bool:
        return not self.paused and self.running < self._limit()

    async def enter(self) -> Ticket:
        """Wait for room; the ticket's ``leave`` (once, idempotent) gives it back."""
        while not self.room():
            self._changed.clear()
            with contextlib.suppress(TimeoutError):  # a safety net: changes wake it at once
                await asyncio.wait_for(self._changed.wait(), 0.25)
        self.running += 1
        return Ticket(self)

    def leave(self) -> None:
        self.running = max(0, self.running - 1)
        self._changed.set()

    def pause(self, paused: bool) -> None:
        self.paused = paused
        self._changed.set()


class Ticket:
    """One admitted attempt: ``leave`` when its work ends (its row may still be written)."""

    def __init__(self, admission: AttemptAdmission) -> None:
        self._admission: AttemptAdmission | None = admission

    def leave(self) -> None:
        if self._admission is not None:
            self._admission.leave()
            self._admission = None
