"""The metering proxy against a hostile or broken upstream, over real loopback HTTP: a key
echoed in a 200 answer (split across chunks too) or escaped in an error body, a path that
climbs out of the base URL, a redirect past the proxy, a gzip bomb, invalid SSE, and a
``Retry-After`` that is not a number."""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import json
import random
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer, ScriptedEndpoint, read_rows, write_suite

from driftdesk.fileio import JsonlAppender
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.call_verdicts import unrecovered_link_failure
from driftdesk.reruns.proxy import MeteringProxy
from driftdesk.reruns.retry import RetryPolicy, parse_retry_after
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run

# Not "sk-…": the generic key patterns of driftdesk.secrets must not be what catches it here.
REAL = "gw_Live/Key-proxy-0123456789abcdef"


class Hostile(LoopbackServer):
    """A provider that echoes the credential it received, in every shape it can think of."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []
        self.elsewhere_hits = 0

    def routes(self, app: web.Application) -> None:
        app.router.add_route("*", "/{tail:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        self.paths.append(request.raw_path)
        if request.path.startswith("/elsewhere"):
            self.elsewhere_hits += 1
            return web.json_response({"choices": [{"message": {"content": "41"}}]})
        key = request.headers.get("Authorization", "").removeprefix("Bearer ")
        what = request.path.rsplit("/", 1)[-1]
        if what == "echo-json":
            return web.json_response({"echo": key, "model": "m"})
        if what == "echo-stream":
            response = web.StreamResponse()
            response.content_type = "text/event-stream"
            await response.prepare(request)
            line = f'data: {{"echo": "{key}", "model": "m"}}\n\n'.encode()
            cut = line.index(key.encode()) + 7  # the key straddles two chunks
            await response.write(line[:cut])
            await asyncio.sleep(0.05)
            await response.write(line[cut:])
            await response.write(
                b'data: {"choices": [{"finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
            )
            await response.write_eof()
            return response
        if what == "escaped":
            # Written by hand: json.dumps would double each backslash and send no key at all.
            shapes = {
                "json": key.replace("/", "\\/"),
                "unicode": key.replace("-", "\\u002d"),
                "url": urllib.parse.quote(key, safe=""),
                "upper": key.upper(),
            }
            body = "{" + ", ".join(f'"{name}": "{shape}"' for name, shape in shapes.items()) + "}"
            return web.Response(status=401, body=body.encode(), content_type="application/json")
        if what == "redirect":
            raise web.HTTPTemporaryRedirect(f"{self.url}/elsewhere/v1/chat/completions")
        if what == "bomb":
            body = gzip.compress(b"{" + b" " * (40 * 1024 * 1024) + b"}", compresslevel=9)
            return web.Response(
                body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
            )
        if what == "endless":  # uncompressed and past any sane size, in 64 KiB chunks
            response = web.StreamResponse(headers={"Content-Type": "application/json"})
            await response.prepare(request)
            try:
                for _ in range(4 * 16):  # 4 MiB against the proxy's 1 MiB here
                    await response.write(b" " * 65536)
            except (ConnectionResetError, aiohttp.ClientConnectionResetError):
                return response  # the proxy hung up: what it should do
            await response.write_eof()
            return response
        if what == "gzipped":
            body = gzip.compress(json.dumps({"echo": key, "model": "m"}).encode())
            return web.Response(
                body=body, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
            )
        if request.path.startswith("/v1/lingers/"):
            # The whole answer, then the stream stays open a while (keep-alive comments, a
            # slow close) before it ends; with "trailing" a comment comes after the pause.
            response = web.StreamResponse()
            response.content_type = "text/event-stream"
            await response.prepare(request)
            await response.write(
                b'data: {"model": "m", "choices": [{"delta": {"content": "4"}}]}\n\n'
            )
            await asyncio.sleep(0.05)
            await response.write(
                b'data: {"choices": [{"finish_reason": "stop"}], "usage": {"prompt_tokens": 3, '
                b'"completion_tokens": 1, "total_tokens": 4}}\n\ndata: [DONE]\n\n'
            )
            await asyncio.sleep(0.3)
            with contextlib.suppress(ConnectionResetError):  # the proxy may have hung up
                if "trailing" in request.path:
                    await response.write(b": keep-alive\n\n")
                await response.write_eof()
            return response
        if request.path.startswith("/v1/invalid-sse/"):
            response = web.StreamResponse()
            response.content_type = "text/event-stream"
            await response.prepare(request)
            await response.write(b'data: {"choices": [{"delta": {"content": "4"}}]}\n\n')
            await response.write(b"data: <html>502 Bad Gateway</html>\n\n")
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
            return response
        return web.json_response({"path": request.path})


@pytest.fixture
async def hostile() -> AsyncIterator[Hostile]:
    server = Hostile()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def proxy(hostile: Hostile, tmp_path: Path) -> AsyncIterator[MeteringProxy]:
    meter = MeteringProxy(
        run_id="r",
        upstream_base_url=hostile.url + "/v1",
        protocol="openai",
        real_key=REAL,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
        max_body_bytes=1024 * 1024,
    )
    await meter.start()
    yield meter
    await meter.stop()


async def _post(proxy: MeteringProxy, path: str, **kw: Any) -> tuple[int, bytes, str]:
    token = proxy.open_attempt("t", 0)
    async with (
        aiohttp.ClientSession(auto_decompress=False) as session,
        session.post(
            proxy.base_url_for(token) + path,
            json={"model": "m"},
            headers={"Authorization": f"Bearer {proxy.run_key}"},
            **kw,
        ) as response,
    ):
        try:
            body = await response.read()
        except aiohttp.ClientPayloadError:
            body = b"<broken>"
        seen = json.dumps(dict(response.headers))
        status = response.status
    await proxy.settle(token)
    return status, body, seen


def _variants(key: str) -> list[str]:
    return [
        key,
        key.replace("/", "\\/"),
        key.replace("-", "\\u002d"),
        urllib.parse.quote(key, safe=""),
        key.upper(),
        key[:12],
    ]


@pytest.mark.parametrize("path", ["/echo-json", "/echo-stream", "/gzipped"])
async def test_a_key_echoed_in_a_200_answer_never_reaches_the_agent(
    proxy: MeteringProxy, path: str
) -> None:
    status, body, _ = await _post(proxy, path)
    assert status == 200
    text = body.decode("utf-8", "replace")
    assert all(v not in text for v in _variants(REAL)), text
    assert "echo" in text  # the rest of the answer still arrives


async def test_the_error_body_scrub_catches_escaped_and_encoded_keys(
    proxy: MeteringProxy,
) -> None:
    status, body, _ = await _post(proxy, "/escaped")
    assert status == 401
    text = body.decode()
    for variant in _variants(REAL):
        assert variant not in text, (variant, text)
    received = json.loads(text)
    assert {"json", "unicode", "url", "upper"} <= set(received)
    # What the agent gets once it has decoded the JSON holds no key either.
    assert not [v for v in received.values() if REAL.lower() in urllib.parse.unquote(v).lower()]


@pytest.mark.parametrize(
    "tail",
    ["/../../x/steal", "/%2e%2e/%2e%2e/x/steal", "/chat/%2E%2E/%2E%2E/%2E%2E/x/steal"],
)
async def test_a_path_cannot_climb_out_of_the_profiles_base_url(
    proxy: MeteringProxy, hostile: Hostile, tail: str
) -> None:
    token = proxy.open_attempt("t", 0)
    raw = f"/a/{token}{tail}"
    reader, writer = await asyncio.open_connection("127.0.0.1", int(proxy.url.rsplit(":", 1)[1]))
    writer.write(
        f"POST {raw} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {proxy.run_key}\r\n"
        "Content-Length: 2\r\nConnection: close\r\n\r\n{}".encode()
    )
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    # Either refused, or forwarded under /v1: never to /x/steal with the real key.
    assert all(p.startswith("/v1/") for p in hostile.paths), hostile.paths
    assert b" 200 " not in answer.split(b"\r\n", 1)[0] or hostile.paths


async def test_an_upstream_redirect_is_a_link_error_and_never_followed(
    proxy: MeteringProxy, hostile: Hostile, tmp_path: Path
) -> None:
    token = proxy.open_attempt("t", 0)
    async with (
        aiohttp.ClientSession() as session,  # follows redirects, as most clients do
        session.post(
            proxy.base_url_for(token) + "/redirect",
            json={},
            headers={"Authorization": f"Bearer {proxy.run_key}"},
        ) as response,
    ):
        status = response.status
        await response.read()
    await proxy.settle(token)
    assert status == 502 and hostile.elsewhere_hits == 0
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert call["error_kind"] == "redirect" and call["status"] == 307


async def test_a_gzip_bomb_in_a_200_answer_is_bounded(proxy: MeteringProxy, tmp_path: Path) -> None:
    status, body, _ = await _post(proxy, "/bomb")
    assert status == 200
    assert body == b"<broken>" or len(body) <= 1024 * 1024 + 65536
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert call["error_kind"] == "too_large"


async def test_an_uncompressed_200_answer_is_bounded_too(
    proxy: MeteringProxy, tmp_path: Path
) -> None:
    """Seen: only a compressed body was counted against the limit; a plain one of any size
    went through to the agent."""
    status, body, _ = await _post(proxy, "/endless")
    assert status == 200
    assert body == b"<broken>" or len(body) <= 1024 * 1024 + 65536
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert call["error_kind"] == "too_large"


async def test_invalid_sse_is_a_link_failure_and_is_not_forwarded(
    proxy: MeteringProxy, tmp_path: Path
) -> None:
    _, body, _ = await _post(proxy, "/invalid-sse/chat/completions")
    assert b"Bad Gateway" not in body
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert call["error_kind"] == "invalid_sse"


@pytest.mark.parametrize("hang_up_after", [b"[DONE]", b'"content"'])
@pytest.mark.parametrize(
    "path", ["/lingers/chat/completions", "/lingers/trailing/chat/completions"]
)
async def test_an_agent_that_hangs_up_once_it_has_the_whole_answer_had_no_link_failure(
    proxy: MeteringProxy, tmp_path: Path, path: str, hang_up_after: bytes
) -> None:
    # Codex closes its connection as soon as it has read the protocol's end. Seen in CI: that
    # call was recorded as a "connection" failure and the whole try was run again. Hanging up
    # before the end is the agent giving up ("client_closed"); neither is the link's fault.
    token = proxy.open_attempt("t", 0)
    async with aiohttp.ClientSession() as session:
        response = await session.post(
            proxy.base_url_for(token) + path,
            json={"model": "m", "stream": True},
            headers={"Authorization": f"Bearer {proxy.run_key}"},
        )
        seen = b""
        while hang_up_after not in seen:
            seen += await response.content.readany()
        response.close()  # drops the connection, as the agent's process exiting does
    calls = (await proxy.settle(token)).calls
    (call,) = read_rows(tmp_path / "calls.jsonl")
    assert call == calls[-1]
    if hang_up_after == b"[DONE]":
        assert call["error_kind"] is None, call
        assert (call["prompt_tokens"], call["completion_tokens"]) == (3, 1)
        assert unrecovered_link_failure(calls) is None
    else:
        assert call["error_kind"] == "client_closed", call


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e999"])
def test_a_retry_after_that_is_not_a_finite_number_cannot_bypass_the_cap(value: str) -> None:
    policy = RetryPolicy(max_retries=3, base_delay_s=0.5, max_delay_s=30.0)
    for header in ("Retry-After", "retry-after-ms"):
        delay = policy.delay(1, parse_retry_after({header: value}), random.Random(0))
        assert 0.0 <= delay <= 30.0, (header, value, delay)


async def test_invalid_sse_makes_the_builtin_attempt_a_link_error(
    hostile: Hostile, tmp_path: Path
) -> None:
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile(
                name="h", protocol="openai", base_url=hostile.url + "/v1/invalid-sse", model="m"
            ),
            suite=str(suite),
            repeat=1,
            out_dir=tmp_path / "runs",
            api_key=REAL,
            retry_policy=RetryPolicy(max_retries=0),
        )
    )
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"]) == ("link_error", "invalid_sse"), row


async def test_transcripts_get_the_same_redaction_as_logs(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    leaked = "sk-live-0123456789abcdefghij"  # pasted into a prompt, say
    suite = tmp_path / "suite.jsonl"
    task = {
        "task_id": "t",
        "prompt": f"behave:answer-42 my key is {leaked}; what is six times seven?",
        "expected": {"equals": "42"},
    }
    suite.write_text(json.dumps(task) + "\n")
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="s", protocol="openai", base_url=scripted.url, model="test-model"),
            suite=str(suite),
            repeat=1,
            out_dir=tmp_path / "runs",
            api_key=REAL,
        )
    )
    (transcript,) = outcome.run_dir.glob("attempts/*/*.transcript.json")
    text = transcript.read_text()
    assert "six times seven" in text and leaked not in text
