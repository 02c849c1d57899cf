"""What a new user trips over in the workbench (round 3), driven with Pilot."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_help_shows_every_key_whole_and_enter_to_drill_in(
    home, make_app, settle, size
) -> None:
    app = make_app(start_mode="volatility")
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await pilot.press("f1")
        await settle(app, pilot)
        table = app.screen.query_one("#help-table", DataTable)
        rows = {str(table.get_row(k)[2]): table.get_row(k) for k in table.rows}
        assert str(rows["volatility.open_task"][0]) in ("⏎", "enter")
        resume = str(rows["volatility.resume"][1])
        assert resume.startswith("Resume")
        does = table.columns[next(k for k in table.columns if str(k.value) == "does")]
        longest = max(len(str(row[1])) for row in rows.values())
        assert longest <= does.width, "a description is cut at the column's edge"
        width = sum(c.get_render_width(table) for c in table.columns.values())
        assert width <= table.scrollable_content_region.width  # nothing cut at the edge


async def test_the_launch_form_offers_the_clis_default_concurrency(home, make_app, settle) -> None:
    from textual.widgets import Input

    from driftdesk.cli.main import build_parser
    from driftdesk.tui.screens.launch import LaunchScreen

    cli_default = build_parser().parse_args(["run", "--profile", "p", "--suite", "s"]).concurrency
    app = make_app(start_mode="run")
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("n")
        await settle(app, pilot)
        assert isinstance(app.screen, LaunchScreen)
        assert app.screen.query_one("#concurrency", Input).value == str(cli_default)


async def test_inside_the_demo_no_screen_tells_you_to_run_the_demo(home, make_app, settle) -> None:
    from textual.widgets import Label, Static

    app = make_app(demo=True, demo_repeat=1, demo_concurrency=2)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        title = str(app.screen.query_one("#run-title", Label).render())
        await pilot.press("1")
        await settle(app, pilot)
        detail = str(app.screen.query_one("#profile-detail-text", Static).render())
        assert "no saved profiles yet" in detail and "demo-sandbox" in detail
        await app.action_quit()
    assert "driftdesk demo" not in title + detail


async def test_compare_names_the_runs_by_order_and_its_sentences_wrap(
    fixture_runs, make_app, settle
) -> None:
    from textual.widgets import Label

    from driftdesk.tui.screens.compare import CompareScreen
    from driftdesk.tui.screens.modals import PickScreen

    older, newer = fixture_runs
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert screen.run_dir == newer  # the newest run is selected first: it becomes A
        await pilot.press("m")
        await settle(app, pilot)
        assert isinstance(app.screen, PickScreen)
        title = app.screen.query_one("#dialog-title", Label)
        assert "(before)" not in str(title.render()) and "as A" in str(title.render())
        assert title.outer_size.width <= title.parent.content_region.width
        app.pop_screen()
        app.push_screen(CompareScreen(newer, older))
        await settle(app, pilot)
        await pilot.pause(0.5)
        summary = app.screen.query_one("#compare-summary", Label)
        assert "started after B" in str(summary.render())  # the order given is kept, and said
        assert summary.outer_size.width <= summary.parent.content_region.width


async def test_each_success_number_on_the_volatility_screen_is_named_by_what_it_averages(
    fixture_runs, make_app, settle
) -> None:
    from textual.widgets import Static

    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        await pilot.pause(0.5)
        await settle(app, pilot)
        screen = app.screen
        listed = [run.details for run in screen.runs]
        assert listed and all("attempts passed" in d and "success " not in d for d in listed)
        summary = str(screen.query_one("#summary", Static).render())
        assert "mean task success" in summary and "attempts passed" in summary


async def test_the_task_table_shows_spread_as_max_minus_min_in_pp(
    fixture_runs, make_app, settle
) -> None:
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#tasks", DataTable)
        labels = [str(c.label) for c in table.columns.values()]
        assert "max−min pp" in labels and "spread" not in labels
        column = [str(c.key.value) for c in table.columns.values()].index("spread")
        cells = {str(k.value): str(table.get_row(k)[column]) for k in table.rows}
        assert cells["travel-2_1"] == "100" and cells["arith-01"] == "0"  # mixed; all passed
