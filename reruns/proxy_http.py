"""The metering proxy's HTTP around a call: the headers it drops, sets and adds, and what it
does to the two connections (writes to the agent, bounded reads of an error, a broken
connection, its own error answers). ``reruns/proxy.py`` is the server that uses them.
"""

from __future__ import annotations

import ipaddress
import urllib.parse
from collections.abc import Awaitable
from typing import Any

import aiohttp
from aiohttp import web

from driftdesk.wire.errors import proxy_error_body

PROXY_ERROR_HEADER = "x-driftdesk-error"  # set on responses the proxy itself produced
# Every response carries a request id (the upstream's, or one we make up): harnesses that log
# the ids they saw (inspect_ai records x-request-id per model call) let calls be attributed.
REQUEST_ID_HEADER = "x-request-id"
# Which try a call belongs to, ``<task_id percent-encoded>/<attempt>/<try>``: sent only to a
# loopback upstream (the simulated endpoint keys its draws on it, so a run and its fault-free
# twin draw alike attempt by attempt); a real provider never sees it.
ATTEMPT_HEADER = "X-Driftdesk-Attempt"
HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
}
DROP_REQUEST = HOP_BY_HOP | {"host", "authorization", "x-api-key", "content-length"}
DROP_RESPONSE = HOP_BY_HOP | {"content-length"}
MAX_ERROR_BODY = 64 * 1024  # an error body is buffered (to scrub it) up to this size


class AgentHungUp(Exception):
    """The agent closed its connection while the proxy wrote to it: its doing, not the link's."""


async def to_agent(write: Awaitable[Any]) -> None:
    """Await a write to the agent, its hanging up raised as ``AgentHungUp`` (a write to the
    agent failing is otherwise an ``OSError`` taken for the upstream's connection failing)."""
    try:
        await write
    except ConnectionResetError as exc:  # aiohttp's ClientConnectionResetError is one too
        raise AgentHungUp from exc


def proxy_error(status: int, kind: str, message: str) -> web.Response:
    body = proxy_error_body(kind, message)
    return web.json_response(body, status=status, headers={PROXY_ERROR_HEADER: kind})


async def read_bounded(content: aiohttp.StreamReader, limit: int) -> tuple[bytes, bool]:
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


def break_connection(request: web.Request) -> None:
    """End the response without its terminating chunk: the client reads a broken body."""
    if request.transport is not None:
        request.transport.close()


def is_loopback_url(url: str) -> bool:
    """Whether ``url``'s host is this machine (127.0.0.0/8, ::1 or ``localhost``)."""
    host = urllib.parse.urlsplit(url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def attempt_header_value(task_id: str, attempt: int, try_number: int) -> str:
    """``X-Driftdesk-Attempt``'s value: the task id percent-encoded (a ``/`` in it too)."""
    return f"{urllib.parse.quote(task_id, safe='')}/{attempt}/{try_number}"


def scrubbed_error_headers(headers: dict[str, str]) -> dict[str, str]:
    # The scrubbed body is sent as plain bytes with its own length.
    return {k: v for k, v in headers.items() if k.lower() != "content-encoding"}
