"""The concurrency controller (reruns/concurrency.py): ``--concurrency`` parsing, the gate over
model calls in flight, and the control law (slow start, additive growth, one cut per rate-limit
episode, Retry-After and the provider's rate-limit headers honoured)."""

from __future__ import annotations

import asyncio
import time

import pytest

from driftdesk.reruns.concurrency import (
    AttemptAdmission,
    AutoBounds,
    ConcurrencyController,
    ConcurrencyError,
    LimitChange,
    parse_concurrency,
    retry_after_s,
)

EP = "http://127.0.0.1:9/v1"
OK: dict[str, str] = {}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_parse_concurrency() -> None:
    assert parse_concurrency("4") == 4
    assert parse_concurrency(3) == 3
    assert parse_concurrency("auto") == AutoBounds(1, 4, 64)
    assert parse_concurrency("auto:2-8-64") == AutoBounds(2, 8, 64)
    assert parse_concurrency("AUTO:2-64") == AutoBounds(2, 4, 64)
    assert parse_concurrency("auto:1-3") == AutoBounds(1, 3, 3)
    for bad in ("0", "auto:8-2-64", "auto:", "fast", "auto:1-2-3-4", "-1"):
        with pytest.raises(ConcurrencyError):
            parse_concurrency(bad)


def test_retry_after_headers() -> None:
    assert retry_after_s({"retry-after-ms": "250", "Retry-After": "1"}) == 0.25
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    assert retry_after_s({}) is None
    assert retry_after_s({"Retry-After": "soon"}) is None


async def _calls(gate: ConcurrencyController, n: int, status: int, headers: dict[str, str]) -> None:
    for _ in range(n):
        await gate.acquire(EP)
    for _ in range(n):
        gate.release(EP, status, headers, None)


async def test_slow_start_then_one_cut_per_episode() -> None:
    clock = Clock()
    changes: list[LimitChange] = []
    gate = ConcurrencyController(AutoBounds(2, 4, 64), on_change=changes.append, clock=clock)
    await _calls(gate, 4, 200, OK)
    assert gate.limit(EP) == 8  # +1 per success: doubled in one round
    await _calls(gate, 8, 200, OK)
    assert gate.limit(EP) == 16
    # A burst of 429s (every call in flight) is one episode: one cut, x0.8.
    for _ in range(10):
        await gate.acquire(EP)
    clock.now += 0.5
    for _ in range(10):
        gate.release(EP, 429, {"retry-after-ms": "10"}, None)
    assert gate.limit(EP) == 12  # 16 * 0.8 = 12.8
    assert gate.endpoint(EP).episodes == 1
    assert gate.endpoint(EP).rate_limited == 10
    # Past slow start: +1 per round (limit successes), not per call.
    clock.now += 5
    await _calls(gate, 12, 200, OK)
    assert gate.limit(EP) == 13
    assert [c.reason for c in changes][:2] == ["slow start", "slow start"]
    assert "rate-limit episode" in [c.reason for c in changes]
    # A later burst is a new episode.
    await gate.acquire(EP)
    gate.release(EP, 429, {}, None)
    assert gate.endpoint(EP).episodes == 2
    assert gate.limit(EP) == 10


async def test_bounds_hold() -> None:
    clock = Clock()
    gate = ConcurrencyController(AutoBounds(3, 4, 6), clock=clock)
    await _calls(gate, 4, 200, OK)
    await _calls(gate, 6, 200, OK)
    assert gate.limit(EP) == 6
    for _ in range(5):
        clock.now += 10
        await gate.acquire(EP)
        gate.release(EP, 429, {}, None)
    assert gate.limit(EP) == 3


async def test_server_errors_and_link_errors_do_not_move_it() -> None:
    gate = ConcurrencyController(AutoBounds(1, 4, 64), clock=Clock())
    await _calls(gate, 4, 500, OK)
    await _calls(gate, 2, 503, OK)
    await gate.acquire(EP)
    gate.release(EP, None, {}, "connection")
    assert gate.limit(EP) == 4
    assert gate.endpoint(EP).episodes == 0


async def test_no_growth_when_the_work_does_not_fill_the_limit() -> None:
    gate = ConcurrencyController(AutoBounds(1, 4, 64), saturated=lambda: False, clock=Clock())
    await _calls(gate, 4, 200, OK)
    assert gate.limit(EP) == 4


async def test_remaining_zero_steps_back_and_holds_for_one_request() -> None:
    clock = Clock()
    gate = ConcurrencyController(AutoBounds(1, 20, 64), clock=clock)
    edge = {"x-ratelimit-remaining-requests": "0", "x-ratelimit-limit-requests": "1200"}
    await gate.acquire(EP)
    clock.now += 0.5  # the call's round trip
    gate.release(EP, 200, edge, None)
    assert gate.limit(EP) == 19  # 20 * 0.95
    assert gate.endpoint(EP).hold_until == pytest.approx(clock.now + 0.05)
    assert not gate.endpoint(EP).slow_start
    clock.now += 0.06
    await _calls(gate, 1, 200, {"anthropic-ratelimit-requests-remaining": "0"})
    assert gate.limit(EP) == 19  # once per round trip


