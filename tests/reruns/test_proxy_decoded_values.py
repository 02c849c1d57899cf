"""What the meter decodes from an answer (served model, fingerprint) is redacted after decoding.

The proxy scrubs the real key from the bytes; the meter then JSON-decodes them, and a key the
upstream wrote with every character escaped (``\\u0073\\u006b\\u002d…``) is plain text there.
calls.jsonl must hold neither the real key nor any key-like value, streamed or not."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from reruns_helpers import read_rows
from test_proxy_escaped_keys import EchoingProvider

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.proxy import MeteringProxy

REAL = "sk-proj-Real0123456789abcdefXYZ"
# Some other key the upstream echoes (a gateway's own, another profile's): key-like all the same.
OTHER = "sk-ant-api03-Other9876543210zyxwv"


def _every_char_escaped(text: str) -> bytes:
    """``text`` as a JSON string body with every character ``\\uXXXX``, written by hand."""
    return "".join(f"\\u{ord(c):04x}" for c in text).encode()


def _body(model: str, streamed: bool) -> bytes:
    escaped = _every_char_escaped(model)
    head = b'{"model": "' + escaped + b'", "system_fingerprint": "' + escaped + b'"'
    if not streamed:
        return head + b', "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2}}'
    return (
        b"data: " + head + b', "choices": [{"delta": {"content": "hi"}}]}\n\n'
        b'data: {"choices": [{"finish_reason": "stop"}], '
        b'"usage": {"prompt_tokens": 3, "completion_tokens": 2}}\n\n'
        b"data: [DONE]\n\n"
    )


@pytest.fixture
async def provider() -> AsyncIterator[EchoingProvider]:
    server = EchoingProvider()
    await server.start()
    yield server
    await server.stop()


async def _call_row(provider: EchoingProvider, calls_path: Path) -> dict:
    proxy = MeteringProxy(
        run_id="r",
        upstream_base_url=provider.url + "/v1",
        protocol="openai",
        real_key=REAL,
        calls_file=JsonlAppender(calls_path),
    )
    await proxy.start()
    try:
        token = proxy.open_attempt("t", 0)
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                proxy.base_url_for(token) + "/chat/completions",
                json={"model": "m"},
                headers={"Authorization": f"Bearer {proxy.run_key}"},
            ) as response,
        ):
            assert response.status == 200
            await response.read()
        await proxy.settle(token)
    finally:
        await proxy.stop()
    (row,) = read_rows(calls_path)
    return row


def test_the_bodies_here_decode_to_the_key() -> None:
    # The check a json.dumps-written body could not pass (it would double each backslash).
    for streamed in (False, True):
        body = _body(REAL, streamed)
        first = body.split(b"\n")[0].removeprefix(b"data: ")
        assert json.loads(first)["model"] == REAL


@pytest.mark.parametrize("streamed", [False, True], ids=["body", "stream"])
@pytest.mark.parametrize("model", [REAL, OTHER], ids=["real key", "other key"])
async def test_a_model_escaped_character_by_character_is_redacted_in_calls_jsonl(
    provider: EchoingProvider, tmp_path: Path, streamed: bool, model: str
) -> None:
    provider.content_type = "text/event-stream" if streamed else "application/json"
    provider.body = _body(model, streamed)
    calls_path = tmp_path / "calls.jsonl"
    row = await _call_row(provider, calls_path)
    assert row["streamed"] is streamed
    assert row["prompt_tokens"] == 3  # metered all the same
    for field in ("served_model", "system_fingerprint"):
        assert row[field] is not None and row[field].startswith("sk-"), row
        assert model not in row[field], row
    text = calls_path.read_text()
    assert model not in text and model[8:] not in text


async def test_a_plain_model_name_is_kept(provider: EchoingProvider, tmp_path: Path) -> None:
    provider.body = _body("gpt-4o-2024-08-06", streamed=False)
    row = await _call_row(provider, tmp_path / "calls.jsonl")
    assert row["served_model"] == "gpt-4o-2024-08-06"
    assert row["system_fingerprint"] == "gpt-4o-2024-08-06"
