"""The real key, echoed by a provider in any JSON escaping of it, never reaches the agent.

JSON lets a string write any character as ``\\uXXXX`` (hex in either case) and ``/`` as
``\\/``: ``gw_Live\\/Key…`` or ``Key\\u002dproxy…`` in a body is the key after one JSON
unescape. The provider here writes its bodies byte by byte, never through ``json.dumps`` (which
would double the backslash and send a harmless string instead); each shape is checked to decode
to the key before the proxy's answer is checked not to."""

from __future__ import annotations

import asyncio
import gzip
import itertools
import json
import random
import urllib.parse
import zlib
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.call_verdicts import error_kind_for
from driftdesk.reruns.key_scrub import KeyScrubber
from driftdesk.reruns.proxy import MeteringProxy

REAL = "gw_Live/Key-proxy-0123456789abcdef"


def _escaped(key: str, which: Callable[[int, str], bool], upper_hex: bool = False) -> str:
    """``key`` with the characters ``which`` picks written as ``\\uXXXX``, by hand."""
    form = "\\u{:04X}" if upper_hex else "\\u{:04x}"
    return "".join(form.format(ord(c)) if which(i, c) else c for i, c in enumerate(key))


def _random_mix(key: str, seed: int) -> str:
    """Each character of ``key`` in a shape picked at random: itself (in either case), ``\\u``
    with lower, upper or mixed-case hex, ``\\/`` for a slash, URL-encoded."""
    rng = random.Random(seed)
    out = []
    for c in key:
        hex_digits = f"{ord(c):04x}"
        shapes = [
            c,
            c.swapcase(),
            "\\u" + hex_digits,
            "\\u" + hex_digits.upper(),
            "\\u" + "".join(d.upper() if rng.random() < 0.5 else d for d in hex_digits),
            f"%{ord(c):02X}",
        ]
        if c == "/":
            shapes += ["\\/", "\\/"]
        out.append(rng.choice(shapes))
    return "".join(out)


# Every one decodes to the key (checked below): as a provider might write it.
SHAPES = {
    "escaped slash": REAL.replace("/", "\\/"),
    "escaped dash": REAL.replace("-", "\\u002d"),
    "escaped dash, upper-case hex": REAL.replace("-", "\\u002D"),
    "escaped slash and dash": REAL.replace("/", "\\/").replace("-", "\\u002d"),
    "escaped slash as \\u": REAL.replace("/", "\\u002f"),
    "an escaped letter": REAL.replace("L", "\\u004c"),
    "an escaped digit": REAL.replace("7", "\\u0037"),
    "every character": _escaped(REAL, lambda i, c: True),
    "every character, upper-case hex": _escaped(REAL, lambda i, c: True, upper_hex=True),
    "every other character": _escaped(REAL, lambda i, c: i % 2 == 0),
    "a mix": _escaped(REAL, lambda i, c: i % 3 == 1, upper_hex=True).replace("/", "\\/"),
}


def _json_string(shape: str) -> bytes:
    """A JSON document holding ``shape`` as a string, written out byte by byte."""
    return b'{"error": {"message": "bad key: ' + shape.encode() + b'", "code": "invalid_key"}}'


def _decoded(body: bytes) -> str:
    """What an agent reads in ``body``: the JSON document, or each SSE event's, decoded."""
    text = body.decode("utf-8", "replace")
    if not text.startswith("data:"):
        return json.dumps(json.loads(text), ensure_ascii=False)
    events = [line.removeprefix("data:").strip() for line in text.splitlines()]
    return "\n".join(
        json.dumps(json.loads(event), ensure_ascii=False)
        for event in events
        if event and event != "[DONE]"
    )


def _key_is_recoverable(body: bytes) -> bool:
    """Does one JSON unescape, or a URL decoding after it, give the key back (in any case)?"""
    text = _decoded(body)
    return any(REAL.lower() in seen.lower() for seen in (text, urllib.parse.unquote(text)))


