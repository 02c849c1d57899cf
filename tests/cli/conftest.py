"""Tests of the CLI as such: what ``driftdesk`` prints, refuses and exits with, through the real
subprocess. The fixtures (``home``, ``cli``) come from tests/conftest.py.

The runs these tests read or make are built with the helpers of the cores' own tests
(``analysis_fixtures``, ``reruns_helpers``, ``inspect_helpers``; the profile tests use
``providers_testkit`` and the providers tests' fixtures): pytest puts only a test file's own
folder on ``sys.path``, so those folders are added here, as the benchmarks do, and the fixtures
imported by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent
for _helpers in ("analysis", "providers", "reruns"):
    if str(_TESTS / _helpers) not in sys.path:
        sys.path.append(str(_TESTS / _helpers))

from providers_fixtures import add_profile, elsewhere, provider_server  # noqa: E402, F401
