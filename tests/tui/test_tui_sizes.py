"""Every screen usable from 80×24 up: the Volatility headline always visible, the Profiles table's
"active on" and "drift" columns, the add-profile form's Save/Cancel on screen. Snapshots at
80×24, 100×30 and 160×45 (update with ``--snapshot-update`` after an intended change, and look
at the SVGs); the assertions say what "usable" means, so a snapshot update cannot hide it."""

from __future__ import annotations

import pytest
from textual.widgets import Button, DataTable, Static

from driftdesk.tui.screens.profile_form import ProfileFormScreen
from driftdesk.tui.screens.profiles import ProfilesScreen
from driftdesk.tui.screens.volatility import VolatilityScreen

SIZES = [(80, 24), (100, 30), (160, 45)]
size_ids = [f"{w}x{h}" for w, h in SIZES]


def _inside(app, widget) -> bool:  # type: ignore[no-untyped-def]
    """The whole widget is on screen (not below the fold, not cut at the right)."""
    region = widget.region
    return (
        region.width > 0
        and region.height > 0
        and region.right <= app.size.width
        and region.bottom <= app.size.height
    )


async def _settled(app, pilot, settle) -> None:  # type: ignore[no-untyped-def]
    await settle(app, pilot)
    app.clear_notifications()
    await settle(app, pilot)


def _profiles() -> None:
    from driftdesk.providers.profiles import Profile, ProfileStore

    ProfileStore().save(Profile("sandbox", "openai", "http://127.0.0.1:8765/v1", "driftdesk-sim-1"))
    ProfileStore().save(
        Profile("gateway", "anthropic", "https://gw.example.com/anthropic", "claude-sonnet-4-5")
    )


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
async def test_volatility_headline_is_visible(size, fixture_runs, make_app, settle) -> None:
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await _settled(app, pilot, settle)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        summary = screen.query_one("#summary", Static)
        assert _inside(app, summary) and summary.region.width >= 40
        text = str(summary.render())
        run_id = fixture_runs[1].name
        assert run_id in text  # on one line, not printed vertically
        for headline in ("success", "consistency gap", "CI95"):
            assert headline in text
        assert _inside(app, screen.query_one("#tasks", DataTable))


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_volatility_snapshot(size, snap_compare, fixture_runs, make_app, settle) -> None:
    app = make_app()

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settled(app, pilot, settle)
        app.screen.query_one("#tasks").focus()
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
async def test_profiles_table_shows_every_column(size, home, make_app, settle) -> None:
    _profiles()
    app = make_app(start_mode="profiles")
    async with app.run_test(size=size) as pilot:
        await _settled(app, pilot, settle)
        assert isinstance(app.screen, ProfilesScreen)
        table = app.screen.query_one("#profiles-table", DataTable)
        visible = table.scrollable_content_region.width
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= visible


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_profiles_snapshot(size, snap_compare, home, make_app, settle) -> None:
    import keyring
    from keyring.backends import fail

    _profiles()
    app = make_app(start_mode="profiles")
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # the same picture with or without a keyring

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settled(app, pilot, settle)

    try:
        assert snap_compare(app, terminal_size=size, run_before=run_before)
    finally:
        keyring.set_keyring(previous)


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
async def test_add_profile_form_buttons_are_reachable(size, home, make_app, settle) -> None:
    app = make_app(start_mode="profiles")
    async with app.run_test(size=size) as pilot:
        await _settled(app, pilot, settle)
        await pilot.press("a")
        await settle(app, pilot)
        form = app.screen
        assert isinstance(form, ProfileFormScreen)
        buttons = list(form.query(Button))
        assert buttons
        for button in buttons:
            assert _inside(app, button), button.id


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_add_profile_form_snapshot(size, snap_compare, home, make_app, settle) -> None:
    app = make_app(start_mode="profiles")

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settled(app, pilot, settle)
        await pilot.press("a")
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_run_screen_snapshot(size, snap_compare, home, make_app, settle) -> None:
    app = make_app(start_mode="run")

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=size_ids)
def test_help_snapshot(size, snap_compare, fixture_runs, make_app, settle) -> None:
    app = make_app()

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _settled(app, pilot, settle)
        await pilot.press("f1")
        await _settled(app, pilot, settle)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


async def test_a_still_cursor_holds_in_every_focused_field(home, make_app, settle) -> None:
    """Snapshots and screenshots need a cursor that does not blink: with ``blink=False`` the
    focused field's cursor is drawn and stays (a blinking one made the add-profile snapshot
    differ whenever the picture was taken in the cursor's dark half-second)."""
    from textual.widgets import Input

    app = make_app(start_mode="profiles")
    async with app.run_test(size=(100, 30)) as pilot:
        await _settled(app, pilot, settle)
        await pilot.press("a")
        await settle(app, pilot)
        checked = 0
        for _ in range(8):  # the next fields too: every focused field, not only the first
            field = app.focused
            if isinstance(field, Input):
                assert not field.cursor_blink, field.id
                await pilot.pause(0.6)  # longer than a blink's half-period
                assert field._cursor_visible, field.id
                checked += 1
            await pilot.press("tab")
            await settle(app, pilot)
        assert checked >= 3
