"""The shell: screens switch by key, every binding has an id and a description, the help screen
lists them, the command palette runs `group: action` commands, and q quits cleanly."""

from __future__ import annotations

from typing import ClassVar

import pytest
from textual.binding import Binding, BindingType
from textual.widgets import DataTable
from tui_probes import Counting

from driftdesk.tui.app import DriftdeskApp
from driftdesk.tui.screens.compare import CompareScreen
from driftdesk.tui.screens.launch import LaunchScreen
from driftdesk.tui.screens.modals import ConfirmScreen, HelpScreen, NameScreen, PickScreen
from driftdesk.tui.screens.profile_form import ProfileFormScreen
from driftdesk.tui.screens.profiles import ProfilesScreen
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.screens.task import TaskScreen
from driftdesk.tui.screens.volatility import VolatilityScreen
from driftdesk.tui.widgets.attempt_grid import AttemptGrid

SIZE = (140, 42)
SCREENS = [DriftdeskApp, ProfilesScreen, RunScreen, VolatilityScreen, TaskScreen, CompareScreen]
MODALS = [ConfirmScreen, PickScreen, HelpScreen, ProfileFormScreen, LaunchScreen, NameScreen]


@pytest.mark.parametrize("owner", [*SCREENS, *MODALS, AttemptGrid], ids=lambda c: c.__name__)
def test_every_binding_has_an_id_and_a_description(owner: type) -> None:
    bindings = [b for b in owner.BINDINGS if isinstance(b, Binding)]
    assert bindings
    for binding in bindings:
        assert binding.id, f"{owner.__name__}: {binding.key} has no id"
        assert binding.description, f"{owner.__name__}: {binding.key} has no description"
    ids = [b.id for b in bindings]
    assert len(ids) == len(set(ids))


async def test_keys_switch_screens_and_help_lists_bindings(home, make_app, settle) -> None:
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
        await pilot.press("2")
        assert isinstance(app.screen, RunScreen)
        await pilot.press("3")
        assert isinstance(app.screen, VolatilityScreen)
        await pilot.press("f1")
        assert isinstance(app.screen, HelpScreen)
        table = app.screen.query_one("#help-table", DataTable)
        ids = {str(table.get_row(k)[2]) for k in table.rows}
        assert {"volatility.rerun", "volatility.compare", "app.quit"} <= ids
        await pilot.press("escape")
        assert isinstance(app.screen, VolatilityScreen)


async def test_command_palette_runs_a_screen_command(home, make_app, settle) -> None:
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+p")
        await pilot.press(*"add")  # fuzzy: the best hit is "profiles: add"
        await settle(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfileFormScreen)


@pytest.mark.parametrize("start_mode", ["run", "volatility", "profiles"])
async def test_a_first_visit_to_a_screen_neither_builds_it_nor_restyles_the_app(
    home, make_app, settle, monkeypatch, start_mode: str
) -> None:
    """Seen (issue 13, ``bench_tui_live.py``): the first switch to Profiles during a 10k live
    run was every round's slowest key press (156–297 ms). Textual composed the screen then,
    re-parsed the whole stylesheet and restyled every widget of the app. The screens are built
    once the app is up instead, and one built that way reads nothing (no keyring, no run
    scan) until it is shown."""
    loads = Counting(monkeypatch, ProfilesScreen, "load_profiles")
    rescans = Counting(monkeypatch, VolatilityScreen, "rescan")
    app = make_app(start_mode=start_mode)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert (loads.calls > 0, rescans.calls > 0) == (
            start_mode == "profiles",
            start_mode == "volatility",
        )
        shown = {"profiles": ProfilesScreen, "run": RunScreen, "volatility": VolatilityScreen}
        reparses = Counting(monkeypatch, app.stylesheet, "reparse")
        composes = [Counting(monkeypatch, screen, "compose") for screen in shown.values()]
        for key, mode in (("1", "profiles"), ("2", "run"), ("3", "volatility")):
            if mode == start_mode:
                continue
            loaded, rescanned = loads.calls, rescans.calls
            await pilot.press(key)
            await settle(app, pilot)
            assert isinstance(app.screen, shown[mode])
            # shown: now it loads what it shows
            assert loads.calls > loaded if mode == "profiles" else loads.calls == loaded
            if mode == "volatility":
                assert rescans.calls > rescanned
        assert reparses.calls == 0
        assert [c.calls for c in composes] == [0, 0, 0]


