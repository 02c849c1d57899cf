"""The metering proxy: every provider call of a run goes through it, on 127.0.0.1.

An agent gets a base URL ``http://127.0.0.1:PORT/a/<attempt-token>`` and the run's throwaway
key (``Authorization: Bearer`` or ``x-api-key``). The proxy refuses any other key with 401,
swaps in the real key (OpenAI ``Authorization: Bearer``, Anthropic ``x-api-key``), adds the
profile's extra headers, forwards to the profile's base URL plus the path after the token, and
streams the response back chunk by chunk (SSE included). Each call becomes a calls.jsonl row
with its status, latency, time to first byte and tokens (from the JSON body or the SSE usage
chunks, OpenAI and Anthropic shapes) — so link errors are attributed exactly even for harnesses
that log nothing. The real key lives only in this process's memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import json
import re
import secrets
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from aiohttp import web

from driftdesk.reruns.retry import parse_retry_after
from driftdesk.reruns.rundir import iso, utc_now
from driftdesk.secrets import redact

PROXY_ERROR_HEADER = "x-driftdesk-error"  # set on responses the proxy itself produced
_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
_DROP_REQUEST = _HOP_BY_HOP | {"host", "authorization", "x-api-key", "content-length"}
_DROP_RESPONSE = _HOP_BY_HOP | {"content-length"}
_MAX_METERED_BODY = 16 * 1024 * 1024
_MAX_ERROR_BODY = 64 * 1024  # an error body is buffered (to scrub it) up to this size
_FINISHED_SSE = re.compile(
    rb'"finish_reason"\s*:\s*"|"type"\s*:\s*"message_stop"|^data:\s*\[DONE\]'
)


def _proxy_error(status: int, kind: str, message: str) -> web.Response:
    body = {
        "error": {"message": f"driftdesk metering proxy: {message}", "type": kind, "code": kind}
    }
    return web.json_response(body, status=status, headers={PROXY_ERROR_HEADER: kind})


def _usage_from(obj: Any, usage: dict[str, int | None]) -> None:
    """Fold the usage found in one JSON body or SSE event into ``usage`` (OpenAI or Anthropic)."""
    if not isinstance(obj, dict):
        return
    if obj.get("type") == "message_start" and isinstance(obj.get("message"), dict):
        obj = obj["message"]  # Anthropic stream: input tokens arrive in message_start
    found = obj.get("usage")
    if not isinstance(found, dict):
        return
    prompt = found.get("prompt_tokens", found.get("input_tokens"))
    completion = found.get("completion_tokens", found.get("output_tokens"))
    if isinstance(prompt, int):
        usage["prompt"] = prompt
    if isinstance(completion, int):
        usage["completion"] = completion  # Anthropic message_delta is cumulative: last wins
    total = found.get("total_tokens")
    if isinstance(total, int):
        usage["total"] = total


def error_kind_for(status: int, body: bytes) -> str:
    """``insufficient_quota`` for a 429 that says so, else the status as a string."""
    if status == 429 and b"insufficient_quota" in body:
        return "insufficient_quota"
    return str(status)


async def _read_bounded(content: aiohttp.StreamReader, limit: int) -> tuple[bytes, bool]:
    """Up to ``limit`` bytes of a body, and whether there was more (left unread)."""
    body = bytearray()
    try:
        while len(body) < limit:
            chunk = await content.read(limit - len(body))
            if not chunk:
                return bytes(body), False
            body += chunk
        return bytes(body), not content.at_eof()
    except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
        return bytes(body), True


def _scrubbed_error_headers(headers: dict[str, str]) -> dict[str, str]:
    # The scrubbed body is sent as plain bytes with its own length.
    return {k: v for k, v in headers.items() if k.lower() != "content-encoding"}


class _UsageMeter:
    def __init__(self, streamed: bool) -> None:
        self.streamed = streamed
        self.usage: dict[str, int | None] = {"prompt": None, "completion": None, "total": None}
        self.finished = False  # a stream saw its end marker
        self.body = bytearray()  # non-streamed bodies (and error bodies), bounded
        self._pending = b""

    def feed(self, chunk: bytes) -> None:
        if not self.streamed:
            if len(self.body) < _MAX_METERED_BODY:
                self.body += chunk
            return
        data = self._pending + chunk
        lines = data.split(b"\n")
        self._pending = lines.pop()
        for line in lines:
            self._line(line.strip())

    def _line(self, line: bytes) -> None:
        if not line.startswith(b"data:"):
            return
        if _FINISHED_SSE.search(line):
            self.finished = True
        if b'"usage"' in line:
            with contextlib.suppress(ValueError):
                _usage_from(json.loads(line[5:]), self.usage)

    def close(self) -> None:
        if self.streamed:
            if self._pending:
                self._line(self._pending.strip())
                self._pending = b""
            return
        with contextlib.suppress(ValueError):
            _usage_from(json.loads(bytes(self.body)), self.usage)

    def tokens(self) -> tuple[int | None, int | None, int | None]:
        prompt, completion, total = (
            self.usage["prompt"],
            self.usage["completion"],
            self.usage["total"],
        )
        if total is None and prompt is not None and completion is not None:
            total = prompt + completion
        return prompt, completion, total


class RowSink(Protocol):
    """Where call rows go: a ``JsonlAppender`` or anything with the same ``append``."""

    def append(self, row: dict[str, Any]) -> None: ...


@dataclass
class AttemptCalls:
    """What the proxy saw for one attempt-token (one try of one (task, attempt) slot)."""

    task_id: str
    attempt: int
    calls: list[dict[str, Any]] = field(default_factory=list)
    in_flight: int = 0
    last_retry_after_s: float | None = None  # from the last failed call's headers
    idle: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.idle.set()


class MeteringProxy:
    """One per run, on the engine's event loop. ``start()`` returns its base URL."""

    def __init__(
        self,
        *,
        run_id: str,
        upstream_base_url: str,
        protocol: str,
        real_key: str,
        extra_headers: dict[str, str] | None = None,
        calls_file: RowSink | None = None,
        on_call: Callable[[dict[str, Any]], None] | None = None,
        call_counts: dict[tuple[str, int], int] | None = None,
        auth_header: str | None = None,
    ) -> None:
        self.run_id = run_id
        # How the real key goes upstream: "x-api-key", "bearer" or "none" (a keyless profile);
        # None: the protocol's usual header.
        self.auth_header = auth_header or ("x-api-key" if protocol == "anthropic" else "bearer")
        self.upstream = upstream_base_url.rstrip("/")
        self.protocol = protocol
        self._real_key = real_key
        self._extra_headers = dict(extra_headers or {})
        self._calls_file = calls_file
        self._on_call = on_call
        self._call_counts = dict(call_counts or {})
        self.run_key = "dd-run-" + secrets.token_urlsafe(24)  # throwaway, this run only
        self._token_prefix = secrets.token_hex(6) + "-"
        self._attempt_counter = 0
        self._attempts: dict[str, AttemptCalls] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=_MAX_METERED_BODY)
        app.router.add_route("*", "/a/{token}/{tail:.*}", self._handle)
        app.router.add_route("*", "/{tail:.*}", self._no_token)
        # handler_cancellation: when an agent hangs up (its timeout), the handler is cancelled
        # and the call is recorded right away instead of waiting on the upstream.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=30),
            auto_decompress=False,
        )
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
        if self._session is not None:
            await self._session.close()
            self._session = None

    # --- attempts -------------------------------------------------------------------------

    def open_attempt(self, task_id: str, attempt: int) -> str:
        # Unguessable per run, unique per attempt: a random run prefix plus a counter (the
        # run key, not this token, is what authorises a request).
        self._attempt_counter += 1
        token = f"{self._token_prefix}{self._attempt_counter:x}"
        self._attempts[token] = AttemptCalls(task_id, attempt)
        return token

    def base_url_for(self, token: str) -> str:
        return f"{self.url}/a/{token}"

    def attempt_calls(self, token: str) -> AttemptCalls:
        return self._attempts[token]

    async def settle(self, token: str, timeout_s: float = 2.0) -> AttemptCalls:
        """Wait (bounded) for the attempt's in-flight calls to be recorded."""
        calls = self._attempts[token]
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                await calls.idle.wait()
        return calls

    def close_attempt(self, token: str) -> AttemptCalls | None:
        return self._attempts.pop(token, None)

    # --- handlers -------------------------------------------------------------------------

    async def _no_token(self, request: web.Request) -> web.Response:
        return _proxy_error(
            404, "driftdesk_proxy_no_attempt", "paths start with /a/<attempt-token>/"
        )

    def _authorised(self, request: web.Request) -> bool:
        presented = request.headers.get("x-api-key", "")
        auth = request.headers.get("authorization", "")
        if auth.lower().startswith("bearer "):
            presented = presented or auth[7:].strip()
        return bool(presented) and hmac.compare_digest(presented, self.run_key)

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        if not self._authorised(request):
            return _proxy_error(
                401,
                "driftdesk_proxy_unauthorized",
                "this request does not carry the run's token; the proxy only serves the agents "
                "of its own run (use the OPENAI_API_KEY / ANTHROPIC_API_KEY it was given)",
            )
        token = request.match_info["token"]
        calls = self._attempts.get(token)
        if calls is None:
            return _proxy_error(
                404, "driftdesk_proxy_unknown_attempt", "unknown or finished attempt token"
            )
        calls.in_flight += 1
        calls.idle.clear()
        try:
            return await self._forward(request, calls)
        finally:
            calls.in_flight -= 1
            if calls.in_flight == 0:
                calls.idle.set()

    def _upstream_headers(self, request: web.Request) -> dict[str, str]:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _DROP_REQUEST}
        headers.update(self._extra_headers)
        if self.auth_header == "x-api-key":
            headers["x-api-key"] = self._real_key
        elif self.auth_header == "bearer":
            headers["Authorization"] = f"Bearer {self._real_key}"
        headers["Accept-Encoding"] = "identity"  # plain bytes, so usage can be read
        return headers

    def _scrub_error_body(self, raw: bytes, truncated: bool, headers: dict[str, str]) -> bytes:
        """The error body without the real key (masked), decoded first if it was compressed."""
        encoding = (
            next((v for k, v in headers.items() if k.lower() == "content-encoding"), "identity")
            .strip()
            .lower()
        )
        if encoding in ("gzip", "x-gzip", "deflate"):
            try:
                wbits = 16 + zlib.MAX_WBITS if "gzip" in encoding else zlib.MAX_WBITS
                raw = zlib.decompressobj(wbits).decompress(raw, _MAX_ERROR_BODY)
            except zlib.error:
                raw = b""
        elif encoding not in ("", "identity"):
            raw = b""  # cannot read it, so cannot scrub it: withhold it
        if not raw:
            return b""
        text = raw.decode("utf-8", "surrogateescape")
        key = self._real_key
        # A body cut at the bound may end with the start of the key: drop that tail too.
        for size in range(min(len(key), len(text)) if truncated else 0, 3, -1):
            if text.endswith(key[:size]):
                text = text[:-size]
                break
        return redact(text, [key]).encode("utf-8", "surrogateescape")

    async def _forward(self, request: web.Request, calls: AttemptCalls) -> web.StreamResponse:
        assert self._session is not None
        tail = request.match_info["tail"]
        url = f"{self.upstream}/{tail}"
        if request.query_string:
            url += "?" + request.query_string
        started_at = iso(utc_now())
        t0 = time.perf_counter()
        body = await request.read()
        status: int | None = None
        ttfb_ms: float | None = None
        meter = _UsageMeter(streamed=False)
        error_kind: str | None = None
        response: web.StreamResponse | None = None
        try:
            async with self._session.request(
                request.method,
                url,
                headers=self._upstream_headers(request),
                data=body,
                allow_redirects=False,
            ) as upstream:
                status = upstream.status
                ttfb_ms = (time.perf_counter() - t0) * 1000
                content_type = upstream.headers.get("content-type", "")
                meter = _UsageMeter(streamed=content_type.startswith("text/event-stream"))
                headers = {
                    k: v
                    for k, v in upstream.headers.items()
                    if k.lower() not in _DROP_RESPONSE and self._real_key not in v
                }
                if status >= 400:
                    # Error bodies are small and may echo what the upstream received (the real
                    # key): buffer a bounded body, scrub it, then answer in one piece.
                    raw, truncated = await _read_bounded(upstream.content, _MAX_ERROR_BODY)
                    error_kind = error_kind_for(status, raw)
                    calls.last_retry_after_s = parse_retry_after(upstream.headers)
                    return web.Response(
                        status=status,
                        reason=redact(upstream.reason or "", [self._real_key]) or None,
                        headers=_scrubbed_error_headers(headers),
                        body=self._scrub_error_body(raw, truncated, headers),
                    )
                response = web.StreamResponse(
                    status=upstream.status, reason=upstream.reason, headers=headers
                )
                await response.prepare(request)
                try:
                    async for chunk in upstream.content.iter_any():
                        meter.feed(chunk)
                        await response.write(chunk)
                except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError):
                    error_kind = "truncated"
                meter.close()
                if error_kind is None and meter.streamed and not meter.finished:
                    error_kind = "truncated"
                await response.write_eof()
                return response
        except asyncio.CancelledError:
            error_kind = error_kind or "client_closed"  # the agent gave up (its timeout)
            raise
        except (aiohttp.ClientError, OSError) as exc:
            error_kind = "connection"
            if response is not None:  # headers already sent: can only end the stream
                return response
            return _proxy_error(
                502, "connection", f"upstream connection failed: {type(exc).__name__}: {exc}"
            )
        finally:
            self._record(calls, request, status, t0, ttfb_ms, meter, error_kind, started_at)

    def _record(
        self,
        calls: AttemptCalls,
        request: web.Request,
        status: int | None,
        t0: float,
        ttfb_ms: float | None,
        meter: _UsageMeter,
        error_kind: str | None,
        started_at: str,
    ) -> None:
        slot = (calls.task_id, calls.attempt)
        index = self._call_counts.get(slot, 0)
        self._call_counts[slot] = index + 1
        prompt, completion, total = meter.tokens()
        row = {
            "run_id": self.run_id,
            "task_id": calls.task_id,
            "attempt": calls.attempt,
            "call_index": index,
            "method": request.method,
            "path": "/" + request.match_info["tail"],
            "status": status,
            "latency_ms": round((time.perf_counter() - t0) * 1000, 3),
            "ttfb_ms": round(ttfb_ms, 3) if ttfb_ms is not None else None,
            "streamed": meter.streamed,
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": total,
            "error_kind": error_kind,
            "started_at": started_at,
        }
        calls.calls.append(row)
        if self._calls_file is not None:
            self._calls_file.append(row)
        if self._on_call is not None:
            self._on_call(row)
