"""A minimal loopback vendor endpoint for the real Claude Code and Codex clients.

Answers ``POST /v1/messages`` (Anthropic Messages, JSON or SSE), ``POST /v1/responses`` (OpenAI
Responses, SSE) and ``GET /v1/models`` just well enough for one headless turn, and records every
request's method, path and headers so a test can assert which key reached which URL with which
header. Run alone (``python vendor_endpoint.py PORTFILE``) it serves until killed and appends the
requests as JSON lines to ``PORTFILE.requests``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

REPLY = "pong"


def _sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return b"".join(
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    )


def messages_events(model: str) -> list[tuple[str, dict[str, Any]]]:
    usage = {"input_tokens": 3, "output_tokens": 1}
    message = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    return [
        ("message_start", {"type": "message_start", "message": message}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
        (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": REPLY},
            },
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": 1},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]


def responses_events(model: str) -> list[tuple[str, dict[str, Any]]]:
    item = {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": REPLY, "annotations": []}],
    }
    response = {"id": "resp_1", "object": "response", "model": model, "status": "in_progress"}
    done = dict(
        response,
        status="completed",
        output=[item],
        usage={
            "input_tokens": 3,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 1,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 4,
        },
    )
    return [
        ("response.created", {"type": "response.created", "response": response}),
        (
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        ("response.completed", {"type": "response.completed", "response": done}),
    ]


class VendorEndpoint:
    def __init__(self) -> None:
        self.seen: list[dict[str, Any]] = []

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        self.seen.append(
            {"method": request.method, "path": request.path, "headers": dict(request.headers)}
        )
        try:
            payload = json.loads(body) if body else {}
        except ValueError:
            payload = {}
        model = str(payload.get("model") or "model-a") if isinstance(payload, dict) else "m"
        if request.path.endswith("/models"):
            return web.json_response({"object": "list", "data": [{"id": model, "object": "model"}]})
        if request.path.endswith("/messages/count_tokens"):
            return web.json_response({"input_tokens": 3})
        if request.path.endswith("/messages"):
            if payload.get("stream"):
                return web.Response(
                    body=_sse(messages_events(model)), content_type="text/event-stream"
                )
            return web.json_response(
                {
                    "id": "msg_1",
                    "type": "message",
                    "role": "assistant",
                    "model": model,
                    "content": [{"type": "text", "text": REPLY}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 3, "output_tokens": 1},
                }
            )
        if request.path.endswith("/responses"):
            return web.Response(
                body=_sse(responses_events(model)), content_type="text/event-stream"
            )
        return web.json_response({"error": {"message": "not here"}}, status=404)


def main() -> None:
    import asyncio

    out = Path(sys.argv[1])
    endpoint = VendorEndpoint()

    async def serve() -> None:
        runner = web.AppRunner(endpoint.app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        out.write_text(str(port))
        while True:
            await asyncio.sleep(0.2)
            with open(str(out) + ".requests", "w") as fh:
                for row in endpoint.seen:
                    fh.write(json.dumps(row) + "\n")

    asyncio.run(serve())


if __name__ == "__main__":
    main()
