"""Which status of an attempt's last call is a link failure, at the edges of the 5xx range
that mutation testing found unguarded (tests/mutants): a real provider over loopback answers
each status, the metering proxy records the call, and the verdict is read from its record."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.call_verdicts import (
    call_figures,
    link_failure_verdict,
    unrecovered_link_failure,
)
from driftdesk.reruns.proxy import MeteringProxy

KEY = "gw_Live/Key-edges-0123456789abcdef"


class StatusProvider(LoopbackServer):
    """Answers ``/v1/status/<code>`` with that status: an answer for 200, else an error."""

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/status/{code}", self.answer)

    async def answer(self, request: web.Request) -> web.Response:
        code = int(request.match_info["code"])
        if code == 200:
            return web.json_response({"model": "m", "choices": [{"message": {"content": "42"}}]})
        return web.json_response({"error": {"message": f"status {code}"}}, status=code)


@pytest.fixture
async def proxy(tmp_path: Path) -> AsyncIterator[MeteringProxy]:
    provider = StatusProvider()
    await provider.start()
    meter = MeteringProxy(
        run_id="r",
        upstream_base_url=provider.url + "/v1",
        protocol="openai",
        real_key=KEY,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
        max_body_bytes=1024 * 1024,
    )
    await meter.start()
    yield meter
    await meter.stop()
    await provider.stop()


async def _calls_ending_in(proxy: MeteringProxy, *codes: int) -> list[dict[str, Any]]:
    """One attempt's calls, one per status, in order; what the proxy recorded of them."""
    token = proxy.open_attempt("t", 0)
    async with aiohttp.ClientSession() as session:
        for code in codes:
            async with session.post(
                f"{proxy.base_url_for(token)}/status/{code}",
                json={"model": "m"},
                headers={"Authorization": f"Bearer {proxy.run_key}"},
            ) as response:
                assert response.status == code
                await response.read()
    calls = list((await proxy.settle(token)).calls)
    proxy.close_attempt(token)
    assert [c["error_kind"] for c in calls] == [None if c == 200 else str(c) for c in codes]
    return calls


@pytest.mark.parametrize("code", [500, 503, 599])
async def test_a_last_call_in_the_5xx_range_is_a_link_failure(
    proxy: MeteringProxy, code: int
) -> None:
    calls = await _calls_ending_in(proxy, 200, code)
    assert unrecovered_link_failure(calls) is calls[-1]
    verdict = link_failure_verdict("pass", calls)
    assert verdict is not None and verdict[0] == str(code)
    assert verdict[1] == (
        f"the attempt's last provider call /status/{code} failed ({code}); "
        "the harness reported pass on a broken link"
    )
    failed = link_failure_verdict("fail", calls)  # a fail through it is a link error too
    assert failed is not None and failed[1].endswith("the harness reported fail on a broken link")
    assert link_failure_verdict("harness_error", calls) is None  # not a judged outcome


@pytest.mark.parametrize("code", [400, 422, 499, 600])
async def test_a_last_call_just_outside_it_is_the_harness_request(
    proxy: MeteringProxy, code: int
) -> None:
    # 4xx (but 401, 403, 404, 408 and 429) is a request the provider refused: the harness's
    # own doing, and its verdict stands.
    calls = await _calls_ending_in(proxy, 503, code)
    assert unrecovered_link_failure(calls) is None
    assert link_failure_verdict("fail", calls) is None


async def test_a_5xx_recovered_by_a_later_call_is_no_link_failure(proxy: MeteringProxy) -> None:
    calls = await _calls_ending_in(proxy, 500, 599, 200)
    assert unrecovered_link_failure(calls) is None
    assert link_failure_verdict("pass", calls) is None
    assert unrecovered_link_failure([]) is None


async def test_the_model_latency_is_the_sum_of_the_calls_to_the_microsecond(
    proxy: MeteringProxy,
) -> None:
    calls = await _calls_ending_in(proxy, 200, 500, 200)
    latencies = [float(c["latency_ms"]) for c in calls]
    assert all(ms > 0 for ms in latencies)
    figures = call_figures(calls)
    assert figures == {"model_mismatches": 0, "model_latency_ms": round(sum(latencies), 3)}
    # A call with no latency recorded adds nothing.
    assert call_figures([*calls, {"latency_ms": None}]) == figures
