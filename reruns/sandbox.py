"""A simulated OpenAI-compatible endpoint that plays a model on the built-in suites.

It is **simulated** and says so everywhere: the model id ``simulated-model-1``, an
``x-driftdesk-simulated: true`` header on every response, and the CLI's startup banner.

Each built-in task gets a fixed skill (from a hash of its id): some tasks are always right,
some flaky, some mostly wrong — so repeated runs drift like a real model's. Faults are injected
at the given rates: 429 with Retry-After, 500, 401, hangs past any timeout, truncated streams
and empty answers. Every random draw comes from ``Random(f"{seed}:{task}:{n}")`` (n = the
task's request count), so a seed replays the same behaviour per task whatever the concurrency.

``SandboxServer(...).start()`` runs it in a background thread and returns its base URL.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import random
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from driftdesk.reruns.suites import Task, builtin_suites, load_suite

SIM_MODEL = "simulated-model-1"
SIM_HEADER = "x-driftdesk-simulated"
BANNER = (
    "driftdesk sandbox: a SIMULATED model ({model}), not a real provider. It plays the built-in "
    "suites with per-task skill and injects faults at the rates you set."
)


@dataclass(frozen=True)
class FaultRates:
    rate_limit: float = 0.0  # 429 with Retry-After
    server_error: float = 0.0  # 500
    auth_error: float = 0.0  # 401
    timeout: float = 0.0  # hang until the client gives up
    truncate: float = 0.0  # stream (or body) cut short
    empty: float = 0.0  # a finished, empty answer

    def total(self) -> float:
        return (
            self.rate_limit
            + self.server_error
            + self.auth_error
            + self.timeout
            + self.truncate
            + self.empty
        )


def task_skill(task_id: str) -> float:
    """The simulated chance of answering ``task_id`` right (fixed per task)."""
    u = int(hashlib.sha256(task_id.encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    if u < 0.4:
        return 1.0  # always right
    if u < 0.75:
        return 0.5 + (u - 0.4)  # flaky: 0.5 .. 0.85
    return 0.1 + (u - 0.75) * 0.8  # mostly wrong: 0.1 .. 0.3


def _wrong_answer(reference: str, rng: random.Random) -> str:
    number = re.fullmatch(r"-?\d+(\.\d+)?", reference.strip())
    if number:
        delta = rng.choice([1, -1, 2, 10])
        if number.group(1):
            places = len(number.group(1)) - 1
            return f"{float(reference) + delta / 10**places:.{places}f}"
        return str(int(reference) + delta)
    return rng.choice(["I am not sure.", reference[::-1], reference + " (approximately)"])


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@dataclass
class SandboxStats:
    requests: int = 0
    by_kind: Counter[str] = field(default_factory=Counter)
    authorizations: list[str] = field(default_factory=list)  # what callers sent (tests check)


class SandboxEndpoint:
    """The aiohttp application; use ``SandboxServer`` to run it."""

    def __init__(
        self,
        *,
        seed: int = 0,
        latency_ms: float = 0.0,
        faults: FaultRates | None = None,
        retry_after_s: float = 1.0,
        hang_s: float = 3600.0,
    ) -> None:
        self.seed = seed
        self.latency_s = latency_ms / 1000.0
        self.faults = faults or FaultRates()
        self.retry_after_s = retry_after_s
        self.hang_s = hang_s
        self.stats = SandboxStats()
        self._per_task: Counter[str] = Counter()
        self._tasks: dict[str, Task] = {}
        for name in builtin_suites():
            for task in load_suite(name).tasks:
                self._tasks.setdefault(task.prompt_text, task)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        return app

    def _headers(self) -> dict[str, str]:
        return {SIM_HEADER: "true"}

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {
                        "id": SIM_MODEL,
                        "object": "model",
                        "created": 0,
                        "owned_by": "driftdesk-sandbox (simulated)",
                    }
                ],
            },
            headers=self._headers(),
        )

    def _error(self, status: int, kind: str, message: str, code: str) -> web.Response:
        headers = self._headers()
        if status == 429:
            headers["retry-after-ms"] = str(int(self.retry_after_s * 1000))
            headers["Retry-After"] = str(max(1, round(self.retry_after_s)))
        body = {"error": {"message": f"{message} (simulated)", "type": kind, "code": code}}
        return web.json_response(body, status=status, headers=headers)

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.stats.requests += 1
        self.stats.authorizations.append(request.headers.get("Authorization", ""))
        try:
            body = await request.json()
        except json.JSONDecodeError:
            return self._error(400, "invalid_request_error", "body is not JSON", "bad_json")
        messages = body.get("messages") or []
        prompt = next((_text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
        task = self._tasks.get(prompt)
        key = task.task_id if task else "(unknown)"
        n = self._per_task[key]
        self._per_task[key] += 1
        rng = random.Random(f"{self.seed}:{key}:{n}")
        if self.latency_s:
            await asyncio.sleep(self.latency_s * (0.5 + rng.random()))
        fault = self._draw_fault(rng)
        self.stats.by_kind[fault or "ok"] += 1
        if fault == "rate_limit":
            return self._error(429, "rate_limit_error", "Rate limit reached", "rate_limit_exceeded")
        if fault == "server_error":
            return self._error(500, "server_error", "The server had an error", "server_error")
        if fault == "auth_error":
            return self._error(401, "invalid_request_error", "Incorrect API key", "invalid_api_key")
        if fault == "timeout":
            await asyncio.sleep(self.hang_s)
            return self._error(504, "timeout", "hung and gave up", "timeout")
        message = self._play(task, messages, rng, empty=fault == "empty")
        prompt_tokens = sum(len(_text_of(m.get("content"))) for m in messages) // 4 + 8
        completion_tokens = len(json.dumps(message)) // 4 + 1
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if body.get("stream"):
            include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(
                request, message, usage if include_usage else None, truncate=fault == "truncate"
            )
        return await self._whole(request, message, usage, truncate=fault == "truncate")

    def _draw_fault(self, rng: random.Random) -> str | None:
        draw = rng.random()
        for name in ("rate_limit", "server_error", "auth_error", "timeout", "truncate", "empty"):
            rate = getattr(self.faults, name)
            if draw < rate:
                return name
            draw -= rate
        return None

    def _play(
        self, task: Task | None, messages: list[dict[str, Any]], rng: random.Random, empty: bool
    ) -> dict[str, Any]:
        if empty:
            return {"role": "assistant", "content": ""}
        if task is None:
            return {
                "role": "assistant",
                "content": f"This is {SIM_MODEL}, a simulated model: it only knows the built-in "
                "driftdesk suites.",
            }
        has_tool_results = any(m.get("role") == "tool" for m in messages)
        if task.tools and not has_tool_results:
            calls: list[dict[str, Any]] = []
            for tool in task.tools:
                for args_key in tool.results:
                    if args_key == "*":
                        continue
                    calls.append(
                        {
                            "id": f"call_{len(calls)}_{rng.randrange(16**6):06x}",
                            "type": "function",
                            "function": {"name": tool.name, "arguments": args_key},
                        }
                    )
            return {"role": "assistant", "content": None, "tool_calls": calls}
        reference = task.reference_answer or ""
        right = rng.random() < task_skill(task.task_id)
        return {
            "role": "assistant",
            "content": reference if right else _wrong_answer(reference, rng),
        }

    def _completion_id(self) -> str:
        return f"chatcmpl-sim-{time.time_ns():x}"

    async def _whole(
        self, request: web.Request, message: dict[str, Any], usage: dict[str, int], truncate: bool
    ) -> web.StreamResponse:
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        payload = json.dumps(
            {
                "id": self._completion_id(),
                "object": "chat.completion",
                "created": int(time.time()),
                "model": SIM_MODEL,
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": usage,
            }
        ).encode()
        if not truncate:
            return web.Response(
                body=payload, content_type="application/json", headers=self._headers()
            )
        response = web.StreamResponse(headers=self._headers())
        response.content_type = "application/json"
        response.content_length = len(payload)
        await response.prepare(request)
        await response.write(payload[: len(payload) // 2])
        self._cut(request)
        return response

    @staticmethod
    def _cut(request: web.Request) -> None:
        # Drop the connection mid-body, as a dying upstream would.
        if request.transport is not None:
            request.transport.close()

    async def _stream(
        self,
        request: web.Request,
        message: dict[str, Any],
        usage: dict[str, int] | None,
        truncate: bool,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers=self._headers())
        response.content_type = "text/event-stream"
        await response.prepare(request)
        base = {
            "id": self._completion_id(),
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": SIM_MODEL,
        }

        async def send(delta: dict[str, Any], finish: str | None = None) -> None:
            chunk = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")

        await send({"role": "assistant", "content": ""})
        if message.get("tool_calls"):
            for index, call in enumerate(message["tool_calls"]):
                await send({"tool_calls": [{"index": index, **call}]})
            finish = "tool_calls"
        else:
            text = str(message.get("content") or "")
            pieces = [text[i : i + 12] for i in range(0, len(text), 12)]
            if truncate:
                pieces = pieces[: max(1, len(pieces) // 2)]
            for piece in pieces:
                await send({"content": piece})
            finish = "stop"
        if truncate:
            self._cut(request)
            return response
        await send({}, finish)
        if usage is not None:
            chunk = {**base, "choices": [], "usage": usage}
            await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response


class SandboxServer:
    """Runs a ``SandboxEndpoint`` on 127.0.0.1 in a background thread (or in your loop)."""

    def __init__(self, port: int = 0, host: str = "127.0.0.1", **endpoint: Any) -> None:
        self.endpoint = SandboxEndpoint(**endpoint)
        self.host = host
        self.port = port
        self.base_url = ""
        self._runner: web.AppRunner | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    @property
    def stats(self) -> SandboxStats:
        return self.endpoint.stats

    async def start_async(self) -> str:
        # handler_cancellation: a hung request ends when its client hangs up.
        self._runner = web.AppRunner(
            self.endpoint.app(), access_log=None, handler_cancellation=True
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = self._runner.addresses[0][1]
        self.base_url = f"http://{self.host}:{self.port}/v1"
        return self.base_url

    async def stop_async(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def start(self) -> str:
        """Start in a background thread; returns the base URL (``http://127.0.0.1:PORT/v1``)."""
        ready = threading.Event()
        failure: list[BaseException] = []

        def serve() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self.start_async())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self.stop_async())
            loop.close()

        self._thread = threading.Thread(target=serve, name="driftdesk-sandbox", daemon=True)
        self._thread.start()
        ready.wait(10)
        if failure:
            raise failure[0]
        return self.base_url

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
            self._thread = None
            self._loop = None

    def __enter__(self) -> SandboxServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
