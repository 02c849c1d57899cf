"""``--link-faults absorb`` at the proxy, over real loopback HTTP against a provider that plays
an exact sequence of faults: what is held and sent again (429 with Retry-After, 5xx, a dropped
connection, no first byte), what surfaces (a fault after the first byte, a spent budget, a
Retry-After past the cap, insufficient_quota), the rows each leaves, and the gate's view."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer, read_rows

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.call_verdicts import call_figures, unrecovered_link_failure
from driftdesk.reruns.injection import FaultInjector, parse_inject
from driftdesk.reruns.link_absorb import AbsorbPolicy
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.retry import RetryPolicy

REAL = "sk-REALKEY-absorb-0123456789abcdef"
ANSWER = {
    "choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
}


class ScriptedProvider(LoopbackServer):
    """Answers each request with the next step of ``script``; then with a whole answer.

    Steps: ``"429:<retry-after>"``, ``"500"``, ``"drop"`` (closes the connection unanswered),
    ``"hang"`` (no byte for 5 s), ``"cut"`` (a stream cut after its first event),
    ``"quota"`` (429 insufficient_quota), ``"ok"``."""

    handler_cancellation = True

    def __init__(self) -> None:
        super().__init__()
        self.script: list[str] = []
        self.received = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.chat)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        self.received += 1
        step = self.script.pop(0) if self.script else "ok"
        auth = request.headers.get("Authorization", "")
        if step.startswith("429"):
            _, _, after = step.partition(":")
            body = {"error": {"message": f"rate limited for {auth}", "type": "rate_limit"}}
            return web.json_response(body, status=429, headers={"Retry-After": after or "0.1"})
        if step == "quota":
            body = {"error": {"code": "insufficient_quota", "message": "no credit"}}
            return web.json_response(body, status=429)
        if step == "500":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        if step == "drop":
            assert request.transport is not None
            request.transport.close()
            return web.Response()
        if step == "hang":
            await asyncio.sleep(5)
        if step == "cut":
            response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            chunk = {"choices": [{"delta": {"content": "o"}, "index": 0}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            assert request.transport is not None
            request.transport.close()
            return response
        return web.json_response(ANSWER)


class CountingGate:
    def __init__(self) -> None:
        self.acquired = 0
        self.released: list[tuple[int | None, str | None]] = []

    async def acquire(self, endpoint: str) -> None:
        self.acquired += 1

    def release(
        self, endpoint: str, status: int | None, headers: Mapping[str, str], error_kind: str | None
    ) -> None:
        self.released.append((status, error_kind))


@pytest.fixture
async def provider() -> AsyncIterator[ScriptedProvider]:
    server = ScriptedProvider()
    await server.start()
    yield server
    await server.stop()


class Absorbing:
    """A proxy that absorbs, its calls file, and one open try."""

    def __init__(self, proxy: MeteringProxy, token: str, calls_path: Path) -> None:
        self.proxy, self.token, self.calls_path = proxy, token, calls_path

    async def ask(self, timeout_s: float = 20) -> tuple[int, bytes]:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as session,
            session.post(
                self.proxy.base_url_for(self.token) + "/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                headers={"Authorization": f"Bearer {self.proxy.run_key}"},
            ) as response,
        ):
            return response.status, await response.read()

    def rows(self) -> list[dict[str, Any]]:
        return read_rows(self.calls_path)


@pytest.fixture
async def absorbing(provider: ScriptedProvider, tmp_path: Path) -> AsyncIterator[Any]:
    made: list[MeteringProxy] = []

    async def make(
        try_timeout_s: float = 30.0,
        max_delay_s: float = 5.0,
        inject: str | None = None,
        gate: Any = None,
    ) -> Absorbing:
        spec = parse_inject(inject)
        proxy = MeteringProxy(
            run_id="run-absorb",
            upstream_base_url=provider.url + "/v1",
            protocol="openai",
            real_key=REAL,
            calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
            injector=FaultInjector(spec, 3, hang_s=60.0) if spec is not None else None,
            call_gate=gate,
            absorb=AbsorbPolicy(
                RetryPolicy(base_delay_s=0.05, max_delay_s=max_delay_s),
                try_timeout_s=try_timeout_s,
                first_byte_timeout_s=0.4,
            ),
        )
        await proxy.start()
        made.append(proxy)
        return Absorbing(proxy, proxy.open_attempt("task-1", 0), tmp_path / "calls.jsonl")

    yield make
    for proxy in made:
        await proxy.stop()


async def test_faults_before_the_first_byte_are_held_and_the_call_sent_again(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    gate = CountingGate()
    run = await absorbing(gate=gate)
    provider.script = ["429:0.3", "500", "drop", "hang"]
    status, body = await run.ask()
    assert status == 200 and json.loads(body) == ANSWER  # the client saw only the answer
    assert provider.received == 5
    rows = run.rows()
    assert [(r["error_kind"], r["absorbed"]) for r in rows] == [
        ("429", True),
        ("500", True),
        ("connection", True),
        ("timeout", True),
        (None, False),
    ]
    assert [r["call_index"] for r in rows] == [0, 1, 2, 3, 4]
    assert {r["try"] for r in rows} == {1}
    assert rows[0]["wait_s"] == pytest.approx(0.3)  # Retry-After honoured
    assert all(r["wait_s"] > 0 for r in rows[:4]) and rows[4]["wait_s"] is None
    # The wait is not the model's latency; the answer's row is the answer's exchange alone.
    assert rows[4]["latency_ms"] < 300
    figures = call_figures(rows)
    assert figures["absorbed_faults"] == 4
    assert figures["absorbed_wait_s"] == pytest.approx(sum(r["wait_s"] for r in rows[:4]))
    assert figures["model_latency_ms"] == rows[4]["latency_ms"]  # absorbed exchanges left out
    assert unrecovered_link_failure(rows) is None
    # Every send passed the gate, and each told it how it ended.
    assert gate.acquired == 5
    assert gate.released == [
        (429, "429"),
        (500, "500"),
        (None, "connection"),
        (None, "timeout"),
        (200, None),
    ]


async def test_a_fault_after_the_first_byte_surfaces(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    run = await absorbing()
    provider.script = ["cut"]
    with pytest.raises(aiohttp.ClientPayloadError):
        await run.ask()
    await run.proxy.settle(run.token)
    rows = run.rows()
    assert provider.received == 1
    assert [(r["error_kind"], r["absorbed"]) for r in rows] == [("truncated", False)]
    assert unrecovered_link_failure(rows) is not None  # the try is judged a link error


async def test_a_spent_budget_lets_the_client_see_the_fault(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    # Waits must end inside 3/4 of a 2 s try: about three 0.4 s holds, then the 429 surfaces.
    run = await absorbing(try_timeout_s=2.0)
    provider.script = ["429:0.4"] * 20
    status, _ = await run.ask()
    assert status == 429
    rows = run.rows()
    absorbed = [r for r in rows if r["absorbed"]]
    assert 2 <= len(absorbed) <= 4
    assert rows[-1]["absorbed"] is False and rows[-1]["error_kind"] == "429"
    assert unrecovered_link_failure(rows) is rows[-1]  # retried as a whole try, as today
    assert call_figures(rows)["absorbed_faults"] == len(absorbed)


async def test_a_retry_after_past_the_cap_and_a_spent_quota_are_not_held(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    run = await absorbing(max_delay_s=1.0)
    provider.script = ["429:30"]
    assert (await run.ask())[0] == 429
    provider.script = ["quota"]
    assert (await run.ask())[0] == 429
    assert [(r["error_kind"], r["absorbed"]) for r in run.rows()] == [
        ("429", False),
        ("insufficient_quota", False),
    ]
    assert provider.received == 2


async def test_injected_faults_are_absorbed_the_same_way(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    gate = CountingGate()
    run = await absorbing(inject="429=30%:0.05s,500=20%,drop=10%", gate=gate)
    for _ in range(12):
        status, body = await run.ask()
        assert status == 200 and json.loads(body) == ANSWER
    rows = run.rows()
    absorbed = [r for r in rows if r["absorbed"]]
    assert absorbed and all(r["injected"] in ("429", "500", "drop") for r in absorbed)
    assert all(r["injected"] is None for r in rows if not r["absorbed"])
    assert provider.received == 12  # injected faults never reach the provider
    assert gate.acquired == 12  # nor pass the gate


async def test_the_agent_hanging_up_during_a_hold_leaves_the_fault_recorded(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    run = await absorbing()
    provider.script = ["429:3"]
    with pytest.raises(TimeoutError):
        await run.ask(timeout_s=0.5)
    await run.proxy.settle(run.token)
    await asyncio.sleep(0.2)
    rows = run.rows()
    assert [(r["error_kind"], r["absorbed"], r["wait_s"]) for r in rows] == [("429", True, 3.0)]
    assert provider.received == 1  # not sent again for an agent that left


async def test_no_key_in_any_row(provider: ScriptedProvider, absorbing: Any) -> None:
    run = await absorbing()
    provider.script = ["429:0.05", "500", "429:0.05"]
    assert (await run.ask())[0] == 200
    text = run.calls_path.read_text()
    assert REAL not in text and run.proxy.run_key not in text
    assert len(run.rows()) == 4


async def test_a_call_is_sent_again_a_bounded_number_of_times(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    from driftdesk.reruns.link_absorb import MAX_RESENDS

    run = await absorbing()
    provider.script = ["429:0.001"] * 50  # a provider that keeps refusing, asking for no wait
    assert (await run.ask())[0] == 429
    assert provider.received == 1 + MAX_RESENDS
    assert [r["absorbed"] for r in run.rows()] == [True] * MAX_RESENDS + [False]


async def test_an_injected_hang_is_given_up_at_the_first_byte_timeout_and_sent_again(
    provider: ScriptedProvider, absorbing: Any
) -> None:
    # The injector's hang would last 60 s; absorbing gives up after the first-byte timeout.
    run = await absorbing(inject="timeout=50%")
    for _ in range(4):
        status, body = await run.ask(timeout_s=15)
        assert status == 200 and json.loads(body) == ANSWER
    hangs = [r for r in run.rows() if r["injected"] == "timeout"]
    assert hangs and all(r["absorbed"] and r["error_kind"] == "timeout" for r in hangs)
    assert all(350 <= r["latency_ms"] < 2000 for r in hangs)  # 0.4 s, not 60
