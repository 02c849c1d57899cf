"""Task ids carrying terminal escape sequences are shown inert in the TUI: the volatility table
and the live attempt grid print them escaped, never raw."""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widgets import DataTable, OptionList
from tui_runs import write_run

from driftdesk.tui.screens.volatility import VolatilityScreen
from driftdesk.tui.widgets.attempt_grid import AttemptGrid

HOSTILE = "t\x1b]0;PWNED\x07\x1b[2J\x9b31m\u202eend"
SHOWN = "t\\x1b]0;PWNED\\x07\\x1b[2J\\x9b31m\\u202eend"


def _raw_controls(text: str) -> bool:
    return any(ch in text for ch in ("\x1b", "\x07", "\x9b", "\u202e"))


async def test_the_volatility_table_shows_a_hostile_task_id_escaped(
    home, runs_dir, make_app, settle
) -> None:  # type: ignore[no-untyped-def]
    write_run(runs_dir, "sandbox-sandbox-sim-20260101T100000Z", {HOSTILE: ["pass", "fail"]}, day=1)
    write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", {HOSTILE: ["pass", "pass"]}, day=2)
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        screen.query_one("#runs", OptionList).focus()
        await pilot.press("enter")
        await settle(app, pilot)
        table = screen.query_one("#tasks", DataTable)
        cells = [str(table.get_row(key)[1]) for key in table.rows]
        assert cells == [SHOWN]
        assert not _raw_controls(cells[0])


class GridApp(App[None]):
    def compose(self) -> ComposeResult:
        yield AttemptGrid(id="grid")


async def test_the_attempt_grid_shows_a_hostile_task_id_escaped() -> None:
    app = GridApp()
    async with app.run_test(size=(120, 10)) as pilot:
        grid = app.query_one(AttemptGrid)
        grid.set_run((HOSTILE, "plain"), 3)
        await pilot.pause()
        line = "".join(segment.text for segment in grid.render_line(1))
        assert line.startswith(SHOWN)
        assert not _raw_controls(line)
