"""`driftdesk demo` end to end in Pilot: sandbox, sandbox profile, a live run, volatility."""

from __future__ import annotations

import json

from textual.widgets import DataTable

from driftdesk.tui.screens.volatility import VolatilityScreen

SIZE = (140, 42)


async def test_demo_runs_live_then_lands_on_volatility(
    home, make_app, settle, wait_for_run, runs_dir
) -> None:
    app = make_app(demo=True, demo_repeat=2, demo_concurrency=8, demo_latency_ms=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert "SIMULATED" in app.screen.sub_title
        live = app.demo_run
        assert live is not None
        await wait_for_run(app, pilot, live)
        assert live.worker.state.name == "SUCCESS" and live.status == "completed"
        rows = [json.loads(r) for r in (live.run_dir / "attempts.jsonl").read_text().splitlines()]
        assert len({(r["task_id"], r["attempt"]) for r in rows}) == len(live.task_ids) * 2
        await settle(app, pilot)
        assert isinstance(app.screen, VolatilityScreen)
        assert app.screen.run_dir == live.run_dir.resolve()
        table = app.screen.query_one("#tasks", DataTable)
        assert table.row_count == len(live.task_ids)
    # no keyring in this test: the demo's key was in memory only, never in a file we wrote
    for path in runs_dir.rglob("*"):
        if path.is_file():
            assert "sk-sandbox-" not in path.read_text(errors="replace")
