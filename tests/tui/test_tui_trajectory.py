"""Why a task wobbles, in the workbench: the task's explanation above its attempts, an
attempt's trajectory (a step a line, Enter unfolds, / searches), and a pass beside a fail,
aligned by step with the first divergence marked."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import DataTable, Label, OptionList, Static
from tui_runs import write_run

from driftdesk.rundir import attempt_folder
from driftdesk.tui.screens.attempt_pair import AttemptPairScreen, PairStep
from driftdesk.tui.screens.task import TaskScreen
from driftdesk.tui.widgets.trajectory import TrajectoryView

SIZE = (140, 42)
TASK = "order-7"


def _with_lookup(attempt: int) -> list[dict]:
    return [
        {"role": "user", "content": "What is the total of order 7?"},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"c{attempt}",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": '{"order_id": 7}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"c{attempt}", "content": '{"total": 42}'},
        {"role": "assistant", "content": "The total is 42."},
    ]


def _guessing() -> list[dict]:
    return [
        {"role": "user", "content": "What is the total of order 7?"},
        {"role": "assistant", "content": "The total is\nprobably 40."},
    ]


def _run(runs_dir: Path) -> Path:
    """Attempts 0 and 2 look the order up and pass; 1 and 3 guess and fail."""
    run_dir = write_run(
        runs_dir, "sandbox-sandbox-sim-20260101T100000Z", {TASK: ["pass", "fail"] * 2}
    )
    folder = attempt_folder(run_dir, TASK)
    for attempt in range(4):
        messages = _with_lookup(attempt) if attempt % 2 == 0 else _guessing()
        (folder / f"{attempt}.transcript.json").write_text(json.dumps(messages))
    return run_dir


async def test_the_task_says_why_it_wobbles_and_shows_each_attempts_steps(
    home, runs_dir, make_app, settle
) -> None:
    run_dir = _run(runs_dir)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, TASK))
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, TaskScreen)
        why = str(screen.query_one("#task-explain", Static).render())
        assert "why it wobbles (2 pass, 2 fail" in why
        assert "first diverge at step 1 in 4/4 pairs" in why
        assert "passes call get_order 2/2" in why and "fails answer 2/2" in why

        # The first attempt (a pass): its trajectory, a step a line.
        await pilot.press("t")
        await settle(app, pilot)
        view = screen.query_one("#trajectory", TrajectoryView)
        assert view.display and not screen.query_one("#attempt-log").display
        options = view.query_one("#trajectory-steps", OptionList)
        lines = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert "4 steps" in lines[0]
        assert any('get_order({"order_id":7})' in line for line in lines[1:])
        assert any("The total is 42." in line for line in lines[1:])

        # Enter unfolds the highlighted step (the user's question) into its whole text.
        folded = lines[options.highlighted]
        await pilot.press("down", "enter")
        unfolded = str(options.get_option_at_index(options.highlighted).prompt)
        assert "→ get_order(" in unfolded and unfolded != folded

        # / finds a step by its text.
        await pilot.press("slash", *"total is 42", "enter")
        await settle(app, pilot)
        found = str(options.get_option_at_index(options.highlighted).prompt)
        assert "The total is 42." in found

        # A failing attempt: its multi-line answer folds to one line.
        await pilot.press("t")  # back to the log, so the table takes the keys again
        screen.query_one("#attempts", DataTable).focus()
        await pilot.press("down")
        await settle(app, pilot)
        assert str(screen.query_one("#attempt-log-title", Label).render()).startswith("attempt 1")
        # Only the pane on screen reads the newly selected attempt; the other does when shown.
        assert "4 steps" in str(options.get_option_at_index(0).prompt)
        await pilot.press("t")
        await settle(app, pilot)
        lines = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert "2 steps" in lines[0]
        assert any("The total is probably 40." in line for line in lines)


async def test_a_pass_beside_a_fail_marks_where_they_part(home, runs_dir, make_app, settle) -> None:
    run_dir = _run(runs_dir)
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, TASK))
        await settle(app, pilot)
        screen = app.screen
        screen.query_one("#attempts", DataTable).move_cursor(row=3)  # attempt 3, a fail
        await settle(app, pilot)
        await pilot.press("v")
        await settle(app, pilot)
        pair = app.screen
        assert isinstance(pair, AttemptPairScreen)
        assert pair.attempts == (0, 3)  # the chosen fail beside the first pass
        title = str(pair.query_one("#pair-title", Label).render())
        assert "A: attempt 0 (pass)" in title and "B: attempt 3 (fail)" in title
        rows = list(pair.query(PairStep))
        assert [r.step for r in rows] == [0, 1]
        first = rows[0].build(120).plain
        assert first.startswith("◆ 1")
        assert "get_order(order_id=7)" in first and "answer: The total is" in first
        assert '→ {"total": 42}' in first  # the lookup's tool result beside it
        assert "(ended)" in rows[1].build(120).plain
        assert pair.focused_step() == 0  # it opened at the divergence
        summary = str(pair.query_one("#pair-summary", Static).render())
        assert "attempts 0 and 3 first diverge at step 1" in summary
        rows[1].focus()
        await pilot.press("d")
        assert pair.focused_step() == 0
        await pilot.press("x")
        await settle(app, pilot)
        assert pair.attempts == (3, 0)
        title = str(pair.query_one("#pair-title", Label).render())
        assert "A: attempt 3 (fail)" in title and "B: attempt 0 (pass)" in title
