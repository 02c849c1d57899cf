"""Per-attempt overhead driftdesk adds around a real client (Claude Code, Codex).

For each client, side by side in one run against the sandbox (simulated model, no latency):

- bare: the client started by hand, as a user would, on a fresh copy of the workspace with a
  fresh config dir, straight at the sandbox (no proxy), timed from spawn to exit;
- driftdesk: ``driftdesk run --agent <client>`` attempts on the same task (workspace copy,
  config dir, metering proxy, check, diff), one at a time.

Printed per client: the attempt's wall time (``latency_ms``), the client's own reported
duration (Claude Code's ``duration_ms``; Codex reports none), the client process's wall time
as driftdesk measured it, and the overhead = attempt wall − client's own duration (and
attempt wall − client process wall: what driftdesk itself spends around the process), with
the bare run's wall time for comparison and the load average (the machine is shared).

    PATH=.tools/npm/node_modules/.bin:$PATH .venv-test/bin/python tests/benchmarks/bench_preset_overhead.py [--attempts 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reruns"))
from coding_helpers import CODING_TASKS, write_coding_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.presets import PRESETS
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

KEY = "sk-bench-not-a-real-key-0123456789"


def bare_runs(agent: str, server: SandboxServer, suite: Path, attempts: int) -> list[float]:
    """The client by hand: fresh workspace and config dir, straight at the sandbox."""
    preset = PRESETS[agent]
    executable = preset.locate()
    url = server.root_url if agent == "claude-code" else server.base_url
    task = next(t for t in CODING_TASKS if t["task_id"] == "fix-add")
    times = []
    for _ in range(attempts):
        with tempfile.TemporaryDirectory() as scratch:
            ws, home = Path(scratch) / "ws", Path(scratch) / "home"
            shutil.copytree(suite.parent / "fix-add", ws)
            home.mkdir()
            preset.write_config(home, url, SIM_MODEL)
            env = dict(os.environ) | preset.environment(home, SIM_MODEL)
            if agent == "claude-code":
                env |= {"ANTHROPIC_BASE_URL": url, "ANTHROPIC_API_KEY": KEY}
            else:
                env |= {"OPENAI_BASE_URL": url, "OPENAI_API_KEY": KEY}
            start = time.perf_counter()
            subprocess.run(
                preset.argv(executable, task["prompt"], SIM_MODEL),
                cwd=ws,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                check=True,
                timeout=300,
            )
            times.append((time.perf_counter() - start) * 1000)
    return times


async def driftdesk_runs(
    agent: str, server: SandboxServer, suite: Path, attempts: int, out: Path
) -> list[dict]:
    url = server.root_url if agent == "claude-code" else server.base_url
    protocol = "anthropic" if agent == "claude-code" else "openai"
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="bench", protocol=protocol, base_url=url, model=SIM_MODEL),
            suite=str(suite),
            tasks=["fix-add"],
            repeat=attempts,
            concurrency=1,
            timeout_s=300,
            out_dir=out,
            api_key=KEY,
            agent=agent,  # type: ignore[arg-type]
        )
    )
    import json

    return [
        json.loads(line) for line in (outcome.run_dir / "attempts.jsonl").read_text().splitlines()
    ]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=5)
    parser.add_argument("--agents", default="claude-code,codex")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        suite = write_coding_suite(Path(scratch) / "suite")
        with SandboxServer(suites=[suite]) as server:
            for agent in args.agents.split(","):
                bare = bare_runs(agent, server, suite, args.attempts)
                rows = asyncio.run(
                    driftdesk_runs(agent, server, suite, args.attempts, Path(scratch) / "runs")
                )
                assert all(r["outcome"] == "pass" for r in rows), [r["outcome"] for r in rows]
                wall = [r["latency_ms"] for r in rows]
                process = [r["client_wall_ms"] for r in rows]
                own = [r["client_duration_ms"] for r in rows if r.get("client_duration_ms")]
                around = [w - p for w, p in zip(wall, process, strict=True)]
                print(f"{agent}: {args.attempts} attempts, medians (ms)")
                print(f"  bare client by hand        {median(bare):8.0f}")
                print(
                    f"  driftdesk attempt wall      {median(wall):8.0f}   ratio to bare {median(wall) / median(bare):.2f}"
                )
                print(f"  client process wall         {median(process):8.0f}")
                if own:
                    over = [w - o for w, o in zip(wall, own, strict=False)]
                    print(f"  client's own duration_ms    {median(own):8.0f}")
                    print(f"  overhead: wall - own        {median(over):8.0f}")
                else:
                    print("  client's own duration_ms        -   (the client reports none)")
                print(
                    f"  overhead: wall - process    {median(around):8.0f}   (driftdesk's own work around the client)"
                )
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
