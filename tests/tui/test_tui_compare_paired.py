"""The Compare screen gives the shared-task, paired answer: newer run as B, left-out counts,
each delta with its CI and p-value, and the plain sentence."""

from __future__ import annotations

from textual.widgets import DataTable, Label

from driftdesk.tui.screens.compare import CompareScreen

SIZE = (140, 42)


async def test_compare_screen_is_paired_and_says_when_a_is_the_newer_run(
    home, fixture_runs, make_app, settle
) -> None:
    older, newer = fixture_runs
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(CompareScreen(newer, older))  # given newest first
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        # kept as given (analysis.compare never swaps unasked), and said
        assert screen.comparison.a.run_id == newer.name
        summary = str(screen.query_one("#compare-summary", Label).render())
        assert "shared tasks 5; left out: 0 only in A, 0 only in B" in summary
        assert f"A ({newer.name}) started after B ({older.name})" in summary
        assert "95 % CI" in summary and "p = " in summary
        paired = screen.query_one("#paired", DataTable)
        rows = {str(paired.get_row(k)[0]): paired.get_row(k) for k in paired.rows}
        assert set(rows) == {"success_rate", "consistency_gap_pp"}
        cells = [str(c) for c in rows["success_rate"]]
        assert cells[1].endswith("pp") and "–" in cells[2] and cells[4] == "stratified-permutation"


async def test_volatility_screen_shows_the_noise_floor(
    home, fixture_runs, make_app, settle
) -> None:
    from textual.widgets import Static

    from driftdesk.tui.screens.volatility import VolatilityScreen

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        await settle(app, pilot)
        assert screen.report is not None
        floor = screen.report.noise_floor
        assert floor is not None and floor.mde_pp is not None
        summary = str(screen.query_one("#summary", Static).render())
        assert f"noise floor       {floor.mde_pp:.1f} pp" in summary
        assert f"5 pp: {floor.repeats_for_pp[5.0]}" in summary


async def test_many_changed_tasks_list_the_first_ones_and_copy_all(
    home, runs_dir, make_app, settle
) -> None:  # type: ignore[no-untyped-def]
    """The changed tasks of two big runs (thousands) are listed like the task table: the first
    ``MAX_LISTED_ROWS``, with how many there are; ``c`` copies every one."""
    from tui_runs import write_run

    from driftdesk.tui.widgets.tables import MAX_LISTED_ROWS

    count = MAX_LISTED_ROWS + 30
    before = {f"t{i:04d}": ["fail", "fail"] for i in range(count)}
    after = {f"t{i:04d}": ["pass", "pass"] for i in range(count)}
    a = write_run(runs_dir, "sandbox-sandbox-sim-20260101T100000Z", before, day=1)
    b = write_run(runs_dir, "sandbox-sandbox-sim-20260102T100000Z", after, day=2)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(CompareScreen(a, b))
        await settle(app, pilot)
        assert len(app.screen.comparison.changed) == count
        changed = app.screen.query_one("#changed", DataTable)
        assert [str(changed.get_row(k)[0]) for k in changed.rows] == list(before)[:MAX_LISTED_ROWS]
        title = str(app.screen.query_one("#changed-title", Label).render())
        assert f"the first {MAX_LISTED_ROWS} of {count}" in title
        await pilot.press("c")
        assert len(app.clipboard.splitlines()) == 1 + count
