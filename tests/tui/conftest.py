"""Fixtures for driving the workbench with Textual's Pilot in a throwaway home."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from textual.widgets import DataTable
from tui_runs import RUN_A, RUN_B, write_run

from driftdesk.tui.app import DriftdeskApp

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


@pytest.fixture
def open_launch_form():  # type: ignore[no-untyped-def]
    """``await open_launch_form(app, pilot, repeat="2", ...)``: press n on the Run screen and
    fill the launch form's fields (widget id -> value); returns the form."""
    from driftdesk.tui.screens.launch import LaunchScreen

    async def open_form(app: DriftdeskApp, pilot, **fields: str) -> LaunchScreen:  # type: ignore[no-untyped-def]
        await _settle(app, pilot)
        await pilot.press("n")
        await _settle(app, pilot)
        form = app.screen
        assert isinstance(form, LaunchScreen)
        for widget_id, value in fields.items():
            form.query_one(f"#{widget_id}").value = value  # type: ignore[attr-defined]
        return form

    return open_form


def _busy(app: DriftdeskApp) -> bool:
    workers = [
        w for w in app.workers if w.group != "runs" and (w.is_running or w.state.name == "PENDING")
    ]
    # DataTables measure new rows on their next idle: until then columns are header-wide.
    tables = [t for t in app.screen.query(DataTable) if t._require_update_dimensions]
    # measured successes reach the runs list after a short wait when they come in a burst
    redraws = [s for s in app.screen_stack if getattr(s, "success_redraw_pending", False)]
    return bool(workers or tables or redraws)


async def _settle(app: DriftdeskApp, pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until no worker (other than runs) is pending or running and the screen's tables
    are measured — twice in a row, since a finished worker's message can start another."""
    from textual.worker import WorkerCancelled, WorkerFailed

    quiet = 0
    for _ in range(200):
        await pilot.pause()
        if _busy(app):
            quiet = 0
            busy = [w for w in app.workers if w.group != "runs" and w.is_running]
            if busy:
                # an exclusive worker replaced by a newer one ends cancelled: fine here
                with contextlib.suppress(WorkerFailed, WorkerCancelled):
                    await app.workers.wait_for_complete(busy)
            else:
                await pilot.pause(0.01)
            continue
        quiet += 1
        if quiet == 2:
            break


# -- fixed run dirs (the documented run-dir layout, deterministic content: ``tui_runs``) ---------


@pytest.fixture
def run_writer():  # type: ignore[no-untyped-def]
    """``write(runs_dir, run_id, which)`` with which "A" or "B": a fixed run dir anywhere."""

    def write(base: Path, run_id: str, which: str) -> Path:
        return write_run(
            base, run_id, RUN_A if which == "A" else RUN_B, day=1 if which == "A" else 2
        )

    return write


@pytest.fixture
def fixture_runs(runs_dir: Path) -> tuple[Path, Path]:
    return (
        write_run(runs_dir, "sandbox-sandbox-sim-20260101T100000Z", RUN_A, day=1),
        write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", RUN_B, day=2),
    )


# -- the real sandbox endpoint and a profile pointing at it --------------------------------------


@pytest.fixture
def sandbox(home):  # type: ignore[no-untyped-def]
    """The simulated endpoint on 127.0.0.1 (zero latency) and a ``sandbox`` profile for it."""
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    server = SandboxServer(latency_ms=0.0)
    server.start()
    ProfileStore().save(
        Profile(name="sandbox", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
    )
    yield server
    server.stop()


@pytest.fixture
def wait_for_run():  # type: ignore[no-untyped-def]
    return _wait_for_run


async def _wait_for_run(app: DriftdeskApp, pilot, live) -> None:  # type: ignore[no-untyped-def]
    """Wait for the worker executing ``live`` (``live.worker``) to end, then let the UI catch up.

    Waits on that one worker: ``app.workers.wait_for_complete([])`` (a run that already ended
    has left the manager) waits on *every* worker, and an exclusive refresh worker replaced by
    a newer one ends cancelled — that, not the run, was the "cancelled run" seen under load.
    A cancelled run worker fails the test here."""
    from textual.worker import WorkerFailed

    assert live.worker is not None, "the run was not started through the app"
    try:
        await live.worker.wait()
    except WorkerFailed:
        # a run that failed: the test looks at how it was reported
        assert live.status == "failed", live.status
    await pilot.pause()
    assert live.finished, live.status