def test_every_shape_here_really_is_the_key_after_one_json_unescape() -> None:
    # The check the old fake provider could not fail: json.dumps would have doubled each "\".
    for name, shape in SHAPES.items():
        assert json.loads(_json_string(shape))["error"]["message"] == "bad key: " + REAL, name
        assert _key_is_recoverable(_json_string(shape)), name
    assert len(SHAPES) == 11


class EchoingProvider(LoopbackServer):
    """Sends back a body it is told to (hex in the path), in the chunks it is told to."""

    def __init__(self) -> None:
        super().__init__()
        self.body = b""
        self.cuts: list[int] = []  # where the body is split into separate writes
        self.status = 200
        self.content_type = "application/json"
        self.encoding = ""  # sent as Content-Encoding (the body is given encoded)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/{tail:.*}", self.handle)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        headers = {"Content-Type": self.content_type}
        if self.encoding:
            headers["Content-Encoding"] = self.encoding
        response = web.StreamResponse(status=self.status, headers=headers)
        await response.prepare(request)
        bounds = [0, *self.cuts, len(self.body)]
        for start, end in itertools.pairwise(bounds):
            await response.write(self.body[start:end])
            await asyncio.sleep(0.01)  # a write per chunk: the proxy sees them apart
        await response.write_eof()
        return response


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


@pytest.mark.parametrize("name", list(SHAPES))
async def test_an_error_body_with_the_key_json_escaped_is_scrubbed(
    proxy: MeteringProxy, provider: EchoingProvider, name: str
) -> None:
    provider.status = 401
    provider.body = _json_string(SHAPES[name])
    status, body = await _answer(proxy)
    assert status == 401
    assert not _key_is_recoverable(body), body
    assert json.loads(body)["error"]["code"] == "invalid_key"  # the rest still arrives


