"""Resuming a killed run from the Volatility screen: a "running" manifest whose lock nobody holds
is shown as interrupted (resumable), is not live-refreshed, and `u` runs its missing slots
through the App's run worker until every (task, attempt) slot is on disk."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual.widgets import OptionList

from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.tui.screens.modals import PickScreen
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.screens.volatility import VolatilityScreen

SIZE = (140, 42)
THROWAWAY_KEY = "sk-test-throwaway-0123456789"  # the sandbox accepts any key
REPEAT = 2


async def _killed_run(runs_dir: Path, keep_rows: int) -> Path:
    """A real run against the sandbox, then cut back to the shape a kill -9 leaves: fewer rows
    and a manifest still saying "running" (no process holds its lock)."""
    outcome = await execute_run(
        RunSpec(profile="sandbox", suite="basic", repeat=REPEAT, concurrency=4, out_dir=runs_dir)
    )
    attempts = outcome.run_dir / "attempts.jsonl"
    rows = attempts.read_text().splitlines(keepends=True)
    assert len(rows) > keep_rows
    attempts.write_text("".join(rows[:keep_rows]))
    manifest_path = outcome.run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest.update(status="running", ended_at=None)
    manifest_path.write_text(json.dumps(manifest))
    return outcome.run_dir


@pytest.mark.keyring
async def test_resume_a_killed_run_to_completion(
    home, sandbox, make_app, settle, wait_for_run, runs_dir
) -> None:
    from driftdesk.providers.keys import set_key

    set_key("sandbox", THROWAWAY_KEY)
    run_dir = await _killed_run(runs_dir, keep_rows=3)
    tasks = json.loads((run_dir / "manifest.json").read_text())["tasks"]
    earlier = [json.loads(r) for r in (run_dir / "attempts.jsonl").read_text().splitlines()]
    app = make_app(start_mode="volatility")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen)
        assert screen.run_dir == run_dir.resolve()
        runs = screen.query_one("#runs", OptionList)
        assert "interrupted (resumable)" in str(runs.get_option_at_index(0).prompt)
        assert "LIVE" not in str(screen.query_one("#summary").render())  # not live-refreshed
        await pilot.press("u")
        assert isinstance(app.screen, PickScreen)
        await pilot.press("enter")  # the missing slots only
        await settle(app, pilot)
        assert isinstance(app.screen, RunScreen)
        live = app.screen.live
        assert live is not None and live.label.startswith("resume of")
        # The attempts finished before the interrupt show as done, not pending (this resume
        # never runs those slots, so only the rows read at its start can fill them in).
        while live.status == "starting":
            await pilot.pause(0.02)
        assert earlier
        for row in earlier:
            assert live.cells[(row["task_id"], row["attempt"])] == row["outcome"]
        await wait_for_run(app, pilot, live)
        assert live.worker.state.name == "SUCCESS" and live.status == "completed", live.error
    rows = [json.loads(r) for r in (run_dir / "attempts.jsonl").read_text().splitlines()]
    slots = {(r["task_id"], r["attempt"]) for r in rows}
    assert len(rows) == len(slots) == len(tasks) * REPEAT
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert [r["retry_link_errors"] for r in manifest["resumes"]] == [False]
    assert manifest["resumes"][0]["slots"] == len(tasks) * REPEAT - 3


async def test_only_an_interrupted_run_offers_resume(home, fixture_runs, make_app, settle) -> None:
    app = make_app(start_mode="volatility")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("u")  # a completed run: refused, nothing started
        await settle(app, pilot)
        assert isinstance(app.screen, VolatilityScreen)
        assert not app.live_runs
        assert any("interrupted" in n.message for n in app._notifications)


@pytest.mark.keyring
async def test_resume_from_the_palette_with_link_error_retries(
    home, sandbox, make_app, settle, wait_for_run, runs_dir
) -> None:
    """A run cancelled earlier (manifest "interrupted"): the palette's resume command, with
    "retry link errors" picked, reaches resume_run(retry_link_errors=True)."""
    from driftdesk.providers.keys import set_key

    set_key("sandbox", THROWAWAY_KEY)
    run_dir = await _killed_run(runs_dir, keep_rows=5)
    manifest_path = run_dir / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(json.dumps({**manifest, "status": "interrupted"}))
    app = make_app(start_mode="volatility")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("ctrl+p", *"resume run")
        await settle(app, pilot)
        await pilot.press("enter")
        await settle(app, pilot)
        assert isinstance(app.screen, PickScreen)
        await pilot.press("down", "enter")  # missing slots and link errors
        await settle(app, pilot)
        live = app.screen.live  # type: ignore[attr-defined]
        await wait_for_run(app, pilot, live)
        assert live.status == "completed"
    rows = [json.loads(r) for r in (run_dir / "attempts.jsonl").read_text().splitlines()]
    assert len({(r["task_id"], r["attempt"]) for r in rows}) == len(manifest["tasks"]) * REPEAT
    resumes = json.loads(manifest_path.read_text())["resumes"]
    assert [r["retry_link_errors"] for r in resumes] == [True]
