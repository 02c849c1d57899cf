"""A scripted OpenAI-compatible endpoint on 127.0.0.1 whose behaviour is chosen per task.

The first user message names a behaviour (``behave:NAME``); the endpoint counts every request
per behaviour and records the Authorization and x-api-key headers it received (its 401
echoes the key back), so tests can compare what the
engine reports with what the server actually saw.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from aiohttp import web

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer


def _behaviour(body: dict[str, Any]) -> str:
    for message in body.get("messages") or []:
        if message.get("role") == "user":
            text = str(message.get("content"))
            if "behave:" in text:
                return text.split("behave:", 1)[1].split()[0]
    return "answer-42"


class ScriptedEndpoint:
    def __init__(self) -> None:
        self.requests: Counter[str] = Counter()
        self.authorizations: list[str] = []
        self.api_key_headers: list[str] = []
        self.url = ""
        self.runner: web.AppRunner | None = None
        self.overrides: dict[str, str] = {}  # behaviour -> behaviour (flip a task mid-test)

    async def start(self) -> str:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.chat)
        self.runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}/v1"
        return self.url

    async def stop(self) -> None:
        if self.runner:
            await self.runner.cleanup()

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        behaviour = _behaviour(body)
        behaviour = self.overrides.get(behaviour, behaviour)
        n = self.requests[behaviour]
        self.requests[behaviour] += 1
        self.authorizations.append(request.headers.get("Authorization", ""))
        self.api_key_headers.append(request.headers.get("x-api-key", ""))
        if behaviour == "unauthorized":
            # Like a careless provider: the 401 echoes the credential it received, in the body
            # and a header, so only the proxy's scrubbing keeps the key from the agent.
            received = request.headers.get("Authorization", "")
            return _error(
                401,
                "invalid_api_key",
                f"Incorrect API key provided: {received}",
                {"x-echo": received},
            )
        if behaviour == "no-quota":
            return _error(429, "insufficient_quota", "You exceeded your current quota")
        if behaviour == "rate-limited":
            return _error(429, "rate_limit_exceeded", "slow down", {"retry-after-ms": "5"})
        if behaviour == "rate-limited-then-ok" and n % 2 == 0:
            return _error(429, "rate_limit_exceeded", "slow down", {"Retry-After": "0"})
        if behaviour == "server-error":
            return _error(500, "server_error", "boom")
        if behaviour == "not-found":
            return _error(404, "model_not_found", "no such model")
        if behaviour == "hang":
            await asyncio.sleep(3600)
        answer = {"wrong": "41", "empty": ""}.get(behaviour, "42")
        return await _stream(request, answer, truncate=behaviour == "truncated")


def _error(
    status: int, code: str, message: str, headers: dict[str, str] | None = None
) -> web.Response:
    body = {"error": {"message": message, "type": code, "code": code}}
    return web.json_response(body, status=status, headers=headers)


async def _stream(request: web.Request, answer: str, truncate: bool) -> web.StreamResponse:
    response = web.StreamResponse()
    response.content_type = "text/event-stream"
    await response.prepare(request)

    def chunk(delta: dict[str, Any], finish: str | None) -> bytes:
        data = {
            "id": "chatcmpl-test",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": "test-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + json.dumps(data).encode() + b"\n\n"

    await response.write(chunk({"role": "assistant", "content": answer}, None))
    if truncate:
        assert request.transport is not None
        request.transport.close()
        return response
    await response.write(chunk({}, "stop"))
    usage = {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}
    tail = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "test-model",
        "choices": [],
        "usage": usage,
    }
    await response.write(b"data: " + json.dumps(tail).encode() + b"\n\ndata: [DONE]\n\n")
    await response.write_eof()
    return response


def write_suite(path: Path, behaviours: list[str]) -> Path:
    """One task per behaviour; every task expects the answer 42."""
    with open(path, "w", encoding="utf-8") as fh:
        for name in behaviours:
            task = {
                "task_id": name,
                "prompt": f"behave:{name} What is six times seven?",
                "expected": {"equals": "42"},
            }
            fh.write(json.dumps(task) + "\n")
    return path


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


class LoopbackServer:
    """A real aiohttp server on 127.0.0.1 (a free port) playing a provider in a test:
    subclasses add their routes in ``routes``; ``url`` is ``http://127.0.0.1:PORT`` plus
    ``url_suffix``."""

    url_suffix = ""
    handler_cancellation = False

    def __init__(self) -> None:
        self.url = ""
        self.runner: web.AppRunner | None = None

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    async def start(self) -> str:
        app = web.Application()
        self.routes(app)
        self.runner = web.AppRunner(
            app, access_log=None, handler_cancellation=self.handler_cancellation
        )
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self.runner.addresses[0][1]}{self.url_suffix}"
        return self.url

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


async def cancel_after_rows(spec: Any, rows: int, listener: Any = None, tries: int = 300) -> Path:
    """Run ``spec`` (the real engine) and cancel it once its attempts file holds ``rows``
    rows (polled every 20 ms, ``tries`` times); the attempts file's path."""
    from driftdesk.reruns.events import RunEvent, RunStarted
    from driftdesk.reruns.run_start import execute_run

    started: list[RunStarted] = []

    class Listen:
        def on_event(self, event: RunEvent) -> None:
            if isinstance(event, RunStarted):
                started.append(event)
            if listener is not None:
                listener.on_event(event)

    task = asyncio.create_task(execute_run(spec, Listen()))
    attempts = None
    for _ in range(tries):
        await asyncio.sleep(0.02)
        if started:
            attempts = started[0].run_dir / "attempts.jsonl"
            if attempts.exists() and len(read_rows(attempts)) >= rows:
                break
    assert attempts is not None, "the run never started"
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the run was not cancelled: it ended first")
    return attempts


def needs_bwrap() -> None:
    """Fail (under CI, which installs it) or skip when bubblewrap is missing."""
    import os
    import shutil

    import pytest

    if shutil.which("bwrap") is None:
        message = "bubblewrap (bwrap) is not installed: apt-get install bubblewrap"
        pytest.fail(message) if os.environ.get("CI") else pytest.skip(message)


CLIENT_PROTOCOL = {"claude-code": "anthropic", "codex": "openai"}


def client_profile(agent: str, server: SandboxServer) -> Profile:
    """The profile a real client (``agent``: claude-code or codex) calls the sandbox
    ``server`` through: Claude Code takes the root URL, Codex the OpenAI base URL."""
    url = server.root_url if agent == "claude-code" else server.base_url
    return Profile(name="sim", protocol=CLIENT_PROTOCOL[agent], base_url=url, model=SIM_MODEL)
