"""Fixtures for driving the workbench with Textual's Pilot in a throwaway home."""

from __future__ import annotations

from pathlib import Path

import pytest

from tui.app import DriftdeskApp

SIZE = (140, 42)


@pytest.fixture
def runs_dir(home) -> Path:  # type: ignore[no-untyped-def]
    path = home.project / "runs"
    path.mkdir()
    return path


@pytest.fixture
def make_app(home, runs_dir: Path):  # type: ignore[no-untyped-def]
    """A workbench whose new runs go to ``runs_dir`` and that lists only runs from there."""

    def make(**kwargs: object) -> DriftdeskApp:
        kwargs.setdefault("out_dir", runs_dir)
        kwargs.setdefault("runs_dirs", [runs_dir])
        kwargs.setdefault("blink", False)
        return DriftdeskApp(**kwargs)  # type: ignore[arg-type]

    return make


@pytest.fixture
def settle():  # type: ignore[no-untyped-def]
    return _settle


async def _settle(app: DriftdeskApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until every worker that is not a run has finished, and the UI has caught up."""
    await pilot.pause()
    for _ in range(100):
        busy = [w for w in app.workers if w.group not in ("runs",) and w.is_running]
        if not busy:
            break
        await app.workers.wait_for_complete(busy)
        await pilot.pause()
    await pilot.pause()
