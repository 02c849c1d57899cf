"""What a link fault costs with the real Claude Code and Codex: absorbed at the proxy
(``--link-faults absorb``) or retried as a whole try (``--link-faults retry``), against a
fault-free twin.

For each client, side by side in one run against the sandbox (simulated model), the coding
suite (tests/reruns/coding_helpers.py: fix-add, write-notes, rename) ``--repeat`` times, at
concurrency 1 with one seed, three ways:

- clean: no faults;
- absorb: ``--inject 429=10%,500=5%``, the proxy holds each fault and sends the call again;
- retry: the same faults reach the client (its own retries are off), its try ends and
  driftdesk reruns it from a fresh workspace.

Printed per client and way: tokens per judged attempt (every call's tokens in calls.jsonl,
discarded tries included, over the judged attempts) and its ratio to clean (target for absorb:
≤ 1.1×), the faults injected, absorbed and surfaced (link errors), tries rerun, wall time per
attempt, and how many attempts took exactly the actions of their fault-free twin (same
task, attempt and seed; the sandbox's draws do not see a fault it never received).

    PATH=.tools/npm/node_modules/.bin:$PATH .venv-test/bin/python tests/benchmarks/bench_absorb.py [--repeat 3] [--agents claude-code,codex]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "reruns"))
from benchlib import private_home
from coding_helpers import write_coding_suite
from reruns_helpers import client_profile

from driftdesk.analysis.trajectory import action_sequence, load_trajectory
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SandboxServer

KEY = "sk-bench-not-a-real-key-absorb-0123456789"
INJECT = "429=10%,500=5%"
WAYS = (("clean", "none", "absorb"), ("absorb", INJECT, "absorb"), ("retry", INJECT, "retry"))


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


async def one_run(
    agent: str, suite: Path, out: Path, seed: int, repeat: int, inject: str, link_faults: str
) -> tuple[Path, float]:
    with SandboxServer(seed=seed, suites=[suite], linger_s=0.3) as server:
        started = time.perf_counter()
        outcome = await execute_run(
            RunSpec(
                profile=client_profile(agent, server),
                suite=str(suite),
                repeat=repeat,
                concurrency=1,  # twins: the sandbox's draws fall in the same order
                timeout_s=180.0,
                seed=seed,
                out_dir=out,
                api_key=KEY,
                agent=agent,  # type: ignore[arg-type]
                retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.5, max_delay_s=5.0),
                inject=inject,
                link_faults=link_faults,
            )
        )
        return Path(outcome.run_dir), time.perf_counter() - started


def actions(run_dir: Path, task_id: str, attempt: int) -> list[tuple[str, str, str]] | None:
    traj = load_trajectory(run_dir, task_id, attempt)
    if traj is None:
        return None
    return [(a.kind, a.name, a.value) for a in action_sequence(traj)]


def figures(run_dir: Path, wall_s: float) -> dict[str, Any]:
    calls = _rows(run_dir / "calls.jsonl")
    rows = _rows(run_dir / "attempts.jsonl")
    judged = [r for r in rows if r["outcome"] in ("pass", "fail")]
    tokens = sum(int(c.get("total_tokens") or 0) for c in calls)
    return {
        "attempts": len(rows),
        "judged": len(judged),
        "passes": sum(1 for r in judged if r["outcome"] == "pass"),
        "tokens_per_judged": tokens / len(judged) if judged else float("nan"),
        "injected": sum(1 for c in calls if c.get("injected")),
        "absorbed": sum(1 for c in calls if c.get("absorbed")),
        "surfaced": sum(1 for r in rows if r["outcome"] == "link_error"),
        "tries_rerun": sum(int(r.get("retries") or 0) for r in rows),
        "wall_per_attempt_s": wall_s / len(rows) if rows else float("nan"),
        "slots": [(r["task_id"], r["attempt"], r["outcome"]) for r in rows],
    }


async def bench(agent: str, repeat: int, seed: int, scratch: Path) -> None:
    suite = write_coding_suite(scratch / agent / "suite")
    results: dict[str, tuple[Path, dict[str, Any]]] = {}
    for name, inject, link_faults in WAYS:
        run_dir, wall = await one_run(
            agent, suite, scratch / agent / name, seed, repeat, inject, link_faults
        )
        results[name] = (run_dir, figures(run_dir, wall))
    clean_dir, clean = results["clean"]
    print(f"\n{agent}: {clean['attempts']} attempts per way, seed {seed}, --inject {INJECT}")
    print(
        f"  {'way':<7} {'tok/judged':>10} {'× clean':>8} {'judged':>7} {'pass':>5} "
        f"{'injected':>8} {'absorbed':>8} {'surfaced':>8} {'reruns':>6} {'s/attempt':>9} "
        f"{'as twin':>8}"
    )
    for name, (run_dir, fig) in results.items():
        same = total = 0
        for task_id, attempt, outcome in fig["slots"]:
            if outcome not in ("pass", "fail"):
                continue
            total += 1
            mine = actions(run_dir, task_id, attempt)
            same += mine is not None and mine == actions(clean_dir, task_id, attempt)
        ratio = fig["tokens_per_judged"] / clean["tokens_per_judged"]
        print(
            f"  {name:<7} {fig['tokens_per_judged']:>10.0f} {ratio:>7.2f}× {fig['judged']:>7} "
            f"{fig['passes']:>5} {fig['injected']:>8} {fig['absorbed']:>8} {fig['surfaced']:>8} "
            f"{fig['tries_rerun']:>6} {fig['wall_per_attempt_s']:>9.1f} {same:>4}/{total:<3}"
        )
    print(f"  load average {os.getloadavg()[0]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=6)
    parser.add_argument("--agents", default="claude-code,codex")
    args = parser.parse_args()
    private_home("bench-absorb-")
    with tempfile.TemporaryDirectory(prefix="bench-absorb-") as scratch:
        for agent in args.agents.split(","):
            asyncio.run(bench(agent, args.repeat, args.seed, Path(scratch)))


if __name__ == "__main__":
    main()
