"""The proxy's key scrubbing at its edges: the shapes each key character may take, a key with
characters past U+FFFF or a lone surrogate, a body cut inside a key, an answer held back across
chunks, and the error body's encodings. Bodies are written byte by byte; where the proxy is
involved it runs over loopback against a provider that echoes what it is told to."""

from __future__ import annotations

import gzip
import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from test_proxy_escaped_keys import REAL, SHAPES, EchoingProvider

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.proxy import KeyScrubber, MeteringProxy


def test_a_key_with_a_lone_surrogate_is_scrubbed_and_the_proxy_starts_with_it(
    tmp_path: Path,
) -> None:
    # A key read from a non-UTF-8 environment variable holds its bad byte as a surrogate.
    key = "sec\udcffret-value-0123"
    scrubber = KeyScrubber(key)
    escaped = b'{"m": "sec\\udcffret-value-0123"}'
    assert json.loads(escaped)["m"] == key
    assert scrubber.scrub(escaped) == b'{"m": "se\xe2\x80\xa60123"}'
    meter = MeteringProxy(
        run_id="r",
        upstream_base_url="http://127.0.0.1:9/v1",
        protocol="openai",
        real_key=key,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
    )
    assert meter.run_key != key


@pytest.fixture
async def provider() -> AsyncIterator[EchoingProvider]:
    server = EchoingProvider()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def proxy(provider: EchoingProvider, tmp_path: Path) -> AsyncIterator[MeteringProxy]:
    meter = MeteringProxy(
        run_id="r",
        upstream_base_url=provider.url + "/v1",
        protocol="openai",
        real_key=REAL,
        calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
    )
    await meter.start()
    yield meter
    await meter.stop()


async def _answer(proxy: MeteringProxy) -> tuple[int, bytes]:
    token = proxy.open_attempt("t", 0)
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url_for(token) + "/chat/completions",
            json={"model": "m"},
            headers={"Authorization": f"Bearer {proxy.run_key}"},
        ) as response,
    ):
        body = await response.read()
        status = response.status
    await proxy.settle(token)
    return status, body


async def test_a_compressed_error_body_cut_at_the_bound_inside_the_key_drops_its_start(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    # Small on the wire, 64 KiB and more once decoded: the decoding stops at the bound, inside
    # the key (7 escaped characters and half of the 8th before it), as a read cut there would.
    provider.status = 401
    provider.encoding = "gzip"
    shape = SHAPES["every character"].encode()
    head = b'{"m": "'
    decoded = head + b"x" * (64 * 1024 - len(head) - 46) + shape + b'"}' + b" " * 4096
    provider.body = gzip.compress(decoded)
    assert len(provider.body) < 4096
    status, body = await _answer(proxy)
    assert status == 401
    assert shape[:24] not in body  # "gw_L", escaped: four characters of the key
    assert body.endswith(b"x")
