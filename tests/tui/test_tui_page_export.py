"""The workbench's e offers the page for what is on screen: the Volatility screen's export
writes the run's page beside its JSON and CSV, the Compare and Trend screens write theirs; each
holds the same figures as the CLI's JSON of the same thing."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from driftdesk.tui.screens.compare import CompareScreen
from driftdesk.tui.screens.trend import TrendScreen
from driftdesk.tui.screens.volatility import VolatilityScreen

SIZE = (140, 42)


def _data(page: Path) -> Any:
    (block,) = re.findall(
        r'<script type="application/json" id="driftdesk-data">(.*?)</script>',
        page.read_text(encoding="utf-8"),
        re.DOTALL,
    )
    return json.loads(block)


async def _wait_for(path: Path, app: Any, pilot: Any, settle: Any) -> None:
    for _ in range(100):
        await settle(app, pilot)
        if path.exists():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"{path} was not written")


async def test_e_exports_the_page_of_the_run_the_comparison_and_the_trend(
    home, fixture_runs, make_app, settle
) -> None:
    from driftdesk.analysis.compare import compare_runs
    from driftdesk.analysis.report import build_report
    from driftdesk.analysis.trend import build_trend

    older, newer = fixture_runs
    exports = home.project / "driftdesk-exports"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen) and screen.run_dir is not None
        run_dir = screen.run_dir
        await pilot.press("e")
        await _wait_for(exports / f"{run_dir.name}.html", app, pilot, settle)

        app.push_screen(CompareScreen(older, newer))
        await settle(app, pilot)
        assert isinstance(app.screen, CompareScreen) and app.screen.comparison is not None
        await pilot.press("e")
        compared = exports / f"{older.name}-vs-{newer.name}.html"
        await _wait_for(compared, app, pilot, settle)
        app.pop_screen()

        app.push_screen(TrendScreen(newer, [older, newer]))
        await settle(app, pilot)
        assert isinstance(app.screen, TrendScreen) and app.screen.trend is not None
        suite = app.screen.trend.suite
        await pilot.press("e")
        await _wait_for(exports / f"trend-{suite}.html", app, pilot, settle)

    (run,) = _data(exports / f"{run_dir.name}.html")["runs"]
    assert run["report"]["success_rate"] == build_report([run_dir])[0].to_json()["success_rate"]
    assert run["report"]["tasks_judged"] == 5
    comparison = compare_runs(older, newer).to_json()
    assert _data(compared)["compare"]["delta"] == comparison["delta"]
    trend = _data(exports / f"trend-{suite}.html")["trend"]
    assert [r["run_id"] for r in trend["runs"]] == [
        r.run_id for r in build_trend([older, newer], agent="all").runs
    ]


async def test_e_on_a_task_exports_the_runs_page_and_its_link_to_the_task(
    home, fixture_runs, make_app, settle
) -> None:
    from driftdesk.tui.screens.task import TaskScreen

    older, _ = fixture_runs
    page = home.project / "driftdesk-exports" / f"{older.name}.html"
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(older, "arith-02"))
        await settle(app, pilot)
        await pilot.press("e")
        await _wait_for(page, app, pilot, settle)
        await settle(app, pilot)
        said = [n.message for n in app._notifications]
    assert any(m.endswith(f"{page.resolve().as_uri()}#task=arith-02") for m in said), said
    assert "arith-02" in {t["task_id"] for t in _data(page)["runs"][0]["report"]["tasks"]}