async def test_switching_back_restyles_a_screen_only_after_an_app_wide_change(
    home, make_app, settle, monkeypatch
) -> None:
    """Seen (issue 13, ``bench_tui_live.py``): switching back to the Run screen during a 10k
    live run (``2``) was one of the slowest key presses (p50 ~50 ms): Textual restyled every
    widget of the screen on each resume (~40 ms). It needs to only when something app-wide
    (app focus, the theme) changed while the screen was away: those restyle just the screen
    in front. A widget's own class change restyles it as it happens."""
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        run_screen = app.screen
        assert isinstance(run_screen, RunScreen)
        restyles = Counting(monkeypatch, run_screen, "update_node_styles")

        async def away_and_back(while_away=lambda: None, by_key: bool = True) -> int:
            before = restyles.calls
            await pilot.press("1")
            await settle(app, pilot)
            while_away()
            await settle(app, pilot)
            if by_key:
                await pilot.press("2")
            else:  # a key press would give the app its focus back
                await app.switch_mode("run")
            await settle(app, pilot)
            assert app.screen is run_screen
            return restyles.calls - before

        assert await away_and_back() == 0
        assert await away_and_back() == 0

        def blur() -> None:
            app.app_focus = False

        # the app lost focus while the screen was away
        assert await away_and_back(blur, by_key=False) == 1
        assert "blur" in app.pseudo_classes
        app.app_focus = True
        await settle(app, pilot)
        # back by key: the key gives the app its focus back, as it was when the screen left
        assert await away_and_back(blur) == 0
        assert "focus" in app.pseudo_classes

        # A theme change while away: the screen shows the new theme's background.
        before = run_screen.styles.background
        light = "textual-light" if app.current_theme.dark else "textual-dark"
        await away_and_back(lambda: setattr(app, "theme", light))
        assert run_screen.styles.background != before
        assert (
            run_screen.styles.background.hex.lower() == (app.current_theme.background or "").lower()
        )


async def test_q_quits(home, make_app, settle) -> None:
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0


async def test_help_names_keys_as_they_are_typed(home, make_app, settle) -> None:
    app = make_app(start_mode="volatility")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("f1")
        table = app.screen.query_one("#help-table", DataTable)
        keys = {str(table.get_row(k)[0]) for k in table.rows}
        assert "/" in keys and "slash" not in keys
        assert any("?" in key for key in keys)
        assert not any("question_mark" in key or "square_bracket" in key for key in keys)
        # the table fits the dialog at 80 columns: ids are not cut off
        width = sum(c.get_render_width(table) for c in table.columns.values())
        assert width <= table.scrollable_content_region.width


async def test_a_focus_move_that_changes_no_shown_key_leaves_the_footer_alone(
    home, make_app, settle
) -> None:
    # Textual's Footer mounts a widget per key on every focus move; restyling them was the
    # slowest part of tab / shift+tab (bench_tui_live). These widgets show no keys of their own.
    from textual.widgets._footer import FooterKey

    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one(DataTable)
        table.focus()
        await settle(app, pilot)
        before = list(app.screen.query(FooterKey))
        assert len(before) >= 3
        await pilot.press("tab")
        await settle(app, pilot)
        assert app.focused is not None and app.focused is not table
        assert list(app.screen.query(FooterKey)) == before  # the same widgets, not rebuilt
        await pilot.press("2", "1")  # away and back: nothing changed here either
        await settle(app, pilot)
        assert list(app.screen.query(FooterKey)) == before


async def test_the_footer_follows_a_focus_move_that_changes_its_keys() -> None:
    from textual.app import App, ComposeResult
    from textual.widgets import Button
    from textual.widgets._footer import FooterKey

    from driftdesk.tui.widgets.footer import BindingsFooter

    class Keyed(Button):
        BINDINGS: ClassVar[list[BindingType]] = [Binding("k", "press", "Keyed action")]

    class Small(App[None]):
        def compose(self) -> ComposeResult:
            yield Button("plain", id="plain")
            yield Keyed("keyed", id="keyed")
            yield BindingsFooter()

    app = Small()
    async with app.run_test() as pilot:

        async def shown() -> set[str]:
            await pilot.pause()
            await pilot.pause()
            return {k.description for k in app.screen.query(FooterKey)}

        app.query_one("#plain").focus()
        assert "Keyed action" not in await shown()
        app.query_one("#keyed").focus()
        assert "Keyed action" in await shown()
        app.query_one("#plain").focus()
        assert "Keyed action" not in await shown()
