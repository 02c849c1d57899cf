"""The metering proxy: every provider call of a run goes through it, on 127.0.0.1.

An agent gets a base URL ``http://127.0.0.1:PORT/a/<attempt-token>`` (a random secret of its
try alone, refused once the try is over) and the run's throwaway key (``Authorization: Bearer``
or ``x-api-key``). The proxy refuses any other key with 401, and a token that is not a live
try's with 404 (a harness cannot call as another attempt),
swaps in the real key (OpenAI ``Authorization: Bearer``, Anthropic ``x-api-key``), adds the
profile's extra headers, forwards to the profile's base URL plus the path after the token, and
streams the response back chunk by chunk (SSE included). Each call becomes a calls.jsonl row
with its status, latency, time to first byte and tokens (from the JSON body or the SSE usage
chunks, OpenAI and Anthropic shapes) — so link errors are attributed exactly even for harnesses
that log nothing. The real key lives only in this process's memory.

Three wire protocols are understood (by the request path): Chat Completions, the OpenAI
Responses API and Anthropic Messages (``count_tokens`` included). Per call the row also holds
the cache tokens, the model that actually answered (``served_model``, the response's
``model``) and ``system_fingerprint``; ``model_mismatch`` flags a served model other than the
requested one (a dated snapshot of it, ``gpt-4o`` → ``gpt-4o-2024-08-06``, is the same model).
A stream is complete when its protocol says so (Chat: ``[DONE]`` or a ``finish_reason``;
Responses: ``response.completed`` / ``.incomplete`` / ``.failed``; Messages: ``message_stop``).
When the upstream cuts a body or stream short, the downstream connection is broken too (no
clean end), so the agent sees a transport error it can retry instead of a partial answer.

This module is the server only. Beside it: what the protocols look like (``driftdesk.wire``),
the HTTP around a call (``reruns/proxy_http.py``), the attempt-tokens and where rows go
(``reruns/proxy_attempts.py``), what is read of each answer as it passes
(``reruns/metering.py``), the key's scrubbing (``reruns/key_scrub.py``), whether a link fault
is held and the call sent again (``reruns/link_absorb.py``, ``--link-faults absorb``), the
gate a call waits at for room upstream (``reruns/call_gate.py``) and what an attempt's calls
say about it (``reruns/call_verdicts.py``). One send of a call upstream (``_exchange``:
injected fault, gate, upstream, error, redirect, streamed answer) is one function: the error
kind, whether the fault is held and what the agent was sent are set along it and recorded
once, in its ``finally``.
"""

from __future__ import annotations

import asyncio
import hmac
import itertools
import random
import secrets
import time
import urllib.parse
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import aiohttp
from aiohttp import web

from driftdesk.reruns.call_verdicts import error_kind_for
from driftdesk.reruns.injection import (
    Fault,
    FaultInjector,
    cut_answer,
    fault_response,
)
from driftdesk.reruns.key_scrub import DECODABLE, KeyScrubber, Passthrough, scrubbed_error_body
from driftdesk.reruns.link_absorb import AbsorbPolicy, CallAbsorber, Held
from driftdesk.reruns.metering import (
    CALL_ROW_ORDER,
    MAX_METERED_BODY,
    UsageMeter,
    header_value,
    judged_whole,
)
from driftdesk.reruns.proxy_attempts import AttemptCalls, AttemptTokens, RowSink
from driftdesk.reruns.proxy_http import (
    ATTEMPT_HEADER,
    DROP_REQUEST,
    DROP_RESPONSE,
    MAX_ERROR_BODY,
    REQUEST_ID_HEADER,
    AgentHungUp,
    attempt_header_value,
    break_connection,
    is_loopback_url,
    proxy_error,
    read_bounded,
    scrubbed_error_headers,
    to_agent,
)
from driftdesk.reruns.retry import parse_retry_after
from driftdesk.reruns.rundir import iso, utc_now
from driftdesk.secrets import redact
from driftdesk.wire import MODEL_PROTOCOLS, wire_protocol
from driftdesk.wire.usage import json_object, requested_model_of

if TYPE_CHECKING:
    from driftdesk.reruns.call_gate import CallGate
    from driftdesk.reruns.recording import CallCapture, CallRecorder

