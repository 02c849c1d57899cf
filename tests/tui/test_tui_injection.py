"""A run made with ``--inject`` (the builtin agent against the sandbox, through the proxy): the
Volatility headline says how many faults were injected and what became of them."""

from __future__ import annotations

from pathlib import Path

from driftdesk.analysis.injection_report import read_injection
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.simulated_endpoint import SandboxServer
from driftdesk.tui.screens.volatility import VolatilityScreen
from tests.sandbox_runs import sandbox_run


async def _injected_run(runs_dir: Path, inject: str) -> Path:
    """A small run of the builtin agent on the sandbox's basic suite, with ``inject``."""
    with SandboxServer(seed=3) as server:
        return await sandbox_run(
            server.base_url,
            runs_dir,
            repeat=2,
            concurrency=8,
            api_key="sk-test-REALKEY-inject-tui-0123456789",
            retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.005, max_delay_s=0.05),
            seed=4,
            inject=inject,
        )


async def test_the_headline_counts_the_injected_faults(home, runs_dir, make_app, settle) -> None:
    outcome_dir = await _injected_run(runs_dir, "429=25%:0.01s,500=10%")
    summary = read_injection(outcome_dir)
    assert summary is not None and summary.total.faults > 0
    t = summary.total
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen) and screen.report is not None
        shown = str(screen.query_one("#summary").render())
        assert (
            f"injected faults   {t.faults}: recovered {t.recovered}, surfaced {t.surfaced}, "
            f"misattributed {t.misattributed}"
        ) in shown, shown


async def test_the_task_screen_says_which_attempts_had_faults_injected(
    home, runs_dir, make_app, settle
) -> None:
    from textual.widgets import DataTable

    from driftdesk.analysis.attempts import task_attempts
    from driftdesk.tui.screens.task import TaskScreen

    outcome_dir = await _injected_run(runs_dir, "429=40%:0.01s")
    summary = read_injection(outcome_dir)
    assert summary is not None and summary.by_task
    task = summary.by_task[0]
    rows = task_attempts(outcome_dir, task.task_id)
    faulted = [r for r in rows if r.get("injected_faults")]
    assert faulted
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(outcome_dir, task.task_id))
        await settle(app, pilot)
        table = app.screen.query_one("#attempts", DataTable)
        errors = [str(table.get_row_at(i)[2]) for i in range(table.row_count)]
        marked = [e for e in errors if e.startswith("injected ")]
        assert len(marked) == len(faulted), errors
        assert marked[0].startswith(f"injected {faulted[0]['injected_faults']}")
