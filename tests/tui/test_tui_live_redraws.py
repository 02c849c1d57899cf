"""The Run screen redraws a live run per tick, never per event (issue 13: 10,000 attempts at
concurrency 256 with the TUI staying responsive).

The engine's events only write into ``LiveRun``; the screen draws from it on its timer. Here the
ticks are driven by hand between batches of thousands of events (the engine's own event types,
as a 256-wide run emits them), so the counts below do not depend on the machine's speed: one
repaint of the counters per tick whatever the number of events, and no layout of the whole
screen on a tick (a layout re-renders every widget; on each tick of a big run it starved the
app of time for key presses).
"""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

from rich.segment import Segment
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Label, Static
from tui_probes import Counting

from driftdesk.reruns.events import (
    AttemptEnded,
    AttemptFinished,
    AttemptOutput,
    AttemptRetrying,
    AttemptStarted,
    CallRecorded,
    RunStarted,
)
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.state import LiveRun
from driftdesk.tui.widgets.attempt_grid import CELL_WIDTH, SYMBOLS, AttemptGrid

SIZE = (140, 42)
RUN = "replayed-run"
TASKS = tuple(f"task-{i:02d}" for i in range(34))
REPEAT = 300  # 10,200 slots, as the 10k-attempt run


async def _showing_a_started_run(
    app: Any, pilot: Any, settle: Any, runs_dir: Path
) -> tuple[RunScreen, LiveRun]:
    """The Run screen showing a run the engine has just started (no attempt yet)."""
    await settle(app, pilot)
    screen = app.screen
    assert isinstance(screen, RunScreen)
    live = LiveRun(label="replayed")
    screen.show_run(live)
    spec = {"profile": "sim", "model": "m", "concurrency": 256}
    live.on_event(RunStarted(RUN, runs_dir / RUN, spec, TASKS, REPEAT, len(TASKS) * REPEAT))
    return screen, live


def _attempt_events(task: str, attempt: int) -> list[Any]:
    """What the engine emits for one attempt: start, a turn, a call, maybe a retry, the end
    and the row on disk."""
    outcome = ("pass", "fail", "link_error")[(attempt + len(task)) % 3]
    call = {"call_index": 0, "method": "POST", "path": "/v1/chat/completions", "status": 200,
            "latency_ms": 20.0, "total_tokens": 30}  # fmt: skip
    events: list[Any] = [
        AttemptStarted(RUN, task, attempt),
        AttemptOutput(RUN, task, attempt, "turn", f"turn 1 of {task}"),
        CallRecorded(RUN, task, attempt, call),
    ]
    if outcome == "link_error":
        events.append(AttemptRetrying(RUN, task, attempt, 1, "429", 0.2))
    row = {"task_id": task, "attempt": attempt, "outcome": outcome, "prompt_tokens": 20,
           "completion_tokens": 10, "total_tokens": 30, "latency_ms": 25.0,
           "error_code": "429" if outcome == "link_error" else None}  # fmt: skip
    events += [AttemptEnded(RUN, task, attempt), AttemptFinished(RUN, row)]
    return events


def layout_requests(monkeypatch: Any) -> Counting:
    """Counts the layouts widgets ask for (``refresh(layout=True)``), as they ask. The screen
    lays itself out later, when its update timer runs: counting its layouts also counted, now
    and then on a loaded machine, a request made before the counting began."""
    return Counting(monkeypatch, Widget, "refresh", when=lambda *_, **kwargs: kwargs.get("layout"))


async def test_thousands_of_events_cost_one_redraw_per_tick_and_no_layout(
    home, make_app, settle, runs_dir, monkeypatch
) -> None:
    layouts = layout_requests(monkeypatch)
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, live = await _showing_a_started_run(app, pilot, settle, runs_dir)
        screen.redraw()
        await pilot.pause()
        # The user picked an attempt to read, one that does not run during these ticks: the
        # log pane gets no new lines (a longer log is laid out, as it should be), so whatever
        # lays the screen out on a tick comes from the counters, the ETA or the title.
        picked = (TASKS[0], REPEAT - 1)
        screen.follow, screen.selected = False, picked
        counters = screen.query_one("#run-counters", Static)
        updates = Counting(monkeypatch, counters, "update")
        layouts_before = layouts.calls
        ticks, events = 10, 0
        slots = [
            (task, attempt)
            for attempt in range(REPEAT)
            for task in TASKS
            if (task, attempt) != picked
        ]
        per_tick = len(slots) // ticks
        for tick in range(ticks):
            for task, attempt in slots[tick * per_tick : (tick + 1) * per_tick]:
                for event in _attempt_events(task, attempt):
                    live.on_event(event)
                    events += 1
            screen.redraw()  # what the screen's timer does a few times a second
            await pilot.pause()
        assert events > 50_000
        # One repaint of the counters per tick, however many events came in between.
        assert 1 <= updates.calls <= ticks
        # The counters and the ETA change on every tick without laying the screen out again.
        assert layouts.calls - layouts_before == 0
        # What is drawn is what happened.
        assert f"passed {live.by_outcome['pass']}" in str(counters.render())
        assert live.done == len(slots) - len(slots) % ticks


