"""A 429 whose Retry-After is past the cap is not waited out retry after retry: the run gives
up on that attempt at once and says why. A hostile upstream on loopback, the real CLI."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web

from driftdesk.providers.profiles import Profile, ProfileStore


@pytest.fixture
def stubborn_upstream() -> Iterator[tuple[str, list[str]]]:
    """Every request: 429 with ``Retry-After: 1e9`` (come back in 31 years)."""
    seen: list[str] = []

    async def refuse(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response(
            {"error": {"message": "slow down", "type": "rate_limit_exceeded"}},
            status=429,
            headers={"Retry-After": "1e9"},
        )

    loop = asyncio.new_event_loop()
    ready = threading.Event()
    holder: dict[str, object] = {}

    async def start() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", refuse)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        holder["runner"] = runner
        holder["port"] = runner.addresses[0][1]

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    assert ready.wait(10)
    yield f"http://127.0.0.1:{holder['port']}/v1", seen
    runner = holder["runner"]
    assert isinstance(runner, web.AppRunner)
    asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)


def test_a_retry_after_past_the_cap_gives_up_at_once_and_says_why(
    home: object, tmp_path: Path, cli: object, stubborn_upstream: tuple[str, list[str]]
) -> None:
    """Seen: 'Retry-After: 1e9' was capped at 30 s and waited out four times (~123 s) before
    the attempt gave up with the same 429."""
    base_url, seen = stubborn_upstream
    ProfileStore().save(
        Profile(name="slow", protocol="openai", base_url=base_url, model="m", no_key=True)
    )
    suite = tmp_path / "suite.jsonl"
    suite.write_text(
        json.dumps({"task_id": "t", "prompt": "hi", "expected": {"equals": "x"}}) + "\n"
    )
    started = time.monotonic()
    done = cli(  # type: ignore[operator]
        "run", "--profile", "slow", "--suite", str(suite), "--repeat", "1", "--no-probe",
        "--out", str(tmp_path / "runs"), timeout=90,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert elapsed < 30, elapsed
    (run,) = (tmp_path / "runs").iterdir()
    (row,) = [json.loads(line) for line in (run / "attempts.jsonl").read_text().splitlines()]
    assert (row["outcome"], row["error_code"], row["retries"]) == ("link_error", "429", 0)
    log = "\n".join(p.read_text() for p in run.rglob("*.log"))
    assert "Retry-After" in log and "over the 30s cap" in log and "not retried" in log
    assert len(seen) >= 1
    assert done.returncode == 3, done.stderr  # every attempt a link error


def test_run_help_states_the_retry_after_cap(cli: object) -> None:  # type: ignore[no-untyped-def]
    text = " ".join(cli("run", "--help").stdout.split())  # type: ignore[operator]
    assert "default: 30 or the --timeout, whichever is less" in text
