"""The Trend view: reached from the runs list (t) and the palette, usable at 80×24 and 120×40,
Enter on a cell opens that task in that run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Label, Static
from tui_runs import RUN_A, write_run

from driftdesk.tui.screens.task import TaskScreen
from driftdesk.tui.screens.trend import TrendScreen
from driftdesk.tui.screens.volatility import VolatilityScreen

BROKEN = {task: ["fail"] * 4 for task in RUN_A}  # night 4: every task fails every time


def _calls(run_dir: Path, served: str) -> None:
    """The proxy's rows for the run's attempts: which model answered, its fingerprint."""
    rows = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
    calls = [
        {
            "run_id": row["run_id"],
            "task_id": row["task_id"],
            "attempt": row["attempt"],
            "call_index": 0,
            "status": 200,
            "served_model": served,
            "system_fingerprint": f"fp_{served}",
        }
        for row in rows
    ]
    (run_dir / "calls.jsonl").write_text("".join(json.dumps(c) + "\n" for c in calls))


@pytest.fixture
def nights(runs_dir: Path) -> list[Path]:
    made = []
    for day, (outcomes, served) in enumerate(
        [(RUN_A, "sim-1"), (RUN_A, "sim-1"), (RUN_A, "routed-2"), (BROKEN, "routed-2")], start=1
    ):
        run_dir = write_run(runs_dir, f"nightly-2026010{day}", outcomes, day=day)
        _calls(run_dir, served)
        made.append(run_dir)
    return made


async def _open_trend(app, pilot, settle, run_dir: Path) -> TrendScreen:  # type: ignore[no-untyped-def]
    await settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, VolatilityScreen)
    screen.select_run(run_dir)
    await settle(app, pilot)
    assert screen.run_dir == run_dir.resolve()
    await pilot.press("t")
    await settle(app, pilot)
    assert isinstance(app.screen, TrendScreen)
    return app.screen


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_trend_view_flags_the_nights_and_enter_opens_the_cell(
    home, nights, make_app, settle, size
) -> None:  # type: ignore[no-untyped-def]
    app = make_app()
    async with app.run_test(size=size) as pilot:
        trend = await _open_trend(app, pilot, settle, nights[-1])
        title = str(trend.query_one("#trend-title", Label).render())
        assert "4 runs, oldest first" in title and "2 flagged" in title
        flags = str(trend.query_one("#trend-flags", Static).render())
        assert "▼ 3 served_model_changed" in flags and "▼ 4 regression" in flags
        chart = trend.query_one("#trend-chart", Static)
        assert chart.region.height >= 7 and "success %" in str(chart.render())
        matrix = trend.query_one("#trend-matrix", DataTable)
        assert matrix.region.height >= 3  # tasks show even at 24 rows
        labels = [str(c.label) for c in matrix.columns.values()]
        assert labels == ["task", "1", "2", "3▼", "4▼"]
        assert matrix.row_count == len(RUN_A)
        # the cursor starts on the newest run of the most flipped task
        first_task = str(matrix.get_row_at(0)[0])
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, TaskScreen)
        assert (app.screen.run_dir.resolve(), app.screen.task_id) == (
            nights[-1].resolve(),
            first_task,
        )
        await pilot.press("escape")
        await settle(app, pilot)
        assert app.screen is trend
        # another cell: the oldest run
        await pilot.press("left", "left", "left")
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, TaskScreen)
        assert app.screen.run_dir.resolve() == nights[0].resolve()
        await pilot.press("escape", "escape")
        await settle(app, pilot)
        assert isinstance(app.screen, VolatilityScreen)


async def test_the_trend_is_in_the_palette_and_help(home, nights, make_app, settle) -> None:  # type: ignore[no-untyped-def]
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        screen.select_run(nights[1])
        await settle(app, pilot)
        titles = {c.title: c for c in screen.palette_commands()}
        titles["volatility: trend of this suite"].callback()
        await settle(app, pilot)
        assert isinstance(app.screen, TrendScreen)
        binding = next(
            b for b in VolatilityScreen.BINDINGS if getattr(b, "id", None) == "volatility.trend"
        )
        assert binding.key == "t" and binding.description == "Trend"  # type: ignore[union-attr]


async def test_a_run_of_another_suite_is_left_out(home, nights, runs_dir, make_app, settle) -> None:  # type: ignore[no-untyped-def]
    other = write_run(runs_dir, "other-suite-run", RUN_A, day=5)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["suite"]["name"] = "another"
    (other / "manifest.json").write_text(json.dumps(manifest))
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        trend = await _open_trend(app, pilot, settle, nights[0])
        assert [r.run_id for r in trend.trend.runs] == [p.name for p in nights]


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
def test_trend_view_snapshot(snap_compare, home, nights, make_app, settle, size) -> None:  # type: ignore[no-untyped-def]
    app = make_app()

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await _open_trend(app, pilot, settle, nights[-1])
        app.clear_notifications()
        await settle(app, pilot)

    assert snap_compare(app, terminal_size=size, run_before=run_before)