async def test_a_big_live_run_sets_off_few_full_collections_and_exit_restores_the_collector(
    home, make_app, settle, runs_dir
) -> None:
    """A full collection pauses the app for as long as it takes to scan every object the
    process holds (60–200 ms during a 10k run, every few seconds, with CPython's settings):
    the pauses the slowest key presses waited on. The app tunes the collector while it runs
    and gives CPython's settings back when it exits."""
    thresholds = gc.get_threshold()
    full_collections: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            full_collections.append(info["generation"])

    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, live = await _showing_a_started_run(app, pilot, settle, runs_dir)
        assert gc.get_freeze_count() > 10_000  # start-up's objects, left out of every scan
        slots = [(task, attempt) for attempt in range(REPEAT) for task in TASKS]
        gc.callbacks.append(count)
        try:
            for tick in range(10):
                for task, attempt in slots[tick::10]:
                    for event in _attempt_events(task, attempt):
                        live.on_event(event)
                screen.redraw()
                await pilot.pause()
        finally:
            gc.callbacks.remove(count)
        assert live.done == len(slots)
    # 10,200 attempts' events and ten frames: CPython's own settings set off 2 here.
    assert full_collections == []
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds


async def test_the_grid_draws_only_the_attempts_in_view_and_draws_them_right(
    home, make_app, settle, runs_dir
) -> None:
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, live = await _showing_a_started_run(app, pilot, settle, runs_dir)
        for task in TASKS[:3]:
            for attempt in range(REPEAT):
                for event in _attempt_events(task, attempt):
                    live.on_event(event)
        screen.redraw()
        await pilot.pause()
        grid = screen.query_one("#run-grid", AttemptGrid)
        width = grid.size.width
        assert 0 < width < grid.virtual_size.width  # the rows are wider than the pane
        for scroll_x in (0, 1, grid._label_width, grid._label_width + 7, 333, 10_000):
            grid.scroll_to(x=scroll_x, animate=False, immediate=True)
            scroll_x = grid.scroll_offset.x
            for row, task in enumerate(TASKS[:4]):
                line = grid.render_line(row + 1)
                assert line.cell_length == width
                # The whole row as it would look unclipped, cut to the view: every attempt
                # in its own two columns (⚡ is two cells wide by itself).
                whole = task.ljust(grid._label_width) + "".join(
                    SYMBOLS[live.cells.get((task, a), "pending")][0].ljust(CELL_WIDTH)
                    if live.cells.get((task, a)) != "link_error"
                    else SYMBOLS["link_error"][0]
                    for a in range(REPEAT)
                )
                expected = Strip([Segment(whole)]).crop(scroll_x, scroll_x + width)
                assert line.text == expected.extend_cell_length(width).text


async def test_following_stays_on_a_running_attempt_until_it_ends(
    home, make_app, settle, runs_dir
) -> None:
    """With hundreds of attempts logging at once, "follow newest" must not jump to another
    attempt on every tick: it keeps the one shown while it runs, then takes the newest."""
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, live = await _showing_a_started_run(app, pilot, settle, runs_dir)
        title = screen.query_one("#run-log-title", Label)

        def shown() -> str:
            screen.redraw()
            return str(title.render())

        first, second = _attempt_events("task-01", 0), _attempt_events("task-02", 0)
        for event in first[:2]:  # task-01 #0 starts and logs
            live.on_event(event)
        assert "task-01 #0" in shown()
        for event in second[:2]:  # task-02 #0 starts and logs: the newest now
            live.on_event(event)
        assert "task-01 #0" in shown()
        for event in first[2:]:  # task-01 #0 ends
            live.on_event(event)
        assert "task-02 #0" in shown()


async def _showing_a_run_with_attempts(
    app: Any, pilot: Any, settle: Any, runs_dir: Path
) -> tuple[RunScreen, LiveRun]:
    """The Run screen showing a run with a few hundred attempts done: a grid full of cells
    and a log with lines, what a frame of a big live run repaints."""
    screen, live = await _showing_a_started_run(app, pilot, settle, runs_dir)
    for attempt in range(10):
        for task in TASKS:
            for event in _attempt_events(task, attempt):
                live.on_event(event)
    screen.redraw()
    await pilot.pause()
    return screen, live


async def test_moving_focus_repaints_the_two_panes_not_the_whole_screen(
    home, make_app, settle, runs_dir, monkeypatch
) -> None:
    """Textual repaints a whole screen when its focus changes; on the Run screen of a big run
    that re-rendered every widget on each tab (tab and shift+tab were among the slowest keys
    in bench_tui_live). Only the panes whose focus style changes need repainting."""
    from textual._compositor import Compositor

    full = Counting(monkeypatch, Compositor, "render_full_update")
    painted: list[Any] = []
    partial = Compositor.render_partial_update

    def record(compositor: Any, *args: Any, **kwargs: Any) -> Any:
        painted.extend(compositor._dirty_regions)
        return partial(compositor, *args, **kwargs)

    monkeypatch.setattr(Compositor, "render_partial_update", record)
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, _live = await _showing_a_run_with_attempts(app, pilot, settle, runs_dir)
        grid = screen.query_one("#run-grid", AttemptGrid)
        log = screen.query_one("#run-log")
        grid.focus()
        await settle(app, pilot)
        for key, focused in (("tab", log), ("shift+tab", grid), ("tab", log)):
            full.calls, painted[:] = 0, []
            await pilot.press(key)
            await pilot.pause()
            assert app.focused is focused
            assert full.calls == 0, f"{key} repainted the whole screen"
            # Both panes' borders change colour, and both were repainted.
            for pane in (grid, log):
                corner = pane.region.offset
                assert any(region.contains_point(corner) for region in painted), (key, pane)


