"""The Ray executor against the local one: attempts/s through the driver's metering proxy with
1, 2 and 4 worker nodes, and the driver's CPU per attempt, on the same suite and sandbox.

Each cluster is real (tests/reruns/ray_helpers.py: raylets on 127.0.0.1, 2 CPUs per worker
node, the head node runs no attempt), the endpoint a zero-latency sandbox in its own process,
the agent the builtin one (one or two model calls per attempt). The local executor runs the
same attempts at the same concurrency in the same process, before each cluster's turn. Also
measured: rows/s the run's single writer sustains (append + fsync per row, as attempts.jsonl).

On a 2-core machine the nodes share the driver's cores: the figures say what the driver costs
per attempt and where the proxy saturates, not how a real cluster scales.

    .venv-test/bin/python tests/benchmarks/bench_ray.py [--attempts 120] [--nodes 1,2,4]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reruns"))

from bench_executor import start_sandbox
from benchlib import load
from ray_helpers import loopback_cluster

from driftdesk.fileio import JsonlAppender
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.ray_executor import RaySettings
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL
from driftdesk.reruns.suites import load_suite


def driver_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def one_run(
    base_url: str, out: Path, repeat: int, concurrency: int, address: str | None
) -> tuple[float, float, int, int]:
    """(wall s, driver CPU s, attempts, calls) of one run of the basic suite."""
    spec = RunSpec(
        profile=Profile(name="bench", protocol="openai", base_url=base_url, model=SIM_MODEL),
        suite="basic",
        repeat=repeat,
        concurrency=concurrency,
        timeout_s=60,
        out_dir=out,
        api_key="sk-bench-not-a-real-key-0123456789",
        executor="ray" if address else "local",
        ray=RaySettings(address=address or "auto"),
    )
    cpu, start = driver_cpu(), time.perf_counter()
    outcome = await execute_run(spec)
    wall, spent = time.perf_counter() - start, driver_cpu() - cpu
    assert outcome.status == "completed", outcome.reason
    return wall, spent, outcome.stats.done, outcome.stats.calls


def writer_rows_per_second(folder: Path, rows: int = 2000) -> float:
    appender = JsonlAppender(folder / "attempts.jsonl")  # fsync per row, as a run writes
    row = {"run_id": "bench", "task_id": "t", "attempt": 0, "outcome": "pass", "calls": 1}
    start = time.perf_counter()
    for n in range(rows):
        appender.append({**row, "attempt": n})
    elapsed = time.perf_counter() - start
    appender.close()
    return rows / elapsed


def line(label: str, wall: float, cpu: float, attempts: int, calls: int, base: float) -> str:
    return (
        f"{label:<22} {attempts / wall:7.1f} attempts/s  {calls / wall:7.1f} calls/s  "
        f"driver CPU {cpu / attempts * 1000:6.1f} ms/attempt  x{attempts / wall / base:4.2f} "
        f"of local  ({load()})"
    )


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=120, help="attempts per run (about)")
    parser.add_argument("--nodes", default="1,2,4", help="worker node counts to try")
    args = parser.parse_args()
    tasks = len(load_suite("basic").tasks)
    repeat = max(1, round(args.attempts / tasks))
    sandbox, base_url = start_sandbox()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            print(f"single writer: {writer_rows_per_second(folder):.0f} rows/s (fsync per row)")
            for nodes in [int(n) for n in args.nodes.split(",")]:
                concurrency = 2 * nodes
                local = await one_run(base_url, folder / f"local{nodes}", repeat, concurrency, None)
                with loopback_cluster(nodes=nodes + 1, head_cpus=0, cpus=2) as cluster:
                    # A first small run starts the nodes' worker processes (and their imports).
                    await one_run(
                        base_url, folder / f"warm{nodes}", 1, concurrency, cluster.address
                    )
                    ray = await one_run(
                        base_url, folder / f"ray{nodes}", repeat, concurrency, cluster.address
                    )
                base = local[2] / local[0]
                print(f"-- {nodes} worker node(s), concurrency {concurrency}")
                print(line("local executor", *local, base))
                print(line(f"ray, {nodes} node(s)", *ray, base))
    finally:
        sandbox.terminate()
        sandbox.wait(10)


if __name__ == "__main__":
    asyncio.run(main())
