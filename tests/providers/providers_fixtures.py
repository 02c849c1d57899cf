"""Fixtures shared by the providers tests and the CLI's profile tests (tests/cli): a real
OpenAI/Anthropic-compatible server on loopback, and a helper that creates profiles through the
real CLI. Each conftest that wants them imports them by name."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from aiohttp import web
from providers_testkit import Endpoint, ProviderServer, fresh_key


@pytest.fixture
def provider_server() -> Iterator[ProviderServer]:
    yield from _serve()


@pytest.fixture
def second_server() -> Iterator[ProviderServer]:
    """Another provider server on its own port (e.g. the target of a redirect)."""
    yield from _serve()


def _serve() -> Iterator[ProviderServer]:
    server = ProviderServer()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.handle)
    with serving(app) as base_url:
        server.base_url = base_url
        yield server
        server.mode = "ok"  # a handler hanging in mode "hang" is cancelled on the way out


@contextlib.contextmanager
def serving(app: web.Application) -> Iterator[str]:
    """Serve ``app`` on 127.0.0.1 (a random port) from a thread; yields its base URL."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    holder: dict[str, Any] = {}

    async def start() -> None:
        runner = web.AppRunner(app, shutdown_timeout=0.1)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        sockets = site._server.sockets  # type: ignore[union-attr]
        holder["url"] = f"http://127.0.0.1:{sockets[0].getsockname()[1]}"
        holder["runner"] = runner

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        started.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert started.wait(10), "server did not start"
    try:
        yield holder["url"]
    finally:

        async def stop() -> None:
            # Handlers still running (a "hang" mode) are cancelled, not left pending.
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in others:
                task.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            await holder["runner"].cleanup()

        asyncio.run_coroutine_threadsafe(stop(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()


@pytest.fixture
def add_profile(cli: Callable[..., Any]) -> Callable[..., str]:
    """Create a profile through the real CLI; returns the key it stored (or '')."""

    def add(
        name: str,
        protocol: str = "openai",
        base_url: str = "http://127.0.0.1:9/v1",
        model: str = "model-a",
        key: str | None = None,
        extra: tuple[str, ...] = (),
    ) -> str:
        key = fresh_key() if key is None else key
        args = [
            "profile",
            "add",
            name,
            "--protocol",
            protocol,
            "--base-url",
            base_url,
            "--model",
            model,
            *extra,
        ]
        if key:
            args.append("--key-stdin")
        result = cli(*args, input=key if key else "")
        assert result.returncode == 0, result.stderr
        return key

    return add


def _serve_vendor() -> Iterator[Endpoint]:
    endpoint = Endpoint()
    with serving(endpoint.vendor.app()) as base_url:
        endpoint.base_url = base_url
        yield endpoint


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    yield from _serve_vendor()


@pytest.fixture
def elsewhere() -> Iterator[Endpoint]:
    """A second endpoint: where a user's own file points, which a pinned launch must not use."""
    yield from _serve_vendor()