async def test_the_command_palette_does_not_redraw_the_screen_below_it(
    home, make_app, settle, runs_dir, monkeypatch
) -> None:
    """A translucent palette composes the screen below it through Rich on each of its frames
    (and again whenever that screen changes, all through a live run): half the time of
    opening it over a big run's grid. The palette covers the screen."""
    from textual.command import CommandPalette
    from textual.renderables.background_screen import BackgroundScreen

    tinted = Counting(monkeypatch, BackgroundScreen, "__rich_console__")
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, live = await _showing_a_run_with_attempts(app, pilot, settle, runs_dir)
        await pilot.press("ctrl+p")
        await settle(app, pilot)
        assert isinstance(app.screen, CommandPalette)
        for event in _attempt_events(TASKS[0], 10):  # the run goes on below the palette
            live.on_event(event)
        screen.redraw()
        await pilot.pause()
        assert tinted.calls == 0
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen


async def test_a_chatty_attempt_s_lines_are_rendered_when_shown_not_when_written(
    home, make_app, settle, runs_dir, monkeypatch
) -> None:
    """The followed attempt's new lines reach the log pane on each tick. A pane that renders
    every line as it is written (Rich text to strips, each strip with its caches) spends the
    app's time on lines scrolled past before they are seen, and leaves thousands of strips
    for the collector; only the lines in view need rendering, when a frame shows them.

    The strips are counted while a tick writes the lines (before any frame): frames come when
    the loop gets to them, and on a loaded machine one may fall in or out of a tick's window."""
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, live = await _showing_a_started_run(app, pilot, settle, runs_dir)
        task = TASKS[3]
        live.on_event(AttemptStarted(RUN, task, 0))
        strips = Counting(monkeypatch, Strip, "__init__")
        written = 0
        made: list[int] = []  # strips made while each tick wrote its lines into the pane
        for lines in (1, 500, 1_000):
            for _ in range(lines):
                text = f"step {written} of a chatty agent"
                live.on_event(AttemptOutput(RUN, task, 0, "stdout", text))
                written += 1
            before = strips.calls
            screen.redraw()
            made.append(strips.calls - before)
            await settle(app, pilot)
        log = screen.query_one("#run-log")
        # Everything the attempt said is in the pane, the newest line in view (rendered).
        assert len(log.lines) == written
        assert f"step {written - 1} of a chatty agent" in "\n".join(
            log.render_line(y).text for y in range(log.size.height)
        )
        # Writing twice the lines makes no more strips: none is rendered as it is written.
        assert made[2] - made[1] < 100, made


async def test_lines_written_to_the_log_pane_repaint_it_without_a_layout_of_the_screen(
    home, make_app, settle, runs_dir, monkeypatch
) -> None:
    """Seen (issue 13, ``bench_tui_live.py``): during a big live run the Run screen was laid
    out again ~3 times a second (91 layouts in a 34 s run, up to 34 ms each), and the log pane
    asked for them: Textual's ``Log`` changes its virtual size on every write, and that asks
    for a layout of the whole screen, though the pane's size never depends on its lines.
    Its scrollbar still follows the lines, and the newest line stays in view."""
    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        screen, live = await _showing_a_started_run(app, pilot, settle, runs_dir)
        log = screen.query_one("#run-log")
        written = 0
        for task in TASKS[3:5]:  # the log follows the newest attempt: it is cleared between
            live.on_event(AttemptStarted(RUN, task, 0))
            screen.redraw()
            await settle(app, pilot)
            layouts = Counting(monkeypatch, screen, "_refresh_layout")
            for lines in (1, 30, 200):
                for _ in range(lines):
                    text = f"step {written} of {task}" + " and more" * (written % 7)
                    live.on_event(AttemptOutput(RUN, task, 0, "stdout", text))
                    written += 1
                screen.redraw()
                await settle(app, pilot)
                assert layouts.calls == 0, f"a layout of the screen after {lines} lines"
                # the scrollbar shows the pane's lines, and the newest one is in view
                assert log.vertical_scrollbar.window_virtual_size == log.virtual_size.height
                assert log.virtual_size.height == len(log.lines)
                assert log.scroll_y == log.max_scroll_y
                shown = "\n".join(log.render_line(y).text for y in range(log.size.height))
                assert f"step {written - 1} of {task}" in shown
            live.on_event(AttemptFinished(RUN, {"task_id": task, "attempt": 0, "outcome": "pass"}))
        assert written == 2 * (1 + 30 + 200)  # both tasks' lines were written and checked
