"""Staged as the mutation run's root conftest.py (not collected in ./run tests): each test
starts with the mutated modules' caches empty.

mutmut records which tests reach a function, then runs each mutant in a process forked from
one that already ran them. A cached answer would hide its callees from every test but the
first to compute it (so those tests are never selected for their mutants), and the inherited
cache would hide a mutant from the test run anyway: ``_base64_cores``' mutants all survived so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from driftdesk.secrets import _DECODED_UNITS, secret_finder, secret_shapes


@pytest.fixture(autouse=True)
def _fresh_caches() -> Iterator[None]:
    secret_shapes.cache_clear()
    secret_finder.cache_clear()
    _DECODED_UNITS.clear()
    yield
