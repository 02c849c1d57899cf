"""Earlier tries in the workbench (issue 45, item 1's TUI part): a real Codex run with 429s
injected, where a 429 ends the client's try and driftdesk runs the attempt again from a fresh
workspace. The trajectory view shows the final try's steps, the earlier tries folded above them
("try 1 — 429 at call 3, discarded"); the side-by-side takes only final tries' actions."""

from __future__ import annotations

import json
import os
from pathlib import Path

from textual.widgets import DataTable, OptionList

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.tui.screens.attempt_pair import AttemptPairScreen, PairStep
from driftdesk.tui.screens.task import TaskScreen
from driftdesk.tui.widgets.trajectory import TrajectoryView
from tests.conftest import real_client
from tests.reruns.coding_helpers import CODING_TASKS, write_coding_suite

SIZE = (140, 42)
TASK = "rename"  # a coin flip: its right and wrong paths differ in one command


class _Quiet:
    def on_event(self, event: object) -> None:
        pass


async def _codex_run_with_429s(tmp_path: Path, runs_dir: Path) -> Path:
    suite = write_coding_suite(
        tmp_path / "suite", [t for t in CODING_TASKS if t["task_id"] == TASK]
    )
    with SandboxServer(seed=4, suites=[suite], linger_s=0.3) as server:
        spec = RunSpec(
            profile=Profile("codex-sim", "openai", server.base_url, SIM_MODEL),
            suite=str(suite), repeat=4, concurrency=1, agent="codex", out_dir=runs_dir,
            api_key="sk-test-tries-0123456789", timeout_s=180, inject="429=30%",
            link_faults="retry",
        )  # fmt: skip
        outcome = await execute_run(spec, _Quiet())
    return Path(outcome.run_dir)


def _tries(run_dir: Path) -> dict[int, int]:
    """attempt -> its last try, from calls.jsonl."""
    last: dict[int, int] = {}
    for line in (run_dir / "calls.jsonl").read_text().splitlines():
        call = json.loads(line)
        last[call["attempt"]] = max(last.get(call["attempt"], 1), int(call.get("try") or 1))
    return last


async def test_earlier_tries_fold_above_the_final_trys_steps(
    home, runs_dir, make_app, settle, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("PATH", f"{real_client('codex').parent}{os.pathsep}{os.environ['PATH']}")
    run_dir = await _codex_run_with_429s(tmp_path, runs_dir)
    tries = _tries(run_dir)
    retried = [a for a, last in sorted(tries.items()) if last > 1]
    assert retried, f"no attempt had a second try: {tries}"
    attempt = retried[0]
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, TASK))
        await settle(app, pilot)
        screen = app.screen
        screen.query_one("#attempts", DataTable).move_cursor(row=attempt)
        await settle(app, pilot)
        await pilot.press("t")
        await settle(app, pilot)
        view = screen.query_one("#trajectory", TrajectoryView)
        options = view.query_one("#trajectory-steps", OptionList)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert f"final try, try {tries[attempt]}" in prompts[0]
        folded = prompts[1 : tries[attempt]]
        assert len(folded) == tries[attempt] - 1
        for number, line in enumerate(folded, start=1):
            assert f"▸ try {number} — " in line and "discarded" in line
        assert any("429 at call" in line for line in folded)
        # Below them the final try alone: each of its tool calls once, the answer once.
        steps = prompts[tries[attempt] :]
        assert all("try " not in line or "▸" not in line for line in steps)
        answers = [line for line in steps if "model 'Renamed.'" in line]
        assert len(answers) == 1
        # The cursor starts on the final try's first step; Enter on a folded try unfolds it.
        assert options.highlighted == tries[attempt]
        options.highlighted = 1
        await pilot.press("enter")
        unfolded = str(options.get_option_at_index(1).prompt)
        assert unfolded.startswith("  ▾ try 1 — ") and "\n" in unfolded

        # The side-by-side: final tries only, a row per action of the longer final try.
        outcomes = {
            json.loads(line)["attempt"]: json.loads(line)["outcome"]
            for line in (run_dir / "attempts.jsonl").read_text().splitlines()
        }
        other = next((a for a, o in outcomes.items() if a != attempt), None)
        assert other is not None
        app.push_screen(AttemptPairScreen(run_dir, TASK, attempt, other))
        await settle(app, pilot)
        pair = app.screen
        assert pair.sides is not None
        longest = max(len(side.view.actions) for side in pair.sides)
        assert len(list(pair.query(PairStep))) in (longest, longest + 1)


async def test_a_recording_from_before_tries_says_it_reads_as_one_try(
    home, runs_dir, make_app, settle
) -> None:
    from coding_runs import TASK as CODING_TASK
    from coding_runs import write_coding_run

    run_dir = write_coding_run(runs_dir)  # recordings without a try per call
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, CODING_TASK))
        await settle(app, pilot)
        why = str(app.screen.query_one("#task-explain").render())
        assert "first diverge at step 2" in why
        assert "each reads as one try" in why
        await pilot.press("t")
        await settle(app, pilot)
        options = app.screen.query_one("#trajectory-steps", OptionList)
        assert "read as one try" in str(options.get_option_at_index(0).prompt)
