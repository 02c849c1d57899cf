"""Adaptive runs in the workbench: the launch form's design, the Run screen's live target."""

from __future__ import annotations

import json

import pytest

from driftdesk.reruns.events import AdaptiveProgress
from driftdesk.tui.screens.launch import LaunchScreen
from driftdesk.tui.screens.run import RunScreen, adaptive_lines

SIZE = (140, 42)
THROWAWAY_KEY = "sk-test-throwaway-0123456789"  # the sandbox accepts any key


@pytest.mark.keyring
async def test_an_adaptive_run_from_the_form_shows_its_target_and_grid(
    home, sandbox, make_app, settle, open_launch_form, wait_for_run, runs_dir
) -> None:
    from driftdesk.providers.keys import set_key

    set_key("sandbox", THROWAWAY_KEY)
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await open_launch_form(
            app, pilot, repeats="adaptive", target="volatile", **{"max-repeats": "4"},
            sample="5", concurrency="4",
        )  # fmt: skip
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert isinstance(app.screen, RunScreen)
        live = app.screen.live
        assert live is not None
        await wait_for_run(app, pilot, live)
        app.screen.redraw()
        assert live.status == "completed", live.error
        manifest = json.loads((live.run_dir / "manifest.json").read_text())
        assert manifest["adaptive"]["target"] == "volatile"
        assert manifest["adaptive"]["max_repeats"] == 4
        assert live.adaptive is not None and live.adaptive.open_tasks == {}
        counters = str(app.screen.query_one("#run-counters").render())
        assert "adaptive: target volatile" in counters
        assert "stopped: target met" in counters
        assert "adaptive 2..4×" in str(app.screen.query_one("#run-title").render())
        # the grid is --max-repeats wide: every attempt of the design has a column
        assert app.screen.query_one("#run-grid").repeat == 4
        # Volatility of this run: the design in the headline, n per task in the table
        await pilot.press("v")
        await settle(app, pilot)
        summary = str(app.screen.query_one("#summary").render())
        assert "adaptive, target volatile" in summary
        table = app.screen.query_one("#tasks")
        labels = [str(column.label) for column in table.columns.values()]
        assert "n" in labels
        n_column = labels.index("n")
        rows = [line for line in (live.run_dir / "attempts.jsonl").read_text().splitlines()]
        shown = sorted(int(str(table.get_row(key)[n_column])) for key in table.rows)
        per_task: dict[str, int] = {}
        for line in rows:
            task_id = json.loads(line)["task_id"]
            per_task[task_id] = per_task.get(task_id, 0) + 1
        assert shown == sorted(per_task.values())


async def test_a_bad_design_is_said_on_the_form(home, make_app, settle, open_launch_form) -> None:
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        form = await open_launch_form(app, pilot, repeats="adaptive", target="sometimes")
        await settle(app, pilot)
        form._error("")
        form._adaptive_design()
        assert isinstance(app.screen, LaunchScreen)
        error = str(form.query_one("#form-error").render())
        assert "use ci=<N>pp (e.g. ci=5pp) or volatile" in error


def test_open_tasks_are_listed_with_why_and_cut() -> None:
    progress = AdaptiveProgress(
        run_id="r",
        target="ci=5pp",
        attempts=40,
        budget_attempts=100,
        spent_usd=None,
        budget_usd=None,
        success=0.7,
        ci_half_width=0.081,
        target_half_width=0.05,
        volatile_tasks=3,
        open_tasks={f"t{i}": f"variance 0.0{i}" for i in range(8)},
        stop_reason=None,
        execution_total=90,
    )
    text = adaptive_lines(progress).plain
    assert "success ± 8.1 pp (target ± 5)" in text
    assert "40 attempts of 100" in text
    assert "open: t0 (variance 0.00), t1 (variance 0.01)" in text
    assert text.endswith("… +2")
