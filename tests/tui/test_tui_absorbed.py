"""A run made with ``--link-faults absorb``: the task screen's attempts table says beside the
tries rerun how many faults the proxy absorbed (the agent never saw them)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from driftdesk.analysis.attempts import task_attempts
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.simulated_endpoint import SandboxServer
from tests.sandbox_runs import sandbox_run


def read_rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def _absorbing_run(runs_dir: Path, *, repeat: int) -> Path:
    """The builtin agent on the sandbox's basic suite, 429s absorbed by the proxy."""
    with SandboxServer(seed=3) as server:
        return await sandbox_run(
            server.base_url,
            runs_dir,
            repeat=repeat,
            concurrency=8,
            api_key="sk-test-REALKEY-absorb-tui-0123456789",
            retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.005, max_delay_s=0.05),
            seed=4,
            inject="429=40%:0.01s",
            link_faults="absorb",
        )


async def test_the_task_screen_counts_absorbed_faults(home, runs_dir, make_app, settle) -> None:
    from textual.widgets import DataTable

    from driftdesk.tui.screens.task import TaskScreen

    run_dir = await _absorbing_run(runs_dir, repeat=3)
    absorbing = [r for r in read_rows(run_dir / "attempts.jsonl") if r.get("absorbed_faults")]
    assert absorbing, "the seed absorbed nothing: choose another"
    task_id = absorbing[0]["task_id"]
    rows = [r for r in task_attempts(run_dir, task_id) if r.get("absorbed_faults")]
    app = make_app()
    async with app.run_test(size=(140, 42)) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, task_id))
        await settle(app, pilot)
        table = app.screen.query_one("#attempts", DataTable)
        retries = [str(table.get_row_at(i)[3]) for i in range(table.row_count)]
    absorbed = [r for r in retries if r.endswith(" absorbed")]
    assert len(absorbed) == len(rows), retries
    assert absorbed[0] == f"0 +{rows[0]['absorbed_faults']} absorbed"


async def test_the_headline_says_what_was_absorbed(home, runs_dir, make_app, settle) -> None:
    from driftdesk.analysis.report import build_report
    from driftdesk.tui.screens.volatility import VolatilityScreen

    run_dir = await _absorbing_run(runs_dir, repeat=2)
    [report] = build_report([run_dir])
    section = report.link_faults
    assert section is not None and section["absorbed"] > 0
    app = make_app()
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, VolatilityScreen) and screen.report is not None
        shown = str(screen.query_one("#summary").render())
    assert (
        f"link faults       absorbed {section['absorbed']} "
        f"(waited {section['absorbed_wait_s']:.1f} s), surfaced 0"
    ) in shown, shown
