"""Benchmark: redrawing the live task × attempt grid, line-API AttemptGrid vs a DataTable.

    .venv-test/bin/python tests/benchmarks/bench_attempt_grid.py [rounds]

Both widgets get the same updates (64 cells change per round, like 64 concurrent attempts
moving on), each round followed by a real render of the headless app; the script prints the
time per round of each and their ratio, measured side by side in one run.
"""

from __future__ import annotations

import asyncio
import random
import sys
import time
from typing import Any

from rich.text import Text
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from driftdesk.tui.widgets.attempt_grid import SYMBOLS, AttemptGrid

TASKS = tuple(f"task-{i:02d}" for i in range(34))
REPEAT = 40
STATES = ["running", "pass", "fail", "link_error", "retrying"]


class GridApp(App[None]):
    def __init__(self, kind: str) -> None:
        super().__init__()
        self.kind = kind

    def compose(self) -> ComposeResult:
        if self.kind == "grid":
            yield AttemptGrid(id="g")
        else:
            table: DataTable[Any] = DataTable(id="g", cursor_type="cell")
            table.add_column("task", key="task")
            for a in range(REPEAT):
                table.add_column(str(a), key=f"a{a}", width=2)
            for task in TASKS:
                table.add_row(task, *["·"] * REPEAT, key=task)
            yield table


async def measure(kind: str, rounds: int) -> float:
    rng = random.Random(7)
    app = GridApp(kind)
    cells: dict[tuple[str, int], str] = {}
    async with app.run_test(size=(140, 42)) as pilot:
        widget = app.query_one("#g")
        if isinstance(widget, AttemptGrid):
            widget.set_run(TASKS, REPEAT)
        await pilot.pause()
        start = time.perf_counter()
        for _ in range(rounds):
            changed = {
                (rng.choice(TASKS), rng.randrange(REPEAT)): rng.choice(STATES) for _ in range(64)
            }
            cells.update(changed)
            if isinstance(widget, AttemptGrid):
                widget.update_cells(dict(cells))
            else:
                for (task, attempt), state in changed.items():
                    symbol, style = SYMBOLS[state]
                    widget.update_cell(task, f"a{attempt}", Text(symbol, style=style))
            await pilot.pause()  # let the app render this round
        return (time.perf_counter() - start) / rounds


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 40
    grid = asyncio.run(measure("grid", rounds))
    table = asyncio.run(measure("datatable", rounds))
    print(f"redraw round (64 changed cells, 34×{REPEAT} grid), {rounds} rounds each:")
    print(f"  AttemptGrid (line API): {grid * 1000:7.1f} ms")
    print(f"  DataTable:              {table * 1000:7.1f} ms")
    print(f"  ratio DataTable / AttemptGrid: {table / grid:.1f}×")


if __name__ == "__main__":
    main()
