"""The workbench's smaller items of issue 45 (item 7): model mismatches on the Run status line,
the link events in "why it wobbles", every flagged run listed in Trend, and a filter box that
Shift-Tab never lands in (so a later q quits instead of filtering)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import DataTable, Input, Static
from tui_runs import RUN_A, write_run

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.screens.task import TaskScreen
from driftdesk.tui.screens.trend import TrendScreen
from driftdesk.tui.screens.volatility import VolatilityScreen
from tests.analysis.recording_fixtures import write_wobbly_task

SIZE = (140, 42)


async def test_model_mismatches_reach_the_run_status_line(
    home, make_app, settle, wait_for_run, runs_dir
) -> None:
    # A gateway that answers under another model's name than the one asked for.
    with SandboxServer(serve_model="routed-elsewhere-2") as server:
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            profile = Profile("gateway", "openai", server.base_url, SIM_MODEL, no_key=True)
            spec = RunSpec(profile=profile, suite="basic", repeat=1, out_dir=runs_dir)
            live = app.start_run(spec)
            screen = app.screen
            assert isinstance(screen, RunScreen)
            screen.show_run(live)
            await wait_for_run(app, pilot, live)
            screen.redraw()
            calls = [
                json.loads(line) for line in (live.run_dir / "calls.jsonl").read_text().splitlines()
            ]
            mismatched = sum(1 for c in calls if c.get("model_mismatch"))
            assert mismatched == len(calls) > 0
            counters = str(screen.query_one("#run-counters", Static).render())
            assert f"model mismatches {mismatched}" in counters


async def test_why_it_wobbles_names_the_link_events_explain_prints(
    home, runs_dir, make_app, settle
) -> None:
    from driftdesk.analysis.explain import explain_task

    run_dir = runs_dir / "run-1"
    write_wobbly_task(run_dir)
    events = [e.sentence for e in explain_task(run_dir, "retail-7").events]
    assert len(events) == 2  # a 429 among the fails, a 500 of the link error
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, "retail-7"))
        await settle(app, pilot)
        why = str(app.screen.query_one("#task-explain", Static).render())
        assert "first diverge at step 1" in why
        for sentence in events:
            assert sentence in why


BROKEN = {task: ["fail"] * 4 for task in RUN_A}


def _calls(run_dir: Path, served: str) -> None:
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


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_trend_lists_every_flagged_run_it_counts(
    home, runs_dir, make_app, settle, size
) -> None:
    # Nights 2-5 each change the served model and flip every task: two flags a night.
    nights = []
    for day, (outcomes, served) in enumerate(
        [
            (RUN_A, "sim-1"),
            (BROKEN, "routed-2"),
            (RUN_A, "sim-1"),
            (BROKEN, "routed-2"),
            (RUN_A, "sim-1"),
        ],
        start=1,
    ):
        run_dir = write_run(runs_dir, f"nightly-2026010{day}", outcomes, day=day)
        _calls(run_dir, served)
        nights.append(run_dir)
    app = make_app()
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        screen.select_run(nights[-1])
        await settle(app, pilot)
        await pilot.press("t")
        await settle(app, pilot)
        trend = app.screen
        assert isinstance(trend, TrendScreen)
        flagged = [i for i, run in enumerate(trend.trend.runs, start=1) if run.flags]
        assert len(flagged) == 4 and all(len(trend.trend.runs[i - 1].flags) >= 2 for i in flagged)
        assert "4 flagged" in str(trend.query_one("#trend-title").render())
        shown = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        Path(f"/tmp/trend-{size[0]}.txt").write_text(shown)
        for i in flagged:
            assert f"▼ {i} " in shown, i


async def test_shift_tab_never_lands_in_the_filter_so_q_still_quits(
    home, fixture_runs, make_app, settle
) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        screen.query_one("#tasks", DataTable).focus()
        await settle(app, pilot)
        box = screen.query_one("#filter", Input)
        visited = []
        for _ in range(8):  # round the whole focus chain, backwards
            await pilot.press("shift+tab")
            visited.append(app.focused)
        assert box not in visited
        await pilot.press("q")
        await pilot.pause()
        assert box.value == "" and screen.filter_text == ""
        assert app._exit or not app.is_running  # q quit (nothing was running)
        # / still opens the filter (tested in test_tui_volatility: typing filters the tasks)


async def test_slash_still_opens_the_filter_and_typing_filters(
    home, fixture_runs, make_app, settle
) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        await pilot.press("slash")
        box = screen.query_one("#filter", Input)
        assert app.focused is box
        await pilot.press("a", "r", "i")
        await settle(app, pilot)
        assert screen.filter_text == "ari"
        await pilot.press("enter")
        assert app.focused is screen.query_one("#tasks", DataTable)
        await pilot.press("shift+tab")
        assert app.focused is not box


def _with_agent(run_dir: Path, agent: str, client: str, version: str) -> None:
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["agent"] = agent
    manifest["client"] = {"name": client, "version": version}
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


async def test_runs_list_and_trend_name_the_agent_and_client_version(
    home, runs_dir, make_app, settle
) -> None:
    codex = write_run(runs_dir, "nightly-20260101", RUN_A, day=1)
    _with_agent(codex, "codex", "codex", "0.171.0")
    claude = write_run(runs_dir, "nightly-20260102", RUN_A, day=2)
    _with_agent(claude, "claude-code", "claude-code", "2.1.332")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        shown = "\n".join(strip.text for strip in screen._compositor.render_strips())
        assert "codex 0.171.0" in shown and "claude-code 2.1.332" in shown
        screen.select_run(codex)
        await settle(app, pilot)
        await pilot.press("t")
        await settle(app, pilot)
        trend = app.screen
        assert isinstance(trend, TrendScreen)
        title = str(trend.query_one("#trend-title").render())
        # One series per agent: the Codex run's own, not the newer Claude Code run's.
        assert "agent codex 0.171.0" in title and "1 run," in title
        await pilot.press("a")
        await settle(app, pilot)
        title = str(trend.query_one("#trend-title").render())
        assert "agent all (mixed)" in title and "2 runs" in title
        flags = str(trend.query_one("#trend-flags").render())
        assert "agent_changed" in flags
