"""Snapshot tests of the main screens with deterministic content: fixed run dirs, fixed size, no
clock and no cursor blink. Update after an intended UI change with
``pytest tests/tui/test_tui_snapshots.py --snapshot-update`` and look at the SVGs."""

from __future__ import annotations

import pytest

from driftdesk.tui.screens.compare import CompareScreen
from driftdesk.tui.screens.volatility import VolatilityScreen

SIZE = (140, 42)


async def _settled(app, pilot, settle) -> None:  # type: ignore[no-untyped-def]
    await settle(app, pilot)
    app.clear_notifications()
    await settle(app, pilot)  # again: nothing new since the notifications went


async def _run_a(app, pilot, settle) -> VolatilityScreen:  # type: ignore[no-untyped-def]
    await settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, VolatilityScreen)
    screen.query_one("#runs").focus()
    await pilot.press("down")
    await settle(app, pilot)
    screen.query_one("#tasks").focus()
    await _settled(app, pilot, settle)
    return screen


def test_volatility_screen(snap_compare, fixture_runs, make_app, settle) -> None:
    app = make_app()

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _run_a(app, pilot, settle)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_task_drilldown(snap_compare, fixture_runs, make_app, settle) -> None:
    app = make_app()

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _run_a(app, pilot, settle)
        await pilot.press("enter")  # the highlighted task
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_compare_screen(snap_compare, fixture_runs, make_app, settle) -> None:
    app = make_app()
    a, b = fixture_runs

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await settle(app, pilot)
        app.push_screen(CompareScreen(a, b))
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_help_screen(snap_compare, fixture_runs, make_app, settle) -> None:
    app = make_app(start_mode="run")

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await settle(app, pilot)
        await pilot.press("f1")
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


@pytest.fixture
def no_keyring():  # type: ignore[no-untyped-def]
    """The keyring library's own fail backend: the screen as on a machine without a keyring
    (the same picture with or without the test keyring, so the snapshot is deterministic)."""
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(previous)


def test_profiles_screen(snap_compare, home, no_keyring, make_app, settle) -> None:
    from driftdesk.providers.profiles import Profile, ProfileStore

    ProfileStore().save(Profile("sandbox", "openai", "http://127.0.0.1:8765/v1", "driftdesk-sim-1"))
    ProfileStore().save(
        Profile("gateway", "anthropic", "https://gw.example.com/anthropic", "claude-sonnet-4-5")
    )
    app = make_app(start_mode="profiles")

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
