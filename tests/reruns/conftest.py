"""Fixtures for the rerun engine tests (helpers live in reruns_helpers.py)."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from reruns_helpers import ScriptedEndpoint

from driftdesk.reruns.simulated_endpoint import SandboxServer
from tests.conftest import real_client


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


@pytest.fixture
def clients_on_path(home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real Claude Code and Codex on PATH, in a HOME of the test's own (``home``): the
    clients' shell tools source the user's shell set-up, and this machine's (pyenv's rehash
    lock, held by a dead process) stalled each command 60 s."""
    folder = real_client("claude").parent
    real_client("codex")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
