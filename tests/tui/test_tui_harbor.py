"""Harbor trials in the workbench (issue 49): the side-by-side of an imported job's passing and
failing trial of one task, with their ATIF steps read in place, where they part, and each
side's verifier output one key away."""

from __future__ import annotations

import sys
from pathlib import Path

from textual.widgets import DataTable, Static

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "analysis"))
from harbor_fixtures import LONG_TASK, standard_trials, write_job

from driftdesk.analysis.imports import import_results
from driftdesk.tui.screens.attempt_pair import AttemptPairScreen
from driftdesk.tui.screens.task import TaskScreen

WIDE = (140, 42)


def _screen_text(app) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_a_harbor_tasks_pass_beside_its_fail(runs_dir, make_app, settle, tmp_path) -> None:  # type: ignore[no-untyped-def]
    job = write_job(tmp_path / "jobs", "nightly", standard_trials(), n_attempts=3)
    run_dir = import_results(job, out=runs_dir).run_dir
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, LONG_TASK))
        await settle(app, pilot)
        app.screen.query_one("#attempts", DataTable).move_cursor(row=0)
        await settle(app, pilot)
        await pilot.press("v")
        await settle(app, pilot)
        pair = app.screen
        assert isinstance(pair, AttemptPairScreen)
        await settle(app, pilot)
        text = _screen_text(app)
        assert "make test" in text and "rm -rf build" in text
        assert pair.divergence_step == 1
        await pilot.press("o")
        await settle(app, pilot)
        shown = str(pair.query_one("#pair-files", Static).render())
        assert "tests ran" in shown  # the trial's verifier/test-stdout.txt
