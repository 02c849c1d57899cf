"""How fast ``driftdesk ctl`` retunes a live run, and what a pause holds.

A run of one-call attempts (the builtin agent, fixed concurrency 16) against the sandbox
answering in 0.5 s on average; from another process (the real ``driftdesk ctl`` CLI, started
anew each time, as a user would) it is lowered to 2, raised back, lowered to 4, ..., paused and
unpaused. Measured on the sandbox's side (model calls in flight, every 5 ms):

- retune: from the moment ``ctl`` is started to the first moment the calls in flight are at
  most the new limit, and whether they ever exceed it after that (target: within 1.5 s);
- pause: attempts started between the pause's acknowledgement and the unpause (target: 0),
  and how long the attempts in flight took to drain.

    .venv-test/bin/python tests/benchmarks/bench_retune.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import load, private_home

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import AttemptStarted, RunEvent, RunStarted
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

TARGET_S = 1.5
REPEAT = 15  # x 100 one-call tasks


class Watch:
    def __init__(self) -> None:
        self.run_dir: Path | None = None
        self.started: list[float] = []

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, RunStarted):
            self.run_dir = event.run_dir
        elif isinstance(event, AttemptStarted):
            self.started.append(time.monotonic())


def _ctl(run_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "driftdesk", "ctl", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


async def _retune(server: SandboxServer, run_dir: Path, limit: int) -> tuple[float, int]:
    """Seconds until calls in flight <= ``limit``, and the most in flight 1.5-2.5 s after."""
    asked = time.monotonic()
    ctl = asyncio.create_task(asyncio.to_thread(_ctl, run_dir, "--concurrency", str(limit)))
    took = None
    reset = False
    while took is None or time.monotonic() - asked < TARGET_S + 1.0:
        await asyncio.sleep(0.005)
        now = time.monotonic()
        if took is None and server.stats.in_flight <= limit and ctl.done():
            took = now - asked
        if not reset and now - asked > TARGET_S:
            server.stats.peak = server.stats.in_flight  # the most in flight from here on
            reset = True
    done = await ctl
    assert done.returncode == 0, done.stderr
    assert took is not None
    return took, server.stats.peak


async def _bench(rounds: int, folder: Path) -> dict[str, Any]:
    suite = folder / "suite.jsonl"
    suite.write_text(
        "".join(
            f'{{"task_id": "q{i}", "prompt": "Say {i}.", "expected": {{"equals": "{i}"}}}}\n'
            for i in range(100)
        )
    )
    watch = Watch()
    with SandboxServer(latency_ms=500) as server:
        spec = RunSpec(
            profile=Profile(
                name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL
            ),
            suite=str(suite),
            repeat=REPEAT,
            concurrency=16,
            out_dir=folder / "runs",
            api_key="sk-bench-retune-0123456789",
        )
        run = asyncio.create_task(execute_run(spec, watch))
        while watch.run_dir is None or len(watch.started) < 32:
            await asyncio.sleep(0.01)
        run_dir = watch.run_dir
        retunes: list[tuple[int, float, int]] = []
        for i in range(rounds):
            low = 2 if i % 2 == 0 else 4
            took, peak = await _retune(server, run_dir, low)
            retunes.append((low, took, peak))
            await _retune(server, run_dir, 16)
        asked = time.monotonic()
        paused = await asyncio.to_thread(_ctl, run_dir, "--pause")
        acked = time.monotonic()
        assert paused.returncode == 0, paused.stderr
        while server.stats.in_flight:
            await asyncio.sleep(0.005)
        drained = time.monotonic() - asked
        await asyncio.sleep(3.0)
        before_unpause = time.monotonic()
        started_while_paused = sum(acked < t < before_unpause for t in watch.started)
        await asyncio.to_thread(_ctl, run_dir, "--unpause")
        outcome = await run
    rows = (outcome.run_dir / "attempts.jsonl").read_text().splitlines()
    slots = Counter((r["task_id"], r["attempt"]) for r in map(json.loads, rows))
    return {
        "retunes": retunes,
        "drained_s": drained,
        "started_while_paused": started_while_paused,
        "slots": len(slots),
        "doubled": sum(n > 1 for n in slots.values()),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    private_home("driftdesk-bench-retune-")
    print(f"retune a live run (16 at once, 0.5 s answers) from driftdesk ctl; {load()}")
    with tempfile.TemporaryDirectory(prefix="bench-retune-") as folder:
        result = asyncio.run(_bench(args.rounds, Path(folder)))
    times = [took for _, took, _ in result["retunes"]]
    for limit, took, peak in result["retunes"]:
        print(
            f"  16 -> {limit}: calls in flight <= {limit} after {took:.2f} s "
            f"(most in flight {TARGET_S:g}-{TARGET_S + 1:g} s after: {peak})"
        )
    over = [peak > limit for limit, _, peak in result["retunes"]]
    met = max(times) <= TARGET_S and not any(over)
    print(
        f"retune: median {statistics.median(times):.2f} s, worst {max(times):.2f} s "
        f"(target <= {TARGET_S:g} s, never above the new limit after): "
        f"{'MET' if met else 'NOT MET'}"
    )
    paused_ok = result["started_while_paused"] == 0
    print(
        f"pause: attempts in flight drained in {result['drained_s']:.2f} s; "
        f"{result['started_while_paused']} started while paused (target 0): "
        f"{'MET' if paused_ok else 'NOT MET'}"
    )
    print(
        f"after unpause: {result['slots']} of {REPEAT * 100} slots with a row, "
        f"{result['doubled']} doubled"
    )
    print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
