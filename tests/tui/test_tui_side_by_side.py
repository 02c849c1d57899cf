"""A side-by-side that reads (issue 45, item 3): a coding task's pass beside its fail, each
command shown as the client ran it (decoded once, escaped once), wrapped, six lines at most
until Enter; the divergence unfolded with both tool results; check output and diff one key
away; any two attempts picked; stacked below 100 columns; d says where the divergence is."""

from __future__ import annotations

from coding_runs import RIGHT_SED, TASK, WRONG_SCRIPT, write_coding_run
from textual.widgets import DataTable, Label, OptionList, Static

from driftdesk.tui.screens.attempt_pair import AttemptPairScreen
from driftdesk.tui.screens.task import TaskScreen

WIDE = (140, 42)
SMALL = (80, 24)
WRONG_LINES = WRONG_SCRIPT.splitlines()


def _screen_text(app) -> str:  # type: ignore[no-untyped-def]
    return "\n".join(strip.text for strip in app.screen._compositor.render_strips())


async def _pair(app, pilot, settle, run_dir, cursor: int = 0) -> AttemptPairScreen:  # type: ignore[no-untyped-def]
    await settle(app, pilot)
    app.push_screen(TaskScreen(run_dir, TASK))
    await settle(app, pilot)
    app.screen.query_one("#attempts", DataTable).move_cursor(row=cursor)
    await settle(app, pilot)
    await pilot.press("v")
    await settle(app, pilot)
    pair = app.screen
    assert isinstance(pair, AttemptPairScreen)
    app.clear_notifications()
    await settle(app, pilot)
    return pair


async def test_commands_read_as_the_client_ran_them(runs_dir, make_app, settle) -> None:
    run_dir = write_coding_run(runs_dir)
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        pair = await _pair(app, pilot, settle, run_dir)
        assert pair.attempts == (0, 1)
        text = _screen_text(app)
        # Decoded once: the client's one backslash, not JSON's two; no {"cmd": ...} wrapping.
        assert RIGHT_SED in text and "\\\\*" not in text and '{"cmd"' not in text
        # The long script: its first six lines, wrapped not cut, then how many are left.
        for line in WRONG_LINES[:6]:
            assert line.replace("\x1b", "\\x1b") in text or "[bold]" in line
        assert "[bold]not markup[/bold]" in text  # shown, not taken as markup
        assert "\x1b" not in text and "\\x1b[31mnot red" in text  # escaped once, not obeyed
        assert WRONG_LINES[7] not in text and "4 more lines (Enter)" in text
        # The divergence unfolded: each side's tool result beside its call.
        assert "rewrote 33 bytes" in text
        assert text.count("Process exited with code 0") >= 2
        # Enter on the divergence shows the rest of the script.
        assert pair.focused_step() == pair.divergence_step == 1
        await pilot.press("enter")
        await settle(app, pilot)
        text = _screen_text(app)
        assert WRONG_LINES[7] in text and WRONG_LINES[8] in text
        # Side by side at this width: the two diverging commands on one screen line.
        assert any(RIGHT_SED in line and WRONG_LINES[0] in line for line in text.splitlines())


async def test_check_output_and_diff_are_one_key_away(runs_dir, make_app, settle) -> None:
    run_dir = write_coding_run(runs_dir)
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        pair = await _pair(app, pilot, settle, run_dir)
        files = pair.query_one("#pair-files", Static)
        assert not files.display
        await pilot.press("o")
        await settle(app, pilot)
        assert files.display
        shown = str(files.render())
        assert "attempt 0 (pass)" in shown and "attempt 1 (fail)" in shown
        assert "check exit code 0" in shown and "add(2, 3) gave -1" in shown
        assert shown.count("calc.py +1 -1") == 2  # each side's diff summary
        assert "return a + b" in shown and "return a - b" in shown
        await pilot.press("o")
        assert not files.display


async def test_any_two_attempts_can_be_picked(runs_dir, make_app, settle) -> None:
    run_dir = write_coding_run(runs_dir)
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        pair = await _pair(app, pilot, settle, run_dir)
        from driftdesk.tui.screens.attempt_pair import AttemptPickScreen

        await pilot.press("b")
        await settle(app, pilot)
        picker = app.screen
        assert isinstance(picker, AttemptPickScreen)
        options = picker.query_one(OptionList)
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert prompts[3].startswith("attempt 3") and "fail" in prompts[3]
        options.highlighted = 3
        await pilot.press("enter")
        await settle(app, pilot)
        assert app.screen is pair and pair.attempts == (0, 3)
        title = str(pair.query_one("#pair-title", Label).render())
        assert "attempt 0 (pass)" in title and "attempt 3 (fail)" in title
        await pilot.press("a")
        await settle(app, pilot)
        app.screen.query_one(OptionList).highlighted = 2
        await pilot.press("enter")
        await settle(app, pilot)
        assert pair.attempts == (2, 3)
        assert "attempts 2 and 3 first diverge at step 2" in _screen_text(app)


async def test_at_80x24_the_sides_stack_with_both_diverging_commands(
    runs_dir, make_app, settle
) -> None:
    run_dir = write_coding_run(runs_dir)
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        await _pair(app, pilot, settle, run_dir)
        lines = _screen_text(app).splitlines()
        sed_rows = [i for i, line in enumerate(lines) if RIGHT_SED in line]
        script_rows = [
            next(i for i, line in enumerate(lines) if wrong in line)
            for wrong in WRONG_LINES[:6]
            if "\x1b" not in wrong
        ]
        assert sed_rows and len(script_rows) == 5
        assert sed_rows[0] < script_rows[0]  # stacked: the pass above the fail
        assert not any(WRONG_LINES[0] in line for line in lines if RIGHT_SED in line)
        assert not any(WRONG_LINES[6] in line for line in lines)  # six lines, no more
        assert "4 more lines (Enter)" in "\n".join(lines)


async def test_d_scrolls_the_divergence_into_view_and_says_so(runs_dir, make_app, settle) -> None:
    run_dir = write_coding_run(runs_dir)
    app = make_app()
    async with app.run_test(size=SMALL) as pilot:
        pair = await _pair(app, pilot, settle, run_dir)
        steps = pair.query_one("#pair-steps")
        await pilot.press("end")
        await settle(app, pilot)
        assert RIGHT_SED not in _screen_text(app)
        await pilot.press("d")
        await settle(app, pilot)
        assert RIGHT_SED in _screen_text(app)
        assert steps.scroll_y > 0 or pair.divergence_step == 0
        said = [n.message for n in app._notifications]
        assert any("first divergence: step 2" in m for m in said)
        # Already there: d still says so.
        app.clear_notifications()
        await pilot.press("d")
        await settle(app, pilot)
        assert any("first divergence: step 2" in n.message for n in app._notifications)


async def test_the_task_pane_header_names_the_attempt_on_screen(runs_dir, make_app, settle) -> None:
    run_dir = write_coding_run(runs_dir)
    app = make_app()
    async with app.run_test(size=WIDE) as pilot:
        await settle(app, pilot)
        app.push_screen(TaskScreen(run_dir, TASK))
        await settle(app, pilot)
        screen = app.screen
        title = screen.query_one("#attempt-log-title", Label)
        assert str(title.render()).startswith("attempt 0")
        await pilot.press("t")  # the trajectory pane
        await settle(app, pilot)
        screen.query_one("#attempts", DataTable).move_cursor(row=3)
        await settle(app, pilot)
        assert str(title.render()).startswith("attempt 3"), str(title.render())
