"""The metering proxy over real loopback HTTP: auth, key injection, unbuffered SSE, usage."""

from __future__ import annotations

import asyncio
import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer, read_rows

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.proxy import MeteringProxy

REAL = "sk-ant-REALKEY-proxy-0123456789"


class Upstream(LoopbackServer):
    """Records what it receives; streams SSE in steps the test controls."""

    def __init__(self) -> None:
        super().__init__()
        self.seen_headers: list[dict[str, str]] = []
        self.seen_paths: list[str] = []
        self.release = asyncio.Event()

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/json", self.json_body)
        app.router.add_post("/v1/echo/{variant}", self.echo_error)

    def _seen(self, request: web.Request) -> None:
        self.seen_headers.append(dict(request.headers))
        self.seen_paths.append(request.path_qs)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        """Anthropic-style SSE: usage in message_start and message_delta."""
        self._seen(request)
        response = web.StreamResponse()
        response.content_type = "text/event-stream"
        await response.prepare(request)

        async def event(name: str, data: dict[str, Any]) -> None:
            await response.write(f"event: {name}\ndata: {json.dumps(data)}\n\n".encode())

        await event(
            "message_start",
            {
                "type": "message_start",
                "message": {"usage": {"input_tokens": 25, "output_tokens": 1}},
            },
        )
        # Held until the client has seen the first event: proves the proxy does not buffer.
        await asyncio.wait_for(self.release.wait(), 5)
        await event("content_block_delta", {"type": "content_block_delta", "delta": {"text": "hi"}})
        await event("message_delta", {"type": "message_delta", "usage": {"output_tokens": 9}})
        await event("message_stop", {"type": "message_stop"})
        await response.write_eof()
        return response

    async def echo_error(self, request: web.Request) -> web.Response:
        """A careless provider: its error echoes the credentials it received."""
        self._seen(request)
        received = request.headers.get("Authorization", "") + request.headers.get("x-api-key", "")
        variant = request.match_info["variant"]
        message = f"Incorrect API key provided: {received}"
        if variant == "quota":
            body = b'data: {"error": {"code": "insufficient_quota", "message": "%s"}}\n\n' % (
                message.encode()
            )
            return web.Response(
                status=429, body=body, headers={"Content-Type": "text/event-stream"}
            )
        body = json.dumps({"error": {"message": message, "code": "invalid_api_key"}}).encode()
        headers = {"x-echo": received, "Content-Type": "application/json"}
        if variant == "streamed":
            headers["Content-Type"] = "text/event-stream"
        elif variant == "gzip":
            body = gzip.compress(body)
            headers["Content-Encoding"] = "gzip"
        elif variant == "cut":
            # The key straddles the proxy's 64 KiB bound: its start must not get through.
            padding = 64 * 1024 - len('{"m": "') - 20
            body = ('{"m": "' + "x" * padding + received + '"}').encode()
        return web.Response(status=401, body=body, headers=headers)

    async def json_body(self, request: web.Request) -> web.Response:
        self._seen(request)
        usage = {"prompt_tokens": 7, "completion_tokens": 5, "total_tokens": 12}
        return web.json_response({"choices": [], "usage": usage})


@pytest.fixture
async def upstream() -> AsyncIterator[Upstream]:
    server = Upstream()
    await server.start()
    yield server
    await server.stop()


async def _proxy(upstream: Upstream, protocol: str, tmp_path: Path) -> MeteringProxy:
    proxy = MeteringProxy(
        run_id="run-1",
        upstream_base_url=upstream.url,
        protocol=protocol,
        real_key=REAL,
        extra_headers={"X-Profile-Header": "yes"},
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
    )
    await proxy.start()
    return proxy


async def test_anthropic_stream_passes_through_unbuffered_with_usage(
    upstream: Upstream, tmp_path: Path
) -> None:
    proxy = await _proxy(upstream, "anthropic", tmp_path)
    token = proxy.open_attempt("task-a", 2)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                proxy.base_url_for(token) + "/v1/messages?beta=true",
                json={"stream": True},
                headers={"x-api-key": proxy.run_key, "anthropic-version": "2023-06-01"},
            ) as response,
        ):
            assert response.status == 200
            first = await asyncio.wait_for(response.content.readuntil(b"\n\n"), 5)
            assert b"message_start" in first  # arrived while the upstream still holds the rest
            upstream.release.set()
            rest = await response.content.read()
            assert b"message_stop" in rest
        await proxy.settle(token)
    finally:
        await proxy.stop()
    headers = {k.lower(): v for k, v in upstream.seen_headers[0].items()}
    assert headers["x-api-key"] == REAL  # the real key was injected
    assert headers["x-profile-header"] == "yes" and headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in headers
    assert upstream.seen_paths == ["/v1/messages?beta=true"]
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert call["task_id"] == "task-a" and call["attempt"] == 2 and call["call_index"] == 0
    assert call["streamed"] is True and call["status"] == 200 and call["error_kind"] is None
    assert (call["prompt_tokens"], call["completion_tokens"], call["total_tokens"]) == (25, 9, 34)
    assert call["path"] == "/v1/messages"
    assert REAL not in (tmp_path / "calls.jsonl").read_text()


