"""The metering proxy speaks Chat Completions, Responses and Messages: usage, cache tokens,
served model, and per-protocol stream completeness; a body or stream the upstream cuts short
reaches the client as a broken connection (never as a clean, partial answer).

The upstream is a real aiohttp server on loopback playing the provider; the clients are the
real ``openai`` SDK where it speaks the protocol, and plain aiohttp otherwise.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web
from reruns_helpers import LoopbackServer, read_rows

from driftdesk.fileio import JsonlAppender
from driftdesk.reruns.proxy import MeteringProxy

REAL = "sk-REALKEY-protocols-0123456789"


def _sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


def _responses_object(model: str) -> dict[str, Any]:
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "model": model,
        "status": "completed",
        "output": [
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": "42", "annotations": []}],
            }
        ],
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 30,
            "input_tokens_details": {"cached_tokens": 20},
            "output_tokens": 4,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 34,
        },
    }


def _message_object(model: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": "42"}],
        "stop_reason": "end_turn",
        "usage": {
            "input_tokens": 12,
            "output_tokens": 6,
            "cache_read_input_tokens": 100,
            "cache_creation_input_tokens": 50,
        },
    }


class Provider(LoopbackServer):
    """Plays OpenAI and Anthropic. ``serve`` maps a requested model to the one that answers
    (a gateway that silently swaps models); ``cut`` makes the next answer stop short."""

    url_suffix = "/v1"

    def __init__(self) -> None:
        super().__init__()
        self.serve: dict[str, str] = {}
        self.cut: str | None = None  # "abort" (connection dropped) | "clean" (no end marker)

    def routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/responses", self.responses)
        app.router.add_post("/v1/messages", self.messages)
        app.router.add_post("/v1/messages/count_tokens", self.count_tokens)
        app.router.add_post("/v1/chat/completions", self.chat)

    async def _stream(self, request: web.Request, events: list[bytes]) -> web.StreamResponse:
        response = web.StreamResponse()
        response.content_type = "text/event-stream"
        await response.prepare(request)
        if self.cut is not None:
            events = events[:1]  # the first event only: before any end marker
        for event in events:
            await response.write(event)
        if self.cut == "abort":
            assert request.transport is not None
            request.transport.close()
            return response
        await response.write_eof()
        return response

    async def _json(self, request: web.Request, body: dict[str, Any]) -> web.StreamResponse:
        raw = json.dumps(body).encode()
        if self.cut is None:
            return web.json_response(body)
        # Announce the whole length, send half, hang up.
        response = web.StreamResponse(headers={"Content-Length": str(len(raw))})
        response.content_type = "application/json"
        await response.prepare(request)
        await response.write(raw[: len(raw) // 2])
        assert request.transport is not None
        request.transport.close()
        return response

    async def responses(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        model = self.serve.get(body["model"], body["model"])
        final = _responses_object(model)
        if not body.get("stream"):
            return await self._json(request, final)
        started = dict(final, status="in_progress", usage=None, output=[])
        item = final["output"][0]
        events = [
            _sse("response.created", {"type": "response.created", "response": started}),
            _sse(
                "response.output_item.added",
                {"type": "response.output_item.added", "output_index": 0, "item": item},
            ),
            _sse(
                "response.output_text.delta",
                {
                    "type": "response.output_text.delta",
                    "item_id": "msg_1",
                    "output_index": 0,
                    "content_index": 0,
                    "delta": "42",
                },
            ),
            _sse(
                "response.output_item.done",
                {"type": "response.output_item.done", "output_index": 0, "item": item},
            ),
            # The Responses API ends here: no "data: [DONE]".
            _sse("response.completed", {"type": "response.completed", "response": final}),
        ]
        return await self._stream(request, events)

    async def messages(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        model = self.serve.get(body["model"], body["model"])
        final = _message_object(model)
        if not body.get("stream"):
            return await self._json(request, final)
        start = dict(final, content=[], stop_reason=None)
        start["usage"] = dict(final["usage"], output_tokens=1)
        events = [
            _sse("message_start", {"type": "message_start", "message": start}),
            _sse(
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": 0,
                    "content_block": {"type": "text", "text": ""},
                },
            ),
            _sse(
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": "42"},
                },
            ),
            _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            _sse(
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn"},
                    "usage": {"output_tokens": 6},
                },
            ),
            _sse("message_stop", {"type": "message_stop"}),
        ]
        return await self._stream(request, events)

    async def count_tokens(self, request: web.Request) -> web.Response:
        await request.json()
        return web.json_response({"input_tokens": 321})

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        model = self.serve.get(body["model"], body["model"])
        usage = {
            "prompt_tokens": 40,
            "completion_tokens": 2,
            "total_tokens": 42,
            "prompt_tokens_details": {"cached_tokens": 32},
        }
        head = {"id": "c1", "object": "chat.completion.chunk", "created": 0, "model": model}
        head["system_fingerprint"] = "fp_test123"
        if not body.get("stream"):
            message = {"role": "assistant", "content": "42"}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            return await self._json(
                request, dict(head, object="chat.completion", choices=[choice], usage=usage)
            )
        events = [
            _sse(None, dict(head, choices=[{"index": 0, "delta": {"content": "42"}}])),
            _sse(None, dict(head, choices=[{"index": 0, "delta": {}, "finish_reason": "stop"}])),
            _sse(None, dict(head, choices=[], usage=usage)),
            _sse(None, "[DONE]"),
        ]
        return await self._stream(request, events)


@pytest.fixture
async def provider() -> AsyncIterator[Provider]:
    server = Provider()
    await server.start()
    yield server
    await server.stop()


@pytest.fixture
async def proxy_for(tmp_path: Path) -> AsyncIterator[Any]:
    started: list[MeteringProxy] = []

    async def make(provider: Provider, protocol: str) -> tuple[MeteringProxy, str]:
        proxy = MeteringProxy(
            run_id="run-1",
            upstream_base_url=provider.url.removesuffix("/v1"),
            protocol=protocol,
            real_key=REAL,
            calls_file=JsonlAppender(tmp_path / "calls.jsonl"),
        )
        await proxy.start()
        started.append(proxy)
        return proxy, proxy.open_attempt("t", 0)

    yield make
    for proxy in started:
        await proxy.stop()


def _calls(tmp_path: Path) -> list[dict[str, Any]]:
    return read_rows(tmp_path / "calls.jsonl")


def _openai(proxy: MeteringProxy, token: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=proxy.base_url_for(token) + "/v1", api_key=proxy.run_key, max_retries=0
    )


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_responses_api_is_metered_and_a_stream_without_done_is_complete(
    provider: Provider, proxy_for: Any, tmp_path: Path, stream: bool
) -> None:
    proxy, token = await proxy_for(provider, "openai")
    async with _openai(proxy, token) as client:
        if stream:
            text = ""
            async with client.responses.stream(model="gpt-x", input="six times seven?") as s:
                async for event in s:
                    if event.type == "response.output_text.delta":
                        text += event.delta
                final = await s.get_final_response()
            assert text == "42" and final.usage is not None
        else:
            response = await client.responses.create(model="gpt-x", input="six times seven?")
            assert response.output_text == "42"
    calls = await proxy.settle(token)
    (call,) = _calls(tmp_path)
    assert call == calls.calls[0]
    assert call["path"] == "/v1/responses" and call["streamed"] is stream
    assert call["error_kind"] is None  # response.completed ends a Responses stream
    assert (call["prompt_tokens"], call["completion_tokens"], call["total_tokens"]) == (30, 4, 34)
    assert (call["cache_read_tokens"], call["cache_creation_tokens"]) == (20, None)
    assert (call["served_model"], call["model_mismatch"]) == ("gpt-x", False)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_messages_api_records_cache_tokens_and_the_served_model(
    provider: Provider, proxy_for: Any, tmp_path: Path, stream: bool
) -> None:
    provider.serve["claude-big"] = "claude-small-20250101"  # the gateway swapped the model
    proxy, token = await proxy_for(provider, "anthropic")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url_for(token) + "/v1/messages",
            json={"model": "claude-big", "max_tokens": 10, "messages": [], "stream": stream},
            headers={"x-api-key": proxy.run_key, "anthropic-version": "2023-06-01"},
        ) as response,
    ):
        assert response.status == 200
        body = await response.read()
    assert (b"message_stop" in body) if stream else (json.loads(body)["model"] != "claude-big")
    await proxy.settle(token)
    (call,) = _calls(tmp_path)
    assert call["error_kind"] is None and call["streamed"] is stream
    assert (call["prompt_tokens"], call["completion_tokens"], call["total_tokens"]) == (12, 6, 18)
    assert (call["cache_read_tokens"], call["cache_creation_tokens"]) == (100, 50)
    assert call["served_model"] == "claude-small-20250101"
    assert call["requested_model"] == "claude-big"
    assert call["model_mismatch"] is True


async def test_count_tokens_is_metered_without_counting_as_usage(
    provider: Provider, proxy_for: Any, tmp_path: Path
) -> None:
    proxy, token = await proxy_for(provider, "anthropic")
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url_for(token) + "/v1/messages/count_tokens",
            json={"model": "claude-big", "messages": []},
            headers={"x-api-key": proxy.run_key},
        ) as response,
    ):
        assert (await response.json())["input_tokens"] == 321
    await proxy.settle(token)
    (call,) = _calls(tmp_path)
    assert call["path"] == "/v1/messages/count_tokens" and call["status"] == 200
    assert call["error_kind"] is None
    # Counting tokens spends none: the count is not usage, and no model answered.
    assert call["prompt_tokens"] is None and call["total_tokens"] is None
    assert (call["served_model"], call["model_mismatch"]) == (None, False)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
async def test_chat_completions_served_model_fingerprint_and_cached_tokens(
    provider: Provider, proxy_for: Any, tmp_path: Path, stream: bool
) -> None:
    provider.serve["gpt-4o"] = "gpt-4o-mini"
    proxy, token = await proxy_for(provider, "openai")
    async with _openai(proxy, token) as client:
        if stream:
            chunks = await client.chat.completions.create(
                model="gpt-4o",
                messages=[{"role": "user", "content": "hi"}],
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _ in chunks:
                pass
        else:
            await client.chat.completions.create(
                model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
            )
    await proxy.settle(token)
    (call,) = _calls(tmp_path)
    assert call["error_kind"] is None
    assert (call["prompt_tokens"], call["completion_tokens"], call["cache_read_tokens"]) == (
        40,
        2,
        32,
    )
    assert (call["served_model"], call["system_fingerprint"]) == ("gpt-4o-mini", "fp_test123")
    assert call["model_mismatch"] is True


async def test_a_dated_snapshot_of_the_requested_model_is_not_a_mismatch(
    provider: Provider, proxy_for: Any, tmp_path: Path
) -> None:
    provider.serve["gpt-4o"] = "gpt-4o-2024-08-06"
    proxy, token = await proxy_for(provider, "openai")
    async with _openai(proxy, token) as client:
        await client.chat.completions.create(
            model="gpt-4o", messages=[{"role": "user", "content": "hi"}]
        )
    await proxy.settle(token)
    (call,) = _calls(tmp_path)
    assert (call["served_model"], call["model_mismatch"]) == ("gpt-4o-2024-08-06", False)


@pytest.mark.parametrize(
    ("path", "protocol", "stream", "cut"),
    [
        ("/v1/responses", "openai", True, "abort"),
        ("/v1/responses", "openai", True, "clean"),
        ("/v1/responses", "openai", False, "abort"),
        ("/v1/messages", "anthropic", True, "abort"),
        ("/v1/messages", "anthropic", True, "clean"),
        ("/v1/messages", "anthropic", False, "abort"),
        ("/v1/chat/completions", "openai", True, "clean"),
        ("/v1/chat/completions", "openai", False, "abort"),
    ],
)
async def test_an_answer_cut_short_upstream_breaks_the_downstream_connection(
    provider: Provider,
    proxy_for: Any,
    tmp_path: Path,
    path: str,
    protocol: str,
    stream: bool,
    cut: str,
) -> None:
    provider.cut = cut
    proxy, token = await proxy_for(provider, protocol)
    body = {"model": "m", "stream": stream, "input": "x", "messages": [], "max_tokens": 5}
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url_for(token) + path,
            json=body,
            headers={"Authorization": f"Bearer {proxy.run_key}", "x-api-key": proxy.run_key},
        ) as response,
    ):
        assert response.status == 200  # the headers had been sent already
        # The client must see a transport error, not a clean end of a partial answer.
        with pytest.raises(aiohttp.ClientPayloadError):
            await asyncio.wait_for(response.read(), 5)
    await proxy.settle(token)
    (call,) = _calls(tmp_path)
    assert call["error_kind"] == "truncated"


async def test_openai_sdk_sees_a_cut_responses_stream_as_a_connection_error(
    provider: Provider, proxy_for: Any
) -> None:
    """What a real harness (inspect_ai, Codex) sees: an error it can retry, not an answer."""
    provider.cut = "clean"
    proxy, token = await proxy_for(provider, "openai")
    async with _openai(proxy, token) as client:
        with pytest.raises(openai.APIError):
            async with client.responses.stream(model="gpt-x", input="q") as s:
                await s.get_final_response()