# A 200 body is decoded (to scrub and meter it) up to this size; past it the call fails
# (``too_large``): a gzip bomb or an endless plain body must not cost the agent, or us, gigabytes.
MAX_BODY_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True)
class _Call:
    """One agent request as the proxy sends it upstream, once or (absorbing) again."""

    url: str
    body: bytes
    protocol: str | None
    requested_model: str | None
    capture: CallCapture | None
    absorber: CallAbsorber | None


class MeteringProxy(AttemptTokens):
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
        tries: dict[tuple[str, int], int] | None = None,
        max_body_bytes: int = MAX_BODY_BYTES,
        auth_header: str | None = None,
        host: str = "127.0.0.1",
        recorder: CallRecorder | None = None,
        injector: FaultInjector | None = None,
        call_gate: CallGate | None = None,
        absorb: AbsorbPolicy | None = None,
    ) -> None:
        self.run_id = run_id
        # Where agents reach it: loopback, or the driver's cluster-facing address when attempts
        # run on other machines (--executor ray). Never 0.0.0.0 unless asked.
        self.host = host
        self._max_body_bytes = max_body_bytes
        self._scrubber = KeyScrubber(real_key)
        # How the real key goes upstream: "x-api-key", "bearer" or "none" (a keyless profile);
        # None: the protocol's usual header.
        self.auth_header = auth_header or ("x-api-key" if protocol == "anthropic" else "bearer")
        self.upstream = upstream_base_url.rstrip("/")
        self.protocol = protocol
        self._real_key = real_key
        self._extra_headers = dict(extra_headers or {})
        super().__init__(
            calls_file=calls_file,
            on_call=on_call,
            call_counts=call_counts,
            tries=tries,
            recorder=recorder,
        )
        # Injected faults (reruns/injection.py), decided per (task, attempt, arrival index): the
        # index counts every call of the slot, across its tries and resumes.
        self._injector = injector
        self._arrivals = dict(self._call_counts)
        # Room for each upstream model call (reruns/call_gate.py); None: no limit here.
        self._call_gate = call_gate
        self._to_loopback = is_loopback_url(self.upstream)
        # --link-faults absorb (reruns/link_absorb.py); None: every fault goes to the agent.
        self._absorb = absorb
        self._rng = random.Random()  # backoff jitter only
        self.run_key = "dd-run-" + secrets.token_urlsafe(24)  # throwaway, this run only
        self._token_prefix = secrets.token_hex(6) + "-"
        self._request_numbers = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""

    async def start(self) -> str:
        app = web.Application(client_max_size=MAX_METERED_BODY)
        app.router.add_route("*", "/a/{token}/{tail:.*}", self._handle)
        app.router.add_route("*", "/{tail:.*}", self._no_token)
        # handler_cancellation: when an agent hangs up (its timeout), the handler is cancelled
        # and the call is recorded right away instead of waiting on the upstream.
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.host}:{port}"
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
        if self._recorder is not None:
            self._recorder.close_files()  # every call is recorded by now

    def base_url_for(self, token: str) -> str:
        return f"{self.url}/a/{token}"

    # --- handlers -------------------------------------------------------------------------

    async def _no_token(self, request: web.Request) -> web.Response:
        return proxy_error(
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
            return proxy_error(
                401,
                "driftdesk_proxy_unauthorized",
                "this request does not carry the run's token; the proxy only serves the agents "
                "of its own run (use the OPENAI_API_KEY / ANTHROPIC_API_KEY it was given)",
            )
        calls = self._live_attempt(request.match_info["token"])
        if calls is None:
            return proxy_error(
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

    def _fault_for(self, calls: AttemptCalls, protocol: str | None) -> Fault | None:
        """The fault to inject into this call (only model endpoints are touched)."""
        if self._injector is None:
            return None
        slot = (calls.task_id, calls.attempt)
        index = self._arrivals.get(slot, 0)
        self._arrivals[slot] = index + 1
        if protocol not in MODEL_PROTOCOLS:
            return None
        return self._injector.decide(calls.task_id, calls.attempt, index)

    def _upstream_headers(self, request: web.Request, calls: AttemptCalls) -> dict[str, str]:
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in DROP_REQUEST and k.lower() != ATTEMPT_HEADER.lower()
        }
        headers.update(self._extra_headers)
        if self._to_loopback:
            headers[ATTEMPT_HEADER] = attempt_header_value(
                calls.task_id, calls.attempt, calls.try_number
            )
        if self.auth_header == "x-api-key":
            headers["x-api-key"] = self._real_key
        elif self.auth_header == "bearer":
            headers["Authorization"] = f"Bearer {self._real_key}"
        headers["Accept-Encoding"] = "identity"  # plain bytes, so usage can be read
        return headers

    def _scrub_error_body(self, raw: bytes, truncated: bool, headers: dict[str, str]) -> bytes:
        """The error body without the real key (masked), decoded first if it was compressed."""
        encoding = (header_value(headers, "content-encoding") or "identity").strip().lower()
        return scrubbed_error_body(
            self._scrubber, self._real_key, raw, truncated, encoding, MAX_ERROR_BODY
        )

    async def _forward(self, request: web.Request, calls: AttemptCalls) -> web.StreamResponse:
        assert self._session is not None
        tail = request.match_info["tail"]
        segments = [seg for seg in tail.split("/") if seg != "."]
        if ".." in segments or any("\\" in seg for seg in segments):
            # Never a path outside the profile's base URL with the real key attached.
            return proxy_error(
                400, "driftdesk_proxy_bad_path", "a path may not climb out of the base URL (..)"
            )
        url = f"{self.upstream}/{urllib.parse.quote('/'.join(segments), safe='/:@!$&()*+,;=~')}"
        if request.query_string:
            url += "?" + request.query_string
        body = await request.read()
        protocol = wire_protocol(tail)
        request_json = json_object(body)
        capture = None
        if self._recorder is not None:
            capture = self._recorder.capture(protocol, body, request_json)
        absorber = None
        if self._absorb is not None and protocol in MODEL_PROTOCOLS:
            # A deferred token serves a whole inspect eval: its calls' budget starts with them.
            opened_at = time.monotonic() if calls.deferred else calls.opened_at
            absorber = CallAbsorber(self._absorb, self._rng, opened_at)
        call = _Call(url, body, protocol, requested_model_of(request_json), capture, absorber)
        while True:
            sent = await self._exchange(request, calls, call)
            if not isinstance(sent, Held):
                return sent
            # The fault's row is written: a kill during the wait leaves it on record.
            await asyncio.sleep(sent.wait_s)

    async def _exchange(
        self, request: web.Request, calls: AttemptCalls, call: _Call
    ) -> web.StreamResponse | Held:
        """One send of the call upstream (or its injected fault), recorded as one row; a fault
        before the first byte reached the agent is ``Held`` when absorbing allows it."""
        assert self._session is not None
        started_at = iso(utc_now())
        t0 = time.perf_counter()
        protocol, capture = call.protocol, call.capture
        request_id = f"dd-{self._token_prefix}{next(self._request_numbers):x}"
        status: int | None = None
        ttfb_ms: float | None = None
        meter = UsageMeter(streamed=False, protocol=protocol)
        error_kind: str | None = None
        response: web.StreamResponse | None = None
        answered = False  # the agent has been sent the whole answer
        fault = self._fault_for(calls, protocol)
        injected: str | None = None
        held: Held | None = None  # the fault is kept from the agent, the call sent again
        gated = False  # the call gate let this call through: released once, in ``finally``
        queue_wait_s = 0.0  # waiting for the gate: queueing, not the model's latency
        upstream_headers: Mapping[str, str] = {}
        try:
            if fault is not None and fault.kind != "truncate":
                assert self._injector is not None
                injected = fault.kind
                if fault.kind == "drop":
                    error_kind = "connection"
                    held = self._hold(call, error_kind, None)
                    if held is not None:
                        return held
                    break_connection(request)
                    return web.Response()
                if fault.kind == "timeout":
                    error_kind = "timeout"  # kept when the agent gives up first (cancelled)
                    if self._absorb is not None and call.absorber is not None:
                        # Absorbing, the proxy's own first-byte timeout ends the hang.
                        await asyncio.sleep(self._absorb.first_byte_s)
                        held = self._hold(call, error_kind, None)
                        if held is not None:
                            return held
                    else:
                        await asyncio.sleep(self._injector.hang_s)
                    break_connection(request)
                    return web.Response()
                if fault.kind == "slow":
                    error_kind = "timeout"  # only if the agent gives up while it waits
                    await asyncio.sleep(self._injector.spec.slow_s)
                    error_kind = None
                else:  # a 429 or a 5xx: the provider is never asked
                    status = fault.status
                    error_kind = str(status)
                    ttfb_ms = (time.perf_counter() - t0) * 1000
                    retry_after_s = self._injector.spec.retry_after_s
                    held = self._hold(call, error_kind, retry_after_s if status == 429 else None)
                    if held is not None:
                        return held
                    if status == 429:
                        calls.last_retry_after_s = retry_after_s
                    return fault_response(fault, protocol, request_id, retry_after_s)
            truncating = fault is not None and fault.kind == "truncate"
            if self._call_gate is not None and protocol in MODEL_PROTOCOLS:
                waited_from = time.perf_counter()
                await self._call_gate.acquire(self.upstream)
                gated = True
                queue_wait_s = time.perf_counter() - waited_from
            sending = self._session.request(
                request.method,
                call.url,
                headers=self._upstream_headers(request, calls),
                data=call.body,
                allow_redirects=False,
            )
            try:
                # Absorbing, an upstream that sends nothing is given up on and asked again.
                absorbing = self._absorb if call.absorber is not None else None
                first_byte_s = absorbing.first_byte_s if absorbing is not None else None
                async with asyncio.timeout(first_byte_s):
                    upstream = await sending
            except TimeoutError:
                error_kind = "timeout"
                held = self._hold(call, error_kind, None)
                if held is not None:
                    return held
                break_connection(request)
                return web.Response()
            async with upstream:
                status = upstream.status
                upstream_headers = upstream.headers
                ttfb_ms = (time.perf_counter() - t0 - queue_wait_s) * 1000
                content_type = upstream.headers.get("content-type", "")
                meter = UsageMeter(
                    streamed=content_type.startswith("text/event-stream"), protocol=protocol
                )
                headers = {
                    k: v
                    for k, v in upstream.headers.items()
                    if k.lower() not in DROP_RESPONSE and not self._scrubber.found(v)
                }
                request_id = header_value(headers, REQUEST_ID_HEADER) or request_id
                headers.setdefault(REQUEST_ID_HEADER, request_id)
                if status >= 400:
                    # Error bodies are small and may echo what the upstream received (the real
                    # key): buffer a bounded body, scrub it, then answer in one piece.
                    raw, truncated = await read_bounded(upstream.content, MAX_ERROR_BODY)
                    error_kind = error_kind_for(status, raw)
                    asked_wait_s = parse_retry_after(upstream.headers)
                    held = self._hold(call, error_kind, asked_wait_s)
                    if held is not None:
                        return held
                    calls.last_retry_after_s = asked_wait_s
                    scrubbed = self._scrub_error_body(raw, truncated, headers)
                    if capture is not None:
                        capture.error = scrubbed
                    return web.Response(
                        status=status,
                        reason=redact(upstream.reason or "", [self._real_key]) or None,
                        headers=scrubbed_error_headers(headers),
                        body=scrubbed,
                    )
                if 300 <= status < 400:
                    # Forwarded, the agent would follow it past the proxy (and its meter).
                    error_kind = "redirect"
                    failed = proxy_error(
                        502,
                        "redirect",
                        f"the upstream answered {status} (a redirect); not followed",
                    )
                    failed.headers[REQUEST_ID_HEADER] = request_id
                    return failed
                encoding = (header_value(headers, "content-encoding") or "").strip().lower()
                if encoding in ("", "identity"):
                    encoding = ""
                elif encoding not in DECODABLE:
                    error_kind = "unreadable_encoding"  # asked for identity; cannot scrub this
                    return proxy_error(
                        502, error_kind, f"the upstream sent {encoding!r}, which we cannot read"
                    )
                headers = scrubbed_error_headers(headers)  # decoded below: no encoding left
                passthrough = Passthrough(
                    self._scrubber, meter.streamed, encoding, self._max_body_bytes
                )
                response = web.StreamResponse(
                    status=upstream.status, reason=upstream.reason, headers=headers
                )
                await to_agent(response.prepare(request))
                cut_kept = bytearray()  # a truncated answer, kept whole to be cut
                try:
                    async for chunk in upstream.content.iter_any():
                        out = passthrough.feed(chunk)
                        meter.feed(out)
                        if passthrough.too_large or meter.invalid:
                            break
                        if truncating:
                            cut_kept += out
                            continue
                        if capture is not None:
                            capture.feed(out)
                        await to_agent(response.write(out))
                        answered = meter.finished
                    else:
                        out = passthrough.flush()
                        meter.feed(out)
                        if truncating:
                            cut_kept += out
                        elif not meter.invalid:
                            if capture is not None:
                                capture.feed(out)
                            await to_agent(response.write(out))
                except (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError, zlib.error):
                    error_kind = "truncated"
                meter.close()
                if passthrough.too_large:
                    error_kind = "too_large"
                elif meter.invalid:
                    error_kind = "invalid_sse"
                elif error_kind is None and not meter.finished and judged_whole(meter, headers):
                    error_kind = "truncated"  # ended cleanly, but short of its protocol's end
                elif truncating and error_kind is None:
                    # The provider answered in full (and billed it: the meter read it all); the
                    # agent gets the first half, then a broken connection.
                    injected, error_kind = "truncate", "truncated"
                    part = cut_answer(bytes(cut_kept), meter.streamed)
                    if capture is not None:
                        capture.feed(part)
                    await to_agent(response.write(part))
                if error_kind is not None:
                    # Never end a cut answer cleanly: the agent would take the partial body
                    # for the model's answer. A dropped connection is what it can retry.
                    break_connection(request)
                    return response
                answered = meter.finished  # every byte of it is written
                await to_agent(response.write_eof())
                return response
        except AgentHungUp:
            error_kind = error_kind or (None if answered else "client_closed")
            assert response is not None  # only a write to it can hang up
            return response
        except asyncio.CancelledError:
            # The agent hung up: it gave up (its timeout), or it had the whole answer (a client
            # may close as soon as it has read the protocol's end: Codex does).
            error_kind = error_kind or (None if answered else "client_closed")
            raise
        except (aiohttp.ClientError, OSError) as exc:
            error_kind = "connection"
            if response is not None:  # headers already sent: can only break the stream
                break_connection(request)
                return response
            held = self._hold(call, error_kind, None)
            if held is not None:
                return held
            failed = proxy_error(
                502, "connection", f"upstream connection failed: {type(exc).__name__}: {exc}"
            )
            failed.headers[REQUEST_ID_HEADER] = request_id
            return failed
        finally:
            if gated:
                assert self._call_gate is not None
                # error_kind "client_closed": the agent hung up (cancelled) before the end.
                self._call_gate.release(self.upstream, status, upstream_headers, error_kind)
            self._record(
                calls,
                request,
                status,
                t0,
                ttfb_ms,
                meter,
                error_kind,
                started_at,
                call.requested_model,
                request_id,
                capture if held is None else None,  # what the agent was sent: the last send
                injected,
                queue_wait_s,
                held,
            )

    def _hold(self, call: _Call, kind: str, retry_after_s: float | None) -> Held | None:
        """The fault held back from the agent (absorbing, within its budget), or None."""
        if call.absorber is None:
            return None
        wait_s = call.absorber.hold(kind, retry_after_s)
        return Held(kind, wait_s) if wait_s is not None else None

    def _record(
        self,
        calls: AttemptCalls,
        request: web.Request,
        status: int | None,
        t0: float,
        ttfb_ms: float | None,
        meter: UsageMeter,
        error_kind: str | None,
        started_at: str,
        requested_model: str | None = None,
        request_id: str | None = None,
        capture: CallCapture | None = None,
        injected: str | None = None,
        queue_wait_s: float = 0.0,
        held: Held | None = None,
    ) -> None:
        slot = (calls.task_id, calls.attempt)
        row = {
            "run_id": self.run_id,
            "task_id": calls.task_id,
            "attempt": calls.attempt,
            "call_index": None if calls.deferred else self._next_call_index(*slot),
            "try": calls.try_number,
            "method": request.method,
            "path": "/" + request.match_info["tail"],
            "status": status,
            "latency_ms": round((time.perf_counter() - t0 - queue_wait_s) * 1000, 3),
            "ttfb_ms": round(ttfb_ms, 3) if ttfb_ms is not None else None,
            **meter.row_fields(requested_model, self._real_key),
            "error_kind": error_kind,
            "started_at": started_at,
        }
        row = {key: row.get(key) for key in CALL_ROW_ORDER} | {"request_id": request_id}
        if self._injector is not None:  # a run without injection keeps its rows as they were
            row["injected"] = injected
        if self._call_gate is not None:  # likewise a run without a gate
            row["queue_wait_s"] = round(queue_wait_s, 3)
        if self._absorb is not None:  # and a run that does not absorb
            row["absorbed"] = held is not None
            row["wait_s"] = round(held.wait_s, 3) if held is not None else None
        calls.calls.append(row)
        if not calls.deferred:
            self._write(row)
        if capture is not None and self._recorder is not None:
            # The same call_index and request_id as the row; a deferred row's once attributed.
            self._recorder.record(row, capture, held=calls.deferred)
