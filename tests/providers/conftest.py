"""Fixtures for the providers tests: a real OpenAI/Anthropic-compatible server on loopback, and
a helper that creates profiles through the real CLI (defined in providers_fixtures.py, which
tests/cli/conftest.py imports from too)."""

from __future__ import annotations

from providers_fixtures import (  # noqa: F401  (fixtures: pytest finds them by name here)
    add_profile,
    elsewhere,
    endpoint,
    provider_server,
    second_server,
)
