"""Fixtures for the rerun engine tests (helpers live in reruns_helpers.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from reruns_helpers import ScriptedEndpoint


@pytest.fixture
async def scripted() -> AsyncIterator[ScriptedEndpoint]:
    endpoint = ScriptedEndpoint()
    await endpoint.start()
    yield endpoint
    await endpoint.stop()