async def test_gate_bounds_calls_in_flight_first_come_first_in() -> None:
    gate = ConcurrencyController(2)
    order: list[int] = []

    async def call(i: int) -> None:
        await gate.acquire(EP)
        order.append(i)

    await call(0)
    await call(1)
    waiting = [asyncio.create_task(call(i)) for i in (2, 3)]
    await asyncio.sleep(0.05)
    assert order == [0, 1] and gate.in_flight() == 2
    gate.release(EP, 200, OK, None)
    await asyncio.sleep(0.01)
    assert order == [0, 1, 2]
    # A waiter cancelled gives its place to the next.
    gate.set(1)  # fixed 1: in flight 2 > 1, nothing more gets in
    gate.release(EP, 200, OK, None)
    gate.release(EP, 200, OK, None)
    await asyncio.sleep(0.01)
    assert order == [0, 1, 2, 3] and gate.in_flight() == 1
    await asyncio.gather(*waiting)


async def test_retry_after_holds_every_send() -> None:
    gate = ConcurrencyController(AutoBounds(1, 4, 64))
    await gate.acquire(EP)
    gate.release(EP, 429, {"retry-after-ms": "300"}, None)
    started = time.monotonic()
    await gate.acquire(EP)
    assert time.monotonic() - started >= 0.28


async def test_fixed_limit_follows_no_law_and_can_be_given_back_to_auto() -> None:
    clock = Clock()
    gate = ConcurrencyController(4, clock=clock)
    await _calls(gate, 4, 200, OK)
    await _calls(gate, 1, 429, {"retry-after-ms": "5000"})
    assert gate.limit(EP) == 4
    assert gate.endpoint(EP).hold_until == 0.0  # fixed: as before, no hold
    clock.now += 10  # past the episode
    gate.set(AutoBounds(1, 4, 64))
    await _calls(gate, 4, 200, OK)
    assert gate.limit(EP) == 8
    gate.set(2)
    assert gate.limit(EP) == 2


async def test_admission_pause_and_limit() -> None:
    limit = [2]
    admission = AttemptAdmission(lambda: limit[0])
    await admission.enter()
    await admission.enter()
    third = asyncio.create_task(admission.enter())
    await asyncio.sleep(0.05)
    assert not third.done()
    limit[0] = 3
    admission.changed()
    await asyncio.sleep(0.01)
    assert third.done()
    admission.pause(True)
    admission.leave()
    fourth = asyncio.create_task(admission.enter())
    await asyncio.sleep(0.3)
    assert not fourth.done()  # paused: nothing new starts
    admission.pause(False)
    await asyncio.sleep(0.01)
    assert fourth.done() and admission.running == 3


async def test_sends_are_paced_at_the_rate_the_provider_states() -> None:
    """limit-requests (per minute) is a pace: 1200/min lets a send through every ~51 ms."""
    gate = ConcurrencyController(AutoBounds(1, 8, 64))
    await gate.acquire(EP)
    gate.release(EP, 200, {"x-ratelimit-limit-requests": "1200"}, None)
    started = time.monotonic()
    for _ in range(6):
        await gate.acquire(EP)
        gate.release(EP, 200, {"x-ratelimit-limit-requests": "1200"}, None)
    # Two unused slots may be taken at once (a small burst), then one per 1/20 s / 0.98.
    assert time.monotonic() - started >= 3 * 0.05 - 0.005
    # Set to a fixed limit (ctl): the pace is the law's, not the fixed limit's.
    gate.set(8)
    started = time.monotonic()
    for _ in range(7):
        await gate.acquire(EP)
    assert time.monotonic() - started < 0.04
    # A fixed limit is not paced (as before auto existed).
    fixed = ConcurrencyController(8)
    fixed.release(EP, 200, {"x-ratelimit-limit-requests": "60"}, None)
    started = time.monotonic()
    for _ in range(5):
        await fixed.acquire(EP)
    assert time.monotonic() - started < 0.05


async def test_the_range_is_time_weighted() -> None:
    clock = Clock()
    gate = ConcurrencyController(AutoBounds(1, 4, 64), clock=clock)
    gate.endpoint(EP)
    clock.now += 1  # 1 s at 4
    await _calls(gate, 4, 200, OK)  # slow start to 8
    clock.now += 20  # 20 s at 8
    summary = gate.summary()
    assert (summary["low"], summary["high"]) == (8, 8)


async def test_a_fixed_limit_counts_its_rate_limit_episodes() -> None:
    clock = Clock()
    gate = ConcurrencyController(4, clock=clock)
    for _ in range(3):  # one burst: one episode
        await gate.acquire(EP)
    clock.now += 0.5
    for _ in range(3):
        gate.release(EP, 429, {}, None)
    clock.now += 10
    await _calls(gate, 1, 429, {})
    assert gate.summary()["episodes"] == 2 and gate.limit(EP) == 4