@pytest.mark.parametrize("name", list(SHAPES))
async def test_a_200_answer_with_the_key_json_escaped_is_scrubbed_wherever_it_is_split(
    proxy: MeteringProxy, provider: EchoingProvider, name: str
) -> None:
    provider.body = _json_string(SHAPES[name])
    start = provider.body.index(b"bad key: ") + len(b"bad key: ")
    size = len(SHAPES[name])
    # Cut inside the escaped key: at its first byte, a third, the middle, its last byte.
    provider.cuts = sorted({start + 1, start + size // 3, start + size // 2, start + size - 1})
    status, body = await _answer(proxy)
    assert status == 200
    assert not _key_is_recoverable(body), body
    assert json.loads(body)["error"]["code"] == "invalid_key"


async def test_a_200_answer_sent_one_byte_at_a_time_is_scrubbed(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    # The longest shape (every character escaped) held back across every possible split.
    provider.body = _json_string(SHAPES["every character, upper-case hex"])
    provider.cuts = list(range(1, len(provider.body)))
    status, body = await _answer(proxy)
    assert status == 200
    assert not _key_is_recoverable(body), body
    assert json.loads(body)["error"]["code"] == "invalid_key"


@pytest.mark.parametrize("name", ["escaped slash", "escaped dash", "every character"])
async def test_an_sse_event_with_the_key_json_escaped_is_scrubbed(
    proxy: MeteringProxy, provider: EchoingProvider, name: str
) -> None:
    provider.content_type = "text/event-stream"
    event = b'data: {"model": "m", "choices": [{"delta": {"content": "' + SHAPES[name].encode()
    provider.body = (
        event + b'"}}]}\n\ndata: {"choices": [{"finish_reason": "stop"}]}\n\ndata: [DONE]\n\n'
    )
    provider.cuts = [len(event) - len(SHAPES[name]) // 2]
    status, body = await _answer(proxy)
    assert status == 200
    assert not _key_is_recoverable(body), body
    assert body.endswith(b"data: [DONE]\n\n")


async def test_an_error_body_cut_at_the_bound_inside_an_escaped_key_drops_its_start(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    provider.status = 401
    shape = SHAPES["every character"].encode()
    # 64 KiB is where the proxy stops reading an error body: 7 escaped characters and half
    # of the 8th get in ("gw_Live" and a cut "\u00").
    head = b'{"m": "'
    provider.body = head + b"x" * (64 * 1024 - len(head) - 46) + shape + b'"}'
    status, body = await _answer(proxy)
    assert status == 401
    assert shape[:24] not in body  # "gw_L", escaped: four characters of the key
    assert body.endswith(b"x")


@pytest.mark.parametrize("seed", range(300))
def test_any_mix_of_escapes_is_scrubbed(seed: int) -> None:
    shape = _random_mix(REAL, seed)
    body = _json_string(shape)
    message = json.loads(body)["error"]["message"]
    assert urllib.parse.unquote(message).lower() == ("bad key: " + REAL).lower()
    scrubbed = KeyScrubber(REAL).scrub(body)
    assert not _key_is_recoverable(scrubbed), (shape, scrubbed)
    assert b"gw\xe2\x80\xa6cdef" in scrubbed  # masked, not dropped


def test_a_header_value_with_the_key_escaped_is_found() -> None:
    scrubber = KeyScrubber(REAL)
    assert all(scrubber.found(f"key={shape}") for shape in SHAPES.values())
    assert not scrubber.found("key=" + REAL[:-1])


def _deflated(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize(
    ("encoding", "encode"),
    [("gzip", gzip.compress), ("x-gzip", gzip.compress), ("deflate", _deflated)],
)
async def test_a_compressed_error_body_is_decoded_then_scrubbed(
    proxy: MeteringProxy, provider: EchoingProvider, encoding: str, encode: Any
) -> None:
    provider.status = 401
    provider.encoding = encoding
    provider.body = encode(_json_string(SHAPES["every character"]))
    status, body = await _answer(proxy)
    assert status == 401
    assert not _key_is_recoverable(body), body
    assert json.loads(body)["error"]["code"] == "invalid_key"  # sent decoded


@pytest.mark.parametrize("encoding", ["br", "gzip"])
async def test_an_error_body_the_proxy_cannot_read_is_withheld(
    proxy: MeteringProxy, provider: EchoingProvider, encoding: str
) -> None:
    # "br" it does not read; "gzip" that is not gzip it cannot: neither can be scrubbed.
    provider.status = 401
    provider.encoding = encoding
    provider.body = b"not what it says " + REAL.encode()
    status, body = await _answer(proxy)
    assert (status, body) == (401, b"")


async def test_an_error_body_that_is_not_utf8_keeps_its_bytes(
    proxy: MeteringProxy, provider: EchoingProvider
) -> None:
    provider.status = 401
    provider.body = b"\xff\xfe bad key: " + REAL.encode() + b" \xc3("
    status, body = await _answer(proxy)
    assert status == 401
    assert body == b"\xff\xfe bad key: gw\xe2\x80\xa6cdef \xc3("


def test_a_start_of_the_key_is_dropped_only_at_the_end() -> None:
    scrubber = KeyScrubber(REAL)
    assert scrubber.without_partial_tail(b"gw_L") == b""  # the whole body a start of it
    assert scrubber.without_partial_tail(b"x gw\\u005fL") == b"x "
    assert scrubber.without_partial_tail(b"x gw_") == b"x gw_"  # 3 characters: kept
    assert scrubber.without_partial_tail(b"gw_L and after") == b"gw_L and after"
    assert scrubber.without_partial_tail(b"") == b""


def test_a_429_is_insufficient_quota_only_when_it_says_so() -> None:
    assert error_kind_for(429, b'{"code": "insufficient_quota"}') == "insufficient_quota"
    assert error_kind_for(429, b"slow down") == "429"
    assert error_kind_for(402, b'{"code": "insufficient_quota"}') == "402"
