"""Run screen: launching and watching real runs of the built-in suite against the sandbox."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from driftdesk.reruns.run_spec import RunSpec
from driftdesk.tui.screens.launch import LaunchScreen
from driftdesk.tui.screens.modals import ConfirmScreen
from driftdesk.tui.screens.profiles import ProfilesScreen
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.widgets.attempt_grid import SYMBOLS, AttemptGrid
from tests.ports import refused_port

SIZE = (140, 42)
THROWAWAY_KEY = "sk-test-throwaway-0123456789"  # the sandbox accepts any key
FINAL = {SYMBOLS[k][0] for k in ("pass", "fail", "link_error", "harness_error")}


def _rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]


def _grid_symbols(screen: RunScreen) -> list[str]:
    """What the grid draws in each attempt cell (rows below the header line)."""
    grid = screen.query_one("#run-grid", AttemptGrid)
    symbols = []
    for row in range(len(grid.task_ids)):
        line = grid.render_line(row + 1).text
        symbols.extend(line[grid._label_width :: 2][: grid.repeat])
    return symbols


@pytest.mark.keyring
async def test_launch_form_runs_to_completion(
    home, sandbox, make_app, settle, open_launch_form, wait_for_run, runs_dir
) -> None:
    from driftdesk.providers.keys import set_key

    set_key("sandbox", THROWAWAY_KEY)
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await open_launch_form(app, pilot, repeat="2", concurrency="6")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, RunScreen)
        live = app.screen.live
        assert live is not None
        await wait_for_run(app, pilot, live)
        app.screen.redraw()
        assert live.status == "completed"
        rows = _rows(live.run_dir)
        assert len(rows) == len(live.task_ids) * 2
        # Every cell of the grid shows a final outcome, and the counters add up to the rows.
        assert set(_grid_symbols(app.screen)) <= FINAL
        assert sum(live.by_outcome.values()) == len(rows)
        counters = str(app.screen.query_one("#run-counters").render())
        assert f"passed {sum(r['outcome'] == 'pass' for r in rows)}" in counters


async def test_many_concurrent_attempts_keep_the_app_responsive(
    home, sandbox, make_app, settle, wait_for_run, runs_dir
) -> None:
    """64 attempts at once streaming events: key presses are still handled mid-run, and a
    cancel interrupts the run cleanly (the manifest says interrupted, rows stay parseable)."""
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        spec = RunSpec(
            profile="sandbox",
            suite="basic",
            repeat=40,
            concurrency=64,
            out_dir=runs_dir,
            api_key=THROWAWAY_KEY,
        )
        live = app.start_run(spec)
        run_screen = app.screen
        assert isinstance(run_screen, RunScreen)
        run_screen.show_run(live)
        while live.done < 64:  # well under way: 64 slots busy
            await pilot.pause(0.05)
        await pilot.press("1")
        assert isinstance(app.screen, ProfilesScreen)
        await pilot.press("2", "x")
        assert app.screen.is_modal and isinstance(app.screen, ConfirmScreen)
        assert not live.finished  # the keys were handled while the run was going
        await pilot.press("y")
        await wait_for_run(app, pilot, live)
        assert live.status == "interrupted"
        manifest = json.loads((live.run_dir / "manifest.json").read_text())
        assert manifest["status"] == "interrupted"
        rows = _rows(live.run_dir)
        assert 64 <= len(rows) < len(live.task_ids) * 40


async def test_a_run_that_cannot_start_is_reported_not_hidden(
    home, sandbox, make_app, settle, wait_for_run, runs_dir
) -> None:
    # No key anywhere (no keyring, or a keyring without this profile's key): the engine
    # refuses, the run is marked failed and the user is told why.
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        live = app.start_run(RunSpec(profile="sandbox", suite="basic", out_dir=runs_dir))
        app.screen.show_run(live)
        await wait_for_run(app, pilot, live)
        await settle(app, pilot)
        assert live.status == "failed" and live.error
        errors = [n for n in app._notifications if n.severity == "error"]
        assert errors and "key" in errors[-1].message.lower()


@pytest.mark.keyring
async def test_launch_only_volatile_tasks_of_an_earlier_run(
    home, sandbox, fixture_runs, make_app, settle, open_launch_form, wait_for_run
) -> None:
    from textual.widgets import Select

    from driftdesk.providers.keys import set_key

    set_key("sandbox", THROWAWAY_KEY)
    run_a, _ = fixture_runs
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        form = await open_launch_form(app, pilot, repeat="1", only="volatile")
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, LaunchScreen)  # refused: which earlier run?
        assert "earlier run" in str(form.query_one("#form-error").render())
        form.query_one("#earlier", Select).value = str(run_a)
        await pilot.press("ctrl+s")
        await pilot.pause()
        live = app.screen.live
        await wait_for_run(app, pilot, live)
        assert live.status == "completed"
        manifest = json.loads((live.run_dir / "manifest.json").read_text())
        assert sorted(manifest["tasks"]) == ["arith-02", "format-01"]


async def test_launch_form_preselects_only_a_profile_whose_endpoint_answers(
    home, sandbox, make_app, settle, open_launch_form
) -> None:
    from textual.widgets import Select

    from driftdesk.providers.profiles import Profile, ProfileStore

    # Listed first, but its endpoint is gone (a demo's leftover used to be just that).
    with refused_port() as port:
        ProfileStore().save(Profile("aaa-gone", "openai", f"http://127.0.0.1:{port}/v1", "m"))
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            form = await open_launch_form(app, pilot)
            select = form.query_one("#profile", Select)
            assert select.value == "sandbox"
            assert app.focused is select  # Enter opens it: no Tab needed first
            labels = [str(option[0]) for option in select._options]
            assert not any("loading" in label for label in labels)
            assert any("aaa-gone" in label and "not answering" in label for label in labels)
            await pilot.press("escape")
            await settle(app, pilot)
            sandbox.stop()  # now every endpoint is gone: nothing is preselected
            await pilot.press("n")
            await settle(app, pilot)
            assert app.screen.query_one("#profile", Select).value == Select.NULL
            await pilot.press("ctrl+s")
            assert "choose a profile" in str(app.screen.query_one("#form-error").render())


async def _live_slow_run(app, pilot, settle, server, runs_dir, repeat):  # type: ignore[no-untyped-def]
    """A run of the built-in suite against ``server`` that has finished one attempt."""
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL

    ProfileStore().save(Profile("slow", "openai", server.base_url, SIM_MODEL))
    await settle(app, pilot)
    spec = RunSpec(profile="slow", suite="basic", repeat=repeat, out_dir=runs_dir, api_key="k")
    live = app.start_run(spec)
    while live.done < 1:
        await pilot.pause(0.05)
    return live


async def test_q_during_a_live_run_asks_and_cancel_prints_the_resume_command(
    home, make_app, settle, runs_dir
) -> None:
    import io

    from driftdesk.reruns.simulated_endpoint import SandboxServer
    from driftdesk.tui.app import after_exit
    from driftdesk.tui.screens.modals import PickScreen

    with SandboxServer(latency_ms=150.0) as server:
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            # 340 attempts: the run must still be going when "cancel and quit" lands, also on a
            # loaded machine (with 102, a loaded run had 79-85 done by then)
            live = await _live_slow_run(app, pilot, settle, server, runs_dir, repeat=10)
            app.screen.show_run(live)
            app.screen.redraw()
            # the run shows where it is written (./runs, the same rule as the CLI's)
            assert str(live.run_dir) in str(app.screen.query_one("#run-title").render())
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, PickScreen)  # asked, not quit
            await pilot.press("end", "enter")  # "stay"
            await pilot.pause()
            assert not isinstance(app.screen, PickScreen) and not live.finished
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("home", "enter")  # "cancel and quit"
            while app.is_running and not live.finished:
                await pilot.pause(0.05)
        assert live.status == "interrupted"
        said = io.StringIO()
        after_exit(app, said)
        assert f"driftdesk resume {live.run_dir}" in said.getvalue()


async def test_q_keep_running_finishes_the_run_after_the_app_exits(
    home, make_app, settle, runs_dir
) -> None:
    import io

    from driftdesk.reruns.simulated_endpoint import SandboxServer
    from driftdesk.tui.app import after_exit

    with SandboxServer(latency_ms=30.0) as server:
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            live = await _live_slow_run(app, pilot, settle, server, runs_dir, repeat=2)
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("down", "enter")  # "keep running"
            await pilot.pause()
        said = io.StringIO()
        after_exit(app, said)
        assert live.status == "completed", said.getvalue()
        assert f"completed: {live.run_dir}" in said.getvalue()
        assert len(_rows(live.run_dir)) == len(live.task_ids) * 2