async def test_openai_json_usage_and_bearer_injection(upstream: Upstream, tmp_path: Path) -> None:
    proxy = await _proxy(upstream, "openai", tmp_path)
    token = proxy.open_attempt("t", 0)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                proxy.base_url_for(token) + "/v1/json",
                json={},
                headers={"Authorization": f"Bearer {proxy.run_key}"},
            ) as response,
        ):
            assert (await response.json())["usage"]["total_tokens"] == 12
        await proxy.settle(token)
    finally:
        await proxy.stop()
    assert upstream.seen_headers[0]["Authorization"] == f"Bearer {REAL}"
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert (call["prompt_tokens"], call["completion_tokens"], call["streamed"]) == (7, 5, False)


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer sk-guess"}, {"x-api-key": REAL}],
    ids=["no-key", "wrong-key", "even-the-real-key"],
)
async def test_requests_without_the_run_token_are_refused(
    upstream: Upstream, tmp_path: Path, headers: dict[str, str]
) -> None:
    proxy = await _proxy(upstream, "openai", tmp_path)
    token = proxy.open_attempt("t", 0)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(proxy.base_url_for(token) + "/v1/json", json={}, headers=headers) as r,
        ):
            assert r.status == 401
            body = await r.json()
    finally:
        await proxy.stop()
    assert "run's token" in body["error"]["message"]
    assert upstream.seen_headers == []  # nothing was forwarded


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
@pytest.mark.parametrize("variant", ["plain", "streamed", "gzip", "cut"])
async def test_error_responses_reach_the_agent_without_the_real_key(
    upstream: Upstream, tmp_path: Path, protocol: str, variant: str
) -> None:
    proxy = await _proxy(upstream, protocol, tmp_path)
    token = proxy.open_attempt("t", 0)
    try:
        async with (
            aiohttp.ClientSession(auto_decompress=False) as session,
            session.post(
                proxy.base_url_for(token) + f"/v1/echo/{variant}",
                json={},
                headers={"Authorization": f"Bearer {proxy.run_key}"},
            ) as response,
        ):
            status = response.status
            seen = (await response.read()).decode("utf-8", "replace")
            seen += json.dumps(dict(response.headers)) + (response.reason or "")
        await proxy.settle(token)
    finally:
        await proxy.stop()
    # The upstream did receive (and echo) the real key: the scrubbing is what keeps it out.
    assert REAL in json.dumps(upstream.seen_headers)
    assert status == 401
    assert REAL not in seen and REAL[:12] not in seen, seen[-300:]
    if variant != "cut":
        assert "Incorrect API key provided" in seen  # the provider's message still arrives
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert (call["status"], call["error_kind"]) == (401, "401")
    assert REAL not in (tmp_path / "calls.jsonl").read_text()


async def test_a_streamed_429_insufficient_quota_is_recognised(
    upstream: Upstream, tmp_path: Path
) -> None:
    proxy = await _proxy(upstream, "openai", tmp_path)
    token = proxy.open_attempt("t", 0)
    try:
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                proxy.base_url_for(token) + "/v1/echo/quota",
                json={"stream": True},
                headers={"Authorization": f"Bearer {proxy.run_key}"},
            ) as response,
        ):
            assert response.status == 429
            body = await response.text()
        await proxy.settle(token)
    finally:
        await proxy.stop()
    assert "insufficient_quota" in body and REAL not in body
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert (call["status"], call["error_kind"]) == (429, "insufficient_quota")


@pytest.mark.parametrize("protocol", ["openai", "anthropic"])
async def test_the_run_key_never_reaches_the_upstream(
    upstream: Upstream, tmp_path: Path, protocol: str
) -> None:
    proxy = await _proxy(upstream, protocol, tmp_path)
    token = proxy.open_attempt("t", 0)
    try:
        async with aiohttp.ClientSession() as session:
            # Both header forms at once, and each alone.
            for headers in (
                {"Authorization": f"Bearer {proxy.run_key}", "x-api-key": proxy.run_key},
                {"Authorization": f"Bearer {proxy.run_key}"},
                {"x-api-key": proxy.run_key},
            ):
                async with session.post(
                    proxy.base_url_for(token) + "/v1/json", json={}, headers=headers
                ) as response:
                    assert response.status == 200
        await proxy.settle(token)
    finally:
        await proxy.stop()
    assert len(upstream.seen_headers) == 3
    for seen in upstream.seen_headers:
        lowered = {k.lower(): v for k, v in seen.items()}
        assert proxy.run_key not in json.dumps(seen)
        credential = lowered.get("x-api-key") or lowered.get("authorization")
        assert credential in (REAL, f"Bearer {REAL}")
