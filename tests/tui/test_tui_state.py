"""The live state the Run screen draws from, fed by the real engine against the sandbox."""

from __future__ import annotations

from pathlib import Path

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import RunEvent
from driftdesk.reruns.execution import RunOutcome
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.tui.state import LiveRun


async def _run_basic(
    server: SandboxServer, live: LiveRun, out: Path, concurrency: int
) -> RunOutcome:
    """The basic suite twice over against ``server``, watched by ``live``."""
    spec = RunSpec(
        profile=Profile("sim", "openai", server.base_url, SIM_MODEL),
        suite="basic",
        repeat=2,
        concurrency=concurrency,
        timeout_s=30,
        out_dir=out,
        api_key="throwaway-sandbox-key",
    )
    return await execute_run(spec, live)


class RecordingLiveRun(LiveRun):
    """A LiveRun that remembers its running count after every event."""

    def __init__(self) -> None:
        super().__init__(label="state test")
        self.running_seen: list[int] = []

    def on_event(self, event: RunEvent) -> None:
        super().on_event(event)
        self.running_seen.append(self.running)


async def test_running_count_never_exceeds_the_concurrency(tmp_path: Path) -> None:
    live = RecordingLiveRun()
    with SandboxServer(seed=3, latency_ms=5.0) as server:
        outcome = await _run_basic(server, live, tmp_path, concurrency=2)
    assert outcome.status == "completed"
    assert live.done == live.total == outcome.stats.total
    assert max(live.running_seen) == 2  # both slots were busy at some point, never more
    assert live.running == 0


async def test_the_live_counters_are_the_engines_own_rules(tmp_path: Path) -> None:
    """The TUI's counters are a ``RunStats`` kept from the events: at the end of a real run
    with retries and link errors they equal the engine's own, field for field."""
    from driftdesk.reruns.simulated_endpoint import FaultRates

    live = LiveRun(label="stats test")
    faults = FaultRates(rate_limit=0.1, server_error=0.1)
    with SandboxServer(seed=5, latency_ms=0.0, faults=faults, retry_after_s=0.01) as server:
        outcome = await _run_basic(server, live, tmp_path, concurrency=8)
    assert outcome.status == "completed"
    mine, engines = live.stats.to_dict(), outcome.stats.to_dict()
    mine.pop("elapsed_seconds"), engines.pop("elapsed_seconds")
    assert mine == engines
    assert engines["retries"] > 0 and engines["calls"] > engines["done"]
    assert live.tokens == outcome.stats.tokens > 0


async def test_a_big_live_run_is_not_rendered_whole_when_a_worker_is_started_with_it(
    home, make_app, settle
) -> None:
    """Textual describes a worker by the repr of its arguments: the Run screen's cost worker
    takes the LiveRun every tick, and the repr of 10,000 cells and rows held the app's thread
    for tenths of a second each time (found profiling bench_tui_live.py)."""
    from driftdesk.reruns.events import AttemptFinished, AttemptStarted, RunStarted
    from driftdesk.tui.screens.run import RunScreen

    live = LiveRun(label="big")
    tasks = tuple(f"task-{i:03d}" for i in range(100))
    live.on_event(RunStarted("r", home.project / "runs" / "r", {}, tasks, 100, 10_000))
    for task in tasks:
        for attempt in range(100):
            live.on_event(AttemptStarted("r", task, attempt))
            row = {"task_id": task, "attempt": attempt, "outcome": "pass", "latency_ms": 1.0}
            live.on_event(AttemptFinished("r", row))
    assert live.done == 10_000
    assert len(repr(live)) < 200 and "big" in repr(live)
    app = make_app(start_mode="run")
    async with app.run_test() as pilot:
        await settle(app, pilot)
        screen = app.screen
        assert isinstance(screen, RunScreen)
        worker = screen.refresh_cost(live)
        assert len(worker.description) < 300
        await worker.wait()


def _tracked_objects_held(live: LiveRun) -> int:
    """Objects the garbage collector tracks among those the run's state holds: a full
    collection (the app paused) traverses each of them."""
    import gc
    from collections import deque

    gc.collect()  # tuples and dicts of atoms stop being tracked when a collection sees them
    containers = (dict, list, tuple, set, frozenset, deque)
    seen: set[int] = set()
    # Into containers only: an object's referents include its class, and through it the world.
    todo = [v for v in vars(live).values() if isinstance(v, containers) and gc.is_tracked(v)]
    while todo:
        obj = todo.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, containers):
            todo.extend(o for o in gc.get_referents(obj) if gc.is_tracked(o))
    return len(seen)


async def test_finished_attempts_leave_nothing_the_collector_must_traverse(
    tmp_path: Path,
) -> None:
    """A 10,000-attempt run's state stays in the app's heap for the whole run, and a full
    collection traverses every tracked object in it: with a deque of log lines and one of
    call records per attempt, one collection held the app for ~150 ms mid-run
    (bench_tui_live.py). A finished attempt keeps its lines, in objects the collector
    does not track."""
    held = {}
    for repeat in (1, 3):
        live = LiveRun(label="held")
        with SandboxServer(seed=3, latency_ms=0.0) as server:
            spec = RunSpec(
                profile=Profile("sim", "openai", server.base_url, SIM_MODEL),
                suite="basic",
                repeat=repeat,
                concurrency=8,
                timeout_s=30,
                out_dir=tmp_path / str(repeat),
                api_key="throwaway-sandbox-key",
            )
            outcome = await execute_run(spec, live)
        assert outcome.status == "completed"
        # every attempt's lines are kept, ending with its outcome
        assert len(live.logs) == live.done == outcome.stats.total
        assert all("[driftdesk] finished:" in lines[-1] for lines in live.logs.values())
        assert any(line.startswith("[call 0]") for lines in live.logs.values() for line in lines)
        held[repeat] = (live.done, _tracked_objects_held(live))
    (small_done, small), (big_done, big) = held[1], held[3]
    per_attempt = (big - small) / (big_done - small_done)
    assert per_attempt < 0.1, (held, per_attempt)


async def test_a_finished_slot_run_again_keeps_its_lines_and_adds_the_new_ones() -> None:
    from driftdesk.reruns.events import AttemptFinished, AttemptOutput, AttemptStarted

    live = LiveRun(label="again")
    for text in ("first try", "second try"):
        live.on_event(AttemptStarted("r", "t", 0))
        live.on_event(AttemptOutput("r", "t", 0, "stdout", text))
        live.on_event(AttemptFinished("r", {"task_id": "t", "attempt": 0, "outcome": "fail"}))
    lines = list(live.logs[("t", 0)])
    assert lines[0] == "first try" and lines[2] == "second try", lines
    assert len(lines) == 4 and live.log_counts[("t", 0)] == 4
    assert live.new_log_lines(("t", 0), 2) == (lines[2:], 4)
