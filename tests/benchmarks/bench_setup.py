"""Run set-up time against suite size: linear, or not.

Set-up is everything ``execute_run`` does before the first attempt may start: load and check
the suite, pick the tasks, check the agent, create the run dir and manifest, list the slots.
Sizes double (10k, 20k, 40k tasks by default), so the ratio of one size's time to the previous
one's is ~2 for linear set-up and ~4 for quadratic. Measured side by side in one process.

    .venv-test/bin/python tests/benchmarks/bench_setup.py [--sizes 10000,20000,40000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import RunEvent, RunStarted
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run


def write_suite(path: Path, size: int) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for i in range(size):
            task = {"task_id": f"task-{i:07d}", "prompt": f"q {i}", "expected": {"equals": "x"}}
            fh.write(json.dumps(task) + "\n")
    return path


async def setup_seconds(suite: Path, out: Path) -> float:
    """Seconds from calling ``execute_run`` to its ``RunStarted`` event; the run is then
    cancelled (nothing is sent: the profile points at a closed port)."""
    started = asyncio.Event()

    class Listener:
        def on_event(self, event: RunEvent) -> None:
            if isinstance(event, RunStarted):
                started.set()

    t0 = time.perf_counter()
    task = asyncio.create_task(
        execute_run(
            RunSpec(
                profile=Profile(
                    name="b", protocol="openai", base_url="http://127.0.0.1:9", model="m"
                ),
                suite=str(suite),
                repeat=2,
                out_dir=out,
                api_key="bench",
            ),
            Listener(),
        )
    )
    await started.wait()
    elapsed = time.perf_counter() - t0
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return elapsed


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10000,20000,40000")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        print(f"load average before: {os.getloadavg()[0]:.2f}")
        previous: float | None = None
        for size in sizes:
            suite = write_suite(root / f"suite-{size}.jsonl", size)
            # The best of three: other processes on the machine only ever add time.
            seconds = min([await setup_seconds(suite, root / "runs") for _ in range(3)])
            ratio = f"x{seconds / previous:.2f} of the previous size" if previous else ""
            print(f"{size:>7} tasks: set-up {seconds:7.3f} s  {ratio}")
            previous = seconds
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        print("linear set-up doubles with the size (x2); quadratic quadruples (x4)")


if __name__ == "__main__":
    asyncio.run(main())
