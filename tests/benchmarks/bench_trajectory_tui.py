"""Benchmark: opening a 40-step trajectory in the workbench (target ≤ 200 ms).

A run as the proxy writes it (``tests/analysis/recording_fixtures``), one task with 6 attempts
of 40 steps each (20 model turns calling a tool, its results, the question). The workbench is driven headless (Pilot) on the
task's drill-down; each round moves the cursor to another attempt and times, side by side:

- ``load only``: reading the attempt's trajectory (``load_trajectory``), in this process;
- ``attempt → steps shown``: with the trajectory pane open, moving to the attempt until the
  pane lists its steps (the worker's reads of its log, details and trajectory, the message,
  the widget's fill and a repaint).

Not part of the test suite.

    .venv-test/bin/python tests/benchmarks/bench_trajectory_tui.py [--turns 20] [--rounds 6]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "analysis"))
from benchlib import load, private_home, verdict
from recording_fixtures import write_manifest, write_slot

TASK = "retail-7"
ATTEMPTS = 6
TARGET_MS = 200.0


def write_run(run: Path, turns: int) -> None:
    write_manifest(run)
    for attempt in range(ATTEMPTS):
        passes = attempt % 2 == 0
        script: list[tuple] = []
        for turn in range(turns - 1):
            order = f"#W{turn}" if passes or turn < 20 else f"#X{turn}"
            result = json.dumps({"order_id": order, "status": "delivered", "items": ["k"] * 20})
            script.append(("call", "get_order_details", {"order_id": order}, result))
        script.append(("answer", "Delivered." if passes else "Not found."))
        write_slot(run, TASK, attempt, script, outcome="pass" if passes else "fail")


async def measure(run: Path, rounds: int, steps: int) -> dict[str, list[float]]:
    from textual.widgets import DataTable

    from driftdesk.analysis.trajectory import load_trajectory
    from driftdesk.tui.app import DriftdeskApp
    from driftdesk.tui.screens.task import TaskScreen
    from driftdesk.tui.widgets.trajectory import TrajectoryView

    times: dict[str, list[float]] = {"load only": [], "attempt → steps shown": []}
    app = DriftdeskApp(out_dir=run.parent, runs_dirs=[run.parent], blink=False)
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.pause(0.5)
        app.push_screen(TaskScreen(run, TASK))
        await pilot.pause(1.0)
        screen = app.screen
        table = screen.query_one("#attempts", DataTable)
        view = screen.query_one("#trajectory", TrajectoryView)
        await pilot.press("t")  # the trajectory pane, then attempt after attempt
        await pilot.pause(0.5)
        for round_ in range(rounds):
            attempt = (round_ + 1) % ATTEMPTS
            start = time.perf_counter()
            load_trajectory(run, TASK, attempt)
            loaded = time.perf_counter() - start
            await pilot.pause(0.3)
            before = view.steps
            start = time.perf_counter()
            table.move_cursor(row=attempt)  # what the arrow keys do
            while view.steps is before:
                await asyncio.sleep(0.001)
            await pilot.pause()  # the repaint
            shown = time.perf_counter() - start
            assert len(view.steps) == steps, len(view.steps)
            times["load only"].append(loaded)
            times["attempt → steps shown"].append(shown)
            print(
                f"  round {round_ + 1}: load only {loaded * 1000:.1f} ms, "
                f"attempt → steps shown {shown * 1000:.1f} ms ({load()})",
                flush=True,
            )
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    # 20 model turns: 40 steps (the question, 20 model turns, 19 tool results)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    private_home("driftdesk-bench-traj-home-")
    with tempfile.TemporaryDirectory(prefix="driftdesk-bench-traj-") as tmp:
        run = Path(tmp) / "runs" / "run-1"
        write_run(run, args.turns)
        print(f"run {run}: {ATTEMPTS} attempts × {2 * args.turns} steps ({load()})")
        steps = 2 * args.turns  # the user's turn, each model turn, each tool result but the last
        times = asyncio.run(measure(run, args.rounds, steps))
    loaded = statistics.median(times["load only"]) * 1000
    shown = statistics.median(times["attempt → steps shown"]) * 1000
    print(
        f"\nmedians: load only {loaded:.1f} ms, attempt → steps shown {shown:.1f} ms "
        f"({shown / loaded:.1f}× the load)"
    )
    verdict("opening a 40-step trajectory in the workbench", shown, TARGET_MS, " ms")


if __name__ == "__main__":
    main()
