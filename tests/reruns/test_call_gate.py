"""The proxy's call gate (reruns/call_gate.py) and the attempt header, over real loopback HTTP:
acquire before every upstream model call, release once per acquire with the upstream's status
and headers (also when the agent hangs up), queueing kept out of the latency; ``/models`` and
injected faults never pass the gate; ``X-Driftdesk-Attempt`` goes to loopback upstreams only."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer, read_rows

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.injection import FaultInjector, parse_inject
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.proxy_http import ATTEMPT_HEADER, is_loopback_url

REAL = "sk-REALKEY-gate-0123456789abcdef"


class Provider(LoopbackServer):
    def __init__(self) -> None:
        super().__init__()
        self.attempt_headers: list[str | None] = []
        self.hold = asyncio.Event()
        self.hold.set()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_post("/v1/limited/chat/completions", self.limited)
        app.router.add_get("/v1/models", self.models)

    async def chat(self, request: web.Request) -> web.Response:
        self.attempt_headers.append(request.headers.get(ATTEMPT_HEADER))
        await self.hold.wait()
        usage = {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}
        return web.json_response(
            {"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}], "usage": usage},
            headers={"x-ratelimit-remaining-requests": "17"},
        )

    async def limited(self, request: web.Request) -> web.Response:
        return web.json_response(
            {"error": {"message": "slow down", "type": "rate_limit"}},
            status=429,
            headers={"Retry-After": "40", "x-ratelimit-remaining-requests": "0"},
        )

    async def models(self, request: web.Request) -> web.Response:
        return web.json_response({"data": []})


class RecordingGate:
    """A gate of one slot that records what the proxy tells it."""

    def __init__(self) -> None:
        self.slot = asyncio.Semaphore(1)
        self.acquired = 0
        self.released: list[tuple[str, int | None, dict[str, str], str | None]] = []

    async def acquire(self, endpoint: str) -> None:
        await self.slot.acquire()
        self.acquired += 1

    def release(
        self, endpoint: str, status: int | None, headers: Mapping[str, str], error_kind: str | None
    ) -> None:
        self.released.append((endpoint, status, dict(headers), error_kind))
        self.slot.release()


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    server = Provider()
    await server.start()
    yield server
    await server.stop()


async def _proxy(
    provider: Provider, tmp_path: Path, gate: Any, inject: str | None = None
) -> MeteringProxy:
    spec = parse_inject(inject)
    proxy = MeteringProxy(
        run_id="run-gate",
        upstream_base_url=provider.url + "/v1",
        protocol="openai",
        real_key=REAL,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
        call_gate=gate,
        injector=FaultInjector(spec, 7, hang_s=1.0) if spec is not None else None,
    )
    await proxy.start()
    return proxy


async def _post(session: aiohttp.ClientSession, url: str, key: str) -> int:
    async with session.post(
        url, json={"model": "m", "messages": []}, headers={"Authorization": f"Bearer {key}"}
    ) as response:
        await response.read()
        return response.status


async def test_gate_holds_upstream_calls_and_hears_how_each_ended(
    provider: Provider, tmp_path: Path
) -> None:
    gate = RecordingGate()
    proxy = await _proxy(provider, tmp_path, gate)
    token = proxy.open_attempt("suite/task one", 2)
    base = proxy.base_url_for(token)
    try:
        async with aiohttp.ClientSession() as session:
            provider.hold.clear()
            first = asyncio.create_task(_post(session, base + "/chat/completions", proxy.run_key))
            await asyncio.sleep(0.2)
            second = asyncio.create_task(_post(session, base + "/chat/completions", proxy.run_key))
            await asyncio.sleep(0.4)
            # One slot: the second call waits at the proxy, the provider has seen one.
            assert len(provider.attempt_headers) == 1
            provider.hold.set()
            assert await first == 200 and await second == 200
            async with session.get(
                base + "/models", headers={"Authorization": f"Bearer {proxy.run_key}"}
            ) as listed:
                assert listed.status == 200
        await proxy.settle(token)
    finally:
        proxy.close_attempt(token)
        await proxy.stop()
    assert gate.acquired == 2 and len(gate.released) == 2  # /models never passes the gate
    endpoint, status, headers, kind = gate.released[0]
    assert (endpoint, status, kind) == (provider.url + "/v1", 200, None)
    assert headers["x-ratelimit-remaining-requests"] == "17"
    assert provider.attempt_headers == ["suite%2Ftask%20one/2/1"] * 2
    rows = [r for r in read_rows(tmp_path / "calls.jsonl") if r["path"].endswith("completions")]
    waits = sorted(r["queue_wait_s"] for r in rows)
    assert waits[0] < 0.1 and waits[1] >= 0.3  # the second queued behind the first
    queued = max(rows, key=lambda r: r["queue_wait_s"])
    # Queueing is not the model's latency.
    assert queued["latency_ms"] < queued["queue_wait_s"] * 1000


async def test_gate_is_released_with_the_limit_headers_and_on_hang_up(
    provider: Provider, tmp_path: Path
) -> None:
    gate = RecordingGate()
    proxy = await _proxy(provider, tmp_path, gate)
    token = proxy.open_attempt("t", 0)
    base = proxy.base_url_for(token)
    try:
        async with aiohttp.ClientSession() as session:
            assert (
                await _post(
                    session, proxy.url + f"/a/{token}/limited/chat/completions", proxy.run_key
                )
                == 429
            )
            provider.hold.clear()
            hung = asyncio.create_task(_post(session, base + "/chat/completions", proxy.run_key))
            await asyncio.sleep(0.3)
            hung.cancel()  # the agent gives up while the provider still thinks
            with pytest.raises(asyncio.CancelledError):
                await hung
            await proxy.settle(token)
            provider.hold.set()
            # The slot came back: a next call is let through.
            assert await _post(session, base + "/chat/completions", proxy.run_key) == 200
    finally:
        proxy.close_attempt(token)
        await proxy.stop()
    assert gate.acquired == 3 and len(gate.released) == 3
    _, status, headers, kind = gate.released[0]
    assert (status, kind, headers["Retry-After"]) == (429, "429", "40")
    assert gate.released[1][3] == "client_closed"


async def test_injected_faults_never_pass_the_gate(provider: Provider, tmp_path: Path) -> None:
    gate = RecordingGate()
    proxy = await _proxy(provider, tmp_path, gate, inject="429=100%")
    token = proxy.open_attempt("t", 0)
    try:
        async with aiohttp.ClientSession() as session:
            status = await _post(
                session, proxy.base_url_for(token) + "/chat/completions", proxy.run_key
            )
    finally:
        proxy.close_attempt(token)
        await proxy.stop()
    assert status == 429
    assert gate.acquired == 0 and gate.released == []
    assert provider.attempt_headers == []


def test_the_attempt_header_goes_to_loopback_upstreams_only() -> None:
    assert is_loopback_url("http://127.0.0.1:8080/v1")
    assert is_loopback_url("http://127.3.4.5/v1")
    assert is_loopback_url("http://[::1]:9/v1")
    assert is_loopback_url("http://localhost:9/v1")
    assert not is_loopback_url("https://api.openai.com/v1")
    assert not is_loopback_url("http://10.0.0.2/v1")
    assert not is_loopback_url("http://localhost.evil.example/v1")


async def test_a_real_provider_never_sees_the_attempt_header(tmp_path: Path) -> None:
    proxy = MeteringProxy(
        run_id="r", upstream_base_url="https://api.example.com/v1", protocol="openai", real_key=REAL
    )
    token = proxy.open_attempt("t", 0)

    # A harness's own header of that name is dropped too (it cannot pose as another try).
    request = SimpleNamespace(
        headers={ATTEMPT_HEADER: "forged/1/1", "Content-Type": "application/json"}
    )
    headers = proxy._upstream_headers(request, proxy.attempt_calls(token))  # type: ignore[arg-type]
    assert ATTEMPT_HEADER.lower() not in {k.lower() for k in headers}
