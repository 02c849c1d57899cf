"""The sandbox plays a real rate limit (token buckets of requests/s and tokens/min per key,
429 with Retry-After past it, OpenAI's and Anthropic's rate-limit headers on every answer), and
its draws depend on (task, attempt, turn), not on the order requests arrive in (twins)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
import pytest

from driftdesk.reruns.proxy import attempt_header_value
from driftdesk.reruns.rate_limit import RateLimit, RateLimiter, openai_duration
from driftdesk.reruns.simulated_endpoint import ATTEMPT_HEADER, FaultRates, SandboxServer
from driftdesk.reruns.suites import load_suite

OPENAI_HEADERS = (
    "x-ratelimit-limit-requests",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-reset-requests",
)
ANTHROPIC_HEADERS = (
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
)


def _prompt(task_id: str) -> str:
    return next(t.prompt_text for t in load_suite("basic").tasks if t.task_id == task_id)


async def _chat(
    session: aiohttp.ClientSession,
    base_url: str,
    prompt: str,
    *,
    key: str = "k1",
    attempt: str | None = None,
) -> tuple[int, dict[str, str], dict[str, Any]]:
    headers = {"Authorization": f"Bearer {key}"}
    if attempt is not None:
        headers[ATTEMPT_HEADER] = attempt
    body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
    async with session.post(f"{base_url}/chat/completions", json=body, headers=headers) as resp:
        return resp.status, dict(resp.headers), await resp.json()


async def test_burst_then_429_with_retry_after_and_headers_on_every_answer() -> None:
    with SandboxServer(rate_limit=RateLimit(rps=20, burst=5)) as server:
        async with aiohttp.ClientSession() as session:
            answers = await asyncio.gather(
                *(_chat(session, server.base_url, "hello") for _ in range(12))
            )
            statuses = sorted(status for status, _, _ in answers)
            assert statuses.count(200) == 5, statuses  # the burst, and no more
            assert statuses.count(429) == 7
            for status, headers, _ in answers:
                for name in (*OPENAI_HEADERS, *ANTHROPIC_HEADERS):
                    assert name in headers, (status, name)
                assert headers["x-ratelimit-limit-requests"] == "1200"  # per minute, as OpenAI
                if status == 429:
                    assert int(headers["Retry-After"]) >= 1
                    assert 0 < int(headers["retry-after-ms"]) <= 50  # one request's room at 20/s
                    assert headers["x-ratelimit-remaining-requests"] == "0"
            # Another key has a bucket of its own.
            status, _, _ = await _chat(session, server.base_url, "hello", key="k2")
            assert status == 200
            # After the room Retry-After named, one fits again.
            await asyncio.sleep(0.06)
            status, headers, _ = await _chat(session, server.base_url, "hello")
            assert status == 200
            assert server.endpoint.limiter is not None
            assert server.endpoint.limiter.refused == 7


async def test_sustained_rate_is_the_limit() -> None:
    """Callers that honour retry-after-ms get the stated rate over time, no more."""
    with SandboxServer(rate_limit=RateLimit(rps=20, burst=5)) as server:
        async with aiohttp.ClientSession() as session:
            ok = 0
            start = time.monotonic()

            async def caller() -> None:
                nonlocal ok
                while time.monotonic() - start < 2.0:
                    status, headers, _ = await _chat(session, server.base_url, "hi")
                    if status == 200:
                        ok += 1
                    else:
                        await asyncio.sleep(int(headers["retry-after-ms"]) / 1000)

            await asyncio.gather(*(caller() for _ in range(8)))
            # 2 s at 20/s plus the burst of 5; a little slack for the clock at the edges.
            assert 40 <= ok <= 47, ok


def test_tokens_per_minute_bucket() -> None:
    now = [0.0]
    limiter = RateLimiter(RateLimit(tpm=600), clock=lambda: now[0])
    assert limiter.admit("k", 500).allowed
    refused = limiter.admit("k", 200)
    assert not refused.allowed
    assert refused.headers["x-ratelimit-remaining-tokens"] == "100"
    assert refused.retry_after_s == pytest.approx(10.0)  # 100 tokens at 10/s
    assert "anthropic-ratelimit-tokens-reset" in refused.headers
    now[0] = 10.0
    assert limiter.admit("k", 200).allowed


def test_bad_limits_are_refused() -> None:
    assert RateLimit(rps=0).problem() == "--rps must be positive"
    assert RateLimit(rps=1, burst=0).problem() == "--burst must be at least 1"
    assert RateLimit(tpm=0).problem() == "--tpm must be at least 1"
    assert openai_duration(0.25) == "250ms" and openai_duration(90) == "1m30s"


async def _answers_in_order(
    server: SandboxServer, order: list[tuple[str, int]], retry_faults: bool
) -> dict[tuple[str, int], str]:
    answers: dict[tuple[str, int], str] = {}
    async with aiohttp.ClientSession() as session:
        for task_id, attempt in order:
            while True:
                status, _, body = await _chat(
                    session,
                    server.base_url,
                    _prompt(task_id),
                    attempt=attempt_header_value(task_id, attempt, 0),
                )
                if status == 200 or not retry_faults:
                    break
            assert status == 200
            answers[(task_id, attempt)] = body["choices"][0]["message"]["content"]
    return answers


async def test_twins_draw_by_task_attempt_and_turn_not_arrival_order() -> None:
    """A run whose requests arrive in another order, and meet 429s and 500s on the way, gets
    the same answer per (task, attempt) as its fault-free twin."""
    tasks = ["arith-01", "arith-09", "format-06", "format-07"]
    slots = [(task, attempt) for attempt in range(12) for task in tasks]
    with SandboxServer(seed=5, suites=["basic"]) as plain:
        twin = await _answers_in_order(plain, slots, retry_faults=False)
    faults = FaultRates(rate_limit=0.3, server_error=0.2)
    with SandboxServer(seed=5, suites=["basic"], faults=faults) as faulty:
        shuffled = list(reversed(slots))
        other = await _answers_in_order(faulty, shuffled, retry_faults=True)
        assert faulty.stats.by_kind["rate_limit"] + faulty.stats.by_kind["server_error"] > 5
    assert other == twin
    assert len(set(twin.values())) > len(tasks)  # the draws do vary between attempts


def test_a_provider_that_states_no_rate_sends_only_retry_after() -> None:
    now = [0.0]
    limiter = RateLimiter(RateLimit(rps=1, burst=1, headers=False), clock=lambda: now[0])
    assert limiter.admit("k", 1).headers == {}
    refused = limiter.admit("k", 1)
    assert not refused.allowed and set(refused.headers) == {"retry-after-ms", "Retry-After"}


async def test_the_sandbox_cli_plays_the_limit_it_is_given() -> None:
    import subprocess
    import sys

    bad = subprocess.run(
        [sys.executable, "-m", "driftdesk", "sandbox", "--rps", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and bad.stderr.strip() == "driftdesk: --rps must be positive"
    served = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "sandbox", "--rps", "2", "--burst", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert served.stdout is not None
        base_url = served.stdout.readline().strip()
        async with aiohttp.ClientSession() as session:
            first = await _chat(session, base_url, "hello")
            second = await _chat(session, base_url, "hello")
        assert (first[0], second[0]) == (200, 429)
        assert first[1]["x-ratelimit-limit-requests"] == "120"
        assert int(second[1]["retry-after-ms"]) > 0
    finally:
        served.terminate()
        _, stderr = served.communicate(timeout=30)
    assert "rate limit per key: 2 requests/s (burst 1)" in stderr
