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


async def test_a_demo_run_quit_midway_resumes_with_the_command_it_prints(
    home, make_app, settle, runs_dir
) -> None:
    """Seen: quitting during the demo printed `driftdesk resume …/demo-sandbox-…`, which then
    said 'no key for profile demo-sandbox' (no keyring: 'no OS keyring backend'): the demo's
    profile and sandbox were gone. Resume now starts a sandbox like the demo's for it."""
    import asyncio
    import os
    import subprocess
    import sys

    app = make_app(demo=True, demo_repeat=2, demo_concurrency=2, demo_latency_ms=300.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        live = app.demo_run
        assert live is not None
        for _ in range(300):
            if live.run_dir is not None and live.stats.done >= 4:
                break
            await asyncio.sleep(0.05)
        assert live.stats.done >= 4
        await app.action_quit()
    assert live.status == "interrupted"
    run_dir = live.run_dir
    assert any(f"driftdesk resume {run_dir}" in m for m in app.exit_messages)
    printed = [line.strip() for m in app.exit_messages for line in m.splitlines()]
    command = next(line for line in printed if line.startswith("driftdesk resume "))
    no_keyring = dict(os.environ, PYTHON_KEYRING_BACKEND="keyring.backends.fail.Keyring")
    resumed = subprocess.run(
        [sys.executable, "-m", "driftdesk", *command.split()[1:]],
        capture_output=True, text=True, env=no_keyring, timeout=240,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert "a demo run: resumed against a new simulated sandbox" in resumed.stdout + resumed.stderr
    assert resumed.stdout.startswith("completed:") or "\ncompleted: " in resumed.stdout
    rows = [json.loads(r) for r in (run_dir / "attempts.jsonl").read_text().splitlines()]
    assert len({(r["task_id"], r["attempt"]) for r in rows}) == len(live.task_ids) * 2
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "completed"
