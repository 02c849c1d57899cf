"""Instruments the TUI tests put on real Textual and driftdesk methods: a module of its own,
so any test file can import them whatever ``conftest`` pytest imported first."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class Counting:
    """Counts calls of a real method (those ``when`` accepts, if given) and calls it; undone
    with the test's monkeypatch."""

    def __init__(
        self, monkeypatch: Any, target: Any, name: str, when: Callable[..., Any] | None = None
    ) -> None:
        self.calls = 0
        original = getattr(target, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls += bool(when is None or when(*args, **kwargs))
            return original(*args, **kwargs)

        monkeypatch.setattr(target, name, counted)
