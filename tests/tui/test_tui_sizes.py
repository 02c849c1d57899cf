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


# -- everything reachable at 80×24, the size the README promises --------------------------------


async def test_every_launch_field_and_button_is_reachable_at_80x24(
    home, make_app, settle, open_launch_form
) -> None:
    """Seen: the form was cut after Repeat/Concurrency; 'Where attempts run', 'Only tasks from
    an earlier run' and Launch/Cancel were off screen, and Tab did not scroll to them."""
    from textual.widgets import Select

    app = make_app(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        form = await open_launch_form(app, pilot)
        await settle(app, pilot)
        for button in form.query(Button):
            assert _inside(app, button), button.id
        assert _inside(app, form.query_one("#launch-where"))
        reached = set()
        wanted = {"repeats", "target", "budget", "executor", "only", "earlier", "ray-address"}
        for _ in range(17):  # Tab through every field: each is scrolled into view in turn
            await pilot.press("tab")
            await settle(app, pilot)
            field = app.focused
            if field is not None and field.id in wanted:
                assert _inside(app, field), field.id
                assert field.region.y > 0
                reached.add(field.id)
        assert reached == wanted
        assert isinstance(form.query_one("#earlier"), Select)


async def test_help_scrolls_to_its_last_key_at_80x24(fixture_runs, make_app, settle) -> None:
    """Seen: 6 of the Volatility screen's 18 keys showed; Down/PageDown/End did nothing."""
    from textual.containers import VerticalScroll

    from driftdesk.tui.screens.modals import HelpScreen

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot, settle)
        await pilot.press("f1")
        await settle(app, pilot)
        assert isinstance(app.screen, HelpScreen)
        body = app.screen.query_one("#help-body", VerticalScroll)
        assert _inside(app, body) and body.max_scroll_y > 0 and body.scroll_y == 0
        await pilot.press("pagedown")
        await settle(app, pilot)
        assert body.scroll_y > 0
        await pilot.press("end")
        await pilot.pause(0.3)
        assert body.scroll_y == body.max_scroll_y
        table = app.screen.query_one("#help-table", DataTable)
        last_row_y = table.region.y + table.row_count  # its header, then one line a key
        assert last_row_y < body.region.bottom  # the last key (ctrl+q) is on screen


async def test_footer_keeps_help_and_quit_at_80x24(fixture_runs, make_app, settle) -> None:
    """Seen: the footer was cut to `m Com▏^p palette`, hiding Quit and Help."""
    from textual.widgets._footer import FooterKey

    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot, settle)
        for mode in ("volatility", "run", "profiles"):
            await app.switch_mode(mode)
            await _settled(app, pilot, settle)
            keys = {key.action: key for key in app.screen.query(FooterKey)}
            for action in ("help", "ask_quit"):
                assert action in keys and _inside(app, keys[action]), (mode, action)
                assert keys[action].region.right < 60, (mode, action)


async def test_the_task_table_shows_more_than_a_few_rows_at_80x24(
    fixture_runs, make_app, settle
) -> None:
    """Seen: 3 task rows under a ten-line headline; on a short screen the headline's facts go
    side by side."""
    app = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await _settled(app, pilot, settle)
        screen = app.screen
        table = screen.query_one("#tasks", DataTable)
        assert table.row_count >= 5 and _inside(app, table)
        assert table.size.height - 1 >= 6  # room for a header, then at least six task rows
        text = str(screen.query_one("#summary", Static).render())
        for headline in ("success", "consistency gap", "CI95", "link errors", "noise floor"):
            assert headline in text
