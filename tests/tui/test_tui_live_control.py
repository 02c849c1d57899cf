"""The Run screen controls a live run: auto from the launch form, the concurrency shown as it
moves, + / - / a and p (pause) with their palette entries; every change recorded."""

from __future__ import annotations

import json

import pytest

from driftdesk.tui.screens.launch import LaunchScreen
from driftdesk.tui.screens.run import RunScreen

SIZE = (160, 44)
THROWAWAY_KEY = "sk-test-throwaway-0123456789"


@pytest.fixture
def slow_sandbox(home):  # type: ignore[no-untyped-def]
    """A sandbox answering in 0.2-0.6 s: a run lasts long enough to be controlled."""
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    server = SandboxServer(latency_ms=400.0)
    server.start()
    ProfileStore().save(
        Profile(name="slow", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
    )
    set_key("slow", THROWAWAY_KEY)
    yield server
    server.stop()


async def _until(pilot, condition, seconds: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("the condition never held")


@pytest.mark.keyring
async def test_the_run_screen_retunes_and_pauses_a_live_run(
    home, slow_sandbox, make_app, open_launch_form, wait_for_run
) -> None:
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await open_launch_form(app, pilot, profile="slow", repeat="6", concurrency="auto:2-4-8")
        await pilot.press("ctrl+s")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, RunScreen)
        live = screen.live
        assert live is not None
        await _until(pilot, lambda: live.done >= 4)
        screen.redraw()
        counters = str(screen.query_one("#run-counters").render())
        assert "concurrency " in counters and " auto" in counters

        await pilot.press("p")  # pause
        await _until(pilot, lambda: live.stats.paused)
        await pilot.pause(0.4)
        screen.redraw()
        assert "PAUSED" in str(screen.query_one("#run-counters").render())
        await _until(pilot, lambda: live.running == 0)
        done = live.done
        await pilot.pause(0.8)
        assert live.done == done  # nothing new started
        await pilot.press("minus")  # a fixed limit, one below where auto was
        await _until(pilot, lambda: not live.stats.concurrency_setting.startswith("auto"))
        fixed = live.stats.concurrency
        await pilot.press("p")  # unpause
        await _until(pilot, lambda: not live.stats.paused)
        # The palette gives it back to the controller.
        commands = {c.title: c for c in screen.palette_commands()}
        commands["run: concurrency auto"].callback()
        await _until(pilot, lambda: live.stats.concurrency_setting.startswith("auto"))
        await wait_for_run(app, pilot, live)
        assert live.status == "completed", live.error
    manifest = json.loads((live.run_dir / "manifest.json").read_text())
    retunes = manifest["concurrency_control"]["retunes"]
    assert [r["change"] for r in retunes] == [
        "paused",
        f"concurrency {fixed}",
        "unpaused",
        "concurrency auto:2-4-8",
    ]
    assert {r["by"] for r in retunes} == {"workbench"}


@pytest.mark.keyring
async def test_the_launch_form_takes_auto_and_says_what_is_wrong(
    home, slow_sandbox, make_app, settle, open_launch_form
) -> None:
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        form = await open_launch_form(app, pilot, profile="slow", concurrency="auto:9-2-4")
        await settle(app, pilot)
        form._error("")
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert isinstance(app.screen, LaunchScreen)
        error = str(form.query_one("#form-error").render())
        assert "needs 1 <= MIN <= START <= MAX" in error


async def test_a_run_started_elsewhere_shows_its_limit_and_pause_and_is_set_from_here(
    home, make_app, runs_dir, tmp_path
) -> None:
    """A run another process started (``driftdesk run`` in a terminal), followed from its files:
    the counters show the limit as the controller moves it and the pause; p pauses, then
    unpauses; - steps from the limit the run has now, not from where it started."""
    import subprocess
    import sys

    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.rate_limit import RateLimit
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
    from driftdesk.rundir.control_log import control_rows
    from tests.reruns.reruns_helpers import write_suite

    def rows(kind: str) -> list[dict]:  # type: ignore[type-arg]
        return [r for r in control_rows(run_dir) if r.get("kind") == kind]

    def counters() -> str:
        screen.redraw()
        return str(screen.query_one("#run-counters").render())

    with SandboxServer(latency_ms=300.0, rate_limit=RateLimit(rps=10, burst=3)) as server:
        ProfileStore().save(Profile("sim", "openai", server.base_url, SIM_MODEL, no_key=True))
        suite = write_suite(tmp_path / "suite.jsonl", [f"t{i}" for i in range(40)])
        process = subprocess.Popen(
            [sys.executable, "-m", "driftdesk", "run", "--out", str(runs_dir), "--profile", "sim",
             "--suite", str(suite), "--repeat", "4", "--concurrency", "auto:1-2-16"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        try:
            app = make_app(start_mode="run")
            async with app.run_test(size=SIZE) as pilot:
                screen = app.screen
                assert isinstance(screen, RunScreen)
                await _until(pilot, lambda: screen.live is not None, 30)
                live = screen.live
                assert live is not None and live.followed and live.run_dir is not None
                run_dir = live.run_dir
                # The controller moves the limit (slow start); the followed run shows it.
                await _until(pilot, lambda: any(r["limit"] > 2 for r in rows("limit")), 30)
                await _until(
                    pilot,
                    lambda: (
                        live.stats.concurrency_setting == "auto:1-2-16"
                        and live.stats.concurrency == rows("limit")[-1]["limit"]
                    ),
                    10,
                )
                assert f"concurrency {live.stats.concurrency} auto" in counters()

                await pilot.press("p")  # pause
                await _until(pilot, lambda: live.stats.paused, 10)
                assert "PAUSED" in counters()
                await _until(pilot, lambda: live.running == 0, 20)
                await pilot.pause(0.6)  # nothing in flight: the limit stands still
                now = live.stats.concurrency
                assert now == control_rows(run_dir)[-1]["limit"]
                await pilot.press("minus")  # one below the limit the run has now
                await _until(pilot, lambda: live.stats.concurrency_setting == str(now - 1), 10)
                assert live.stats.concurrency == now - 1
                await pilot.press("p")  # p again unpauses
                await _until(pilot, lambda: not live.stats.paused, 10)
                assert "PAUSED" not in counters()
                assert [r["change"] for r in rows("control")] == [
                    "paused",
                    f"concurrency {now - 1}",
                    "unpaused",
                ]
                assert process.wait(timeout=180) == 0, (
                    process.stderr.read() if process.stderr else ""
                )
                await _until(pilot, lambda: live.finished, 30)
                assert live.status == "completed" and live.done == 160
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
