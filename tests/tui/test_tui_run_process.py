"""The workbench executes a run in a child process (``reruns.run_process``): the engine does
not share the app's GIL. The key reaches that child through its stdin only, and a child killed
mid-run leaves the run interrupted with its resume command, never a hung pane."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.tui.screens.run import RunScreen

SIZE = (140, 42)
KEY = "sk-child-never-sees-this-in-env-0123456789"


def _rows(run_dir: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]


async def _run_under_way(app, pilot, settle, server, runs_dir: Path):  # type: ignore[no-untyped-def]
    """A run of an in-memory profile and key (as the demo's: nothing saved, nothing in the
    keyring), shown on the Run screen, with its first attempt on disk."""
    await settle(app, pilot)
    profile = Profile("unsaved", "openai", server.base_url, SIM_MODEL)
    spec = RunSpec(profile=profile, suite="basic", repeat=2, out_dir=runs_dir, api_key=KEY)
    live = app.start_run(spec)
    assert isinstance(app.screen, RunScreen)
    app.screen.show_run(live)
    while live.done < 1 and not live.finished:
        await pilot.pause(0.05)
    assert not live.finished, live.error
    return live


async def test_a_run_executes_in_a_child_process_that_never_holds_the_key_in_env_or_argv(
    home, make_app, settle, wait_for_run, runs_dir
) -> None:
    with SandboxServer(latency_ms=60.0) as server:
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            live = await _run_under_way(app, pilot, settle, server, runs_dir)
            assert live.pid is not None and live.pid != os.getpid()
            environ = Path(f"/proc/{live.pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{live.pid}/cmdline").read_bytes()
            assert b"driftdesk.reruns.run_process" in cmdline  # the right process looked at
            assert KEY.encode() not in environ and KEY.encode() not in cmdline
            await wait_for_run(app, pilot, live)
            # completing at all needs the key (this profile has none in the keyring): it
            # reached the child through its stdin
            assert live.status == "completed", live.error
        assert len(_rows(live.run_dir)) == len(live.task_ids) * 2
    for path in runs_dir.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace")


async def test_a_killed_run_process_shows_interrupted_with_the_resume_command_then_resumes(
    home, make_app, settle, wait_for_run, runs_dir
) -> None:
    with SandboxServer(latency_ms=80.0) as server:
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            live = await _run_under_way(app, pilot, settle, server, runs_dir)
            screen = app.screen
            os.kill(live.pid, signal.SIGKILL)
            await wait_for_run(app, pilot, live)
            assert live.status == "interrupted"
            assert "was killed (SIGKILL)" in (live.error or "")
            assert f"driftdesk resume {live.run_dir}" in (live.error or "")
            screen.redraw()
            shown = str(screen.query_one("#run-counters").render())
            assert "driftdesk resume" in shown and "interrupted" in str(
                screen.query_one("#run-title").render()
            )
            kept = len(_rows(live.run_dir))
            assert 1 <= kept < len(live.task_ids) * 2
            # The run dir is resumable: the lock died with the child.
            resumed = app.resume_run(live.run_dir, api_key=KEY)
            await wait_for_run(app, pilot, resumed)
            assert resumed.status == "completed", resumed.error
    rows = _rows(live.run_dir)
    slots = {(r["task_id"], r["attempt"]) for r in rows}
    assert len(rows) == len(slots) == len(live.task_ids) * 2  # each slot exactly once
    manifest = json.loads((live.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    # the resume ran in its own child process too, not in the app's
    assert manifest["resumes"][-1]["pid"] == resumed.pid != os.getpid()
