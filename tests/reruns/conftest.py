"""Fixtures for the rerun engine tests (helpers live in reruns_helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from reruns_helpers import ScriptedEndpoint

from driftdesk.reruns.simulated_endpoint import SandboxServer


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedEndpoint]:
    endpoint = ScriptedEndpoint()
    await endpoint.start()
    yield endpoint
    await endpoint.stop()


@pytest.fixture
def sandbox_for() -> Iterator[Callable[[Path], SandboxServer]]:
    """Start a simulated endpoint playing a suite file; every one started is stopped after."""
    servers: list[SandboxServer] = []

    def start(suite: Path) -> SandboxServer:
        server = SandboxServer(suites=[suite])
        server.start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
