"""The Compare screen gives the shared-task, paired answer: newer run as B, left-out counts,
each delta with its CI and p-value, and the plain sentence."""

from __future__ import annotations

from textual.widgets import DataTable, Label

from driftdesk.tui.screens.compare import CompareScreen

SIZE = (140, 42)


async def test_compare_screen_is_paired_and_puts_the_newer_run_as_b(
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
        assert screen.comparison.b.run_id == newer.name  # swapped: B is the newer run
        summary = str(screen.query_one("#compare-summary", Label).render())
        assert "shared tasks 5; left out: 0 only in A, 0 only in B" in summary
        assert "is the newer run, so it is B" in summary
        assert "95 % CI" in summary and "p = " in summary
        paired = screen.query_one("#paired", DataTable)
        rows = {str(paired.get_row(k)[0]): paired.get_row(k) for k in paired.rows}
        assert set(rows) == {"success_rate", "consistency_gap_pp"}
        cells = [str(c) for c in rows["success_rate"]]
        assert cells[1].endswith("pp") and "–" in cells[2] and cells[4] == "sign-flip-permutation"


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
