"""Executor attempt rate vs a bare ``openai`` client loop, same zero-latency endpoint.

Both sides send the same streamed chat completions for the built-in suite's single-turn tasks
at concurrency 32 to the sandbox endpoint (a separate process, no added latency). The executor
side is the whole engine: metering proxy hop, calls.jsonl + attempts.jsonl rows fsynced,
per-attempt logs and transcripts, judging. Target: executor / bare >= 0.5.

    .venv-test/bin/python tests/benchmarks/bench_executor.py [--attempts 960] [--concurrency 32]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import openai

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL
from driftdesk.reruns.suites import load_suite


def start_sandbox() -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "sandbox", "--seed", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    return process, process.stdout.readline().strip()


async def bare_loop(base_url: str, prompts: list[str], total: int, concurrency: int) -> float:
    client = openai.AsyncOpenAI(base_url=base_url, api_key="bench", max_retries=0, timeout=30)
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < total:
            prompt = prompts[next_index % len(prompts)]
            next_index += 1
            stream = await client.chat.completions.create(
                model=SIM_MODEL,
                messages=[{"role": "user", "content": prompt}],
                stream=True,
                stream_options={"include_usage": True},
            )
            async for _ in stream:
                pass

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - start
    await client.close()
    return total / elapsed


async def executor(base_url: str, task_ids: list[str], repeat: int, concurrency: int) -> float:
    with tempfile.TemporaryDirectory() as out:
        spec = RunSpec(
            profile=Profile(name="bench", protocol="openai", base_url=base_url, model=SIM_MODEL),
            suite="basic",
            tasks=task_ids,
            repeat=repeat,
            concurrency=concurrency,
            timeout_s=30,
            out_dir=Path(out),
            api_key="sk-bench-not-a-real-key",
        )
        start = time.perf_counter()
        outcome = await execute_run(spec)
        elapsed = time.perf_counter() - start
        assert outcome.stats.done == len(task_ids) * repeat
        assert not outcome.stats.by_outcome.get("link_error"), outcome.stats.to_dict()
    return len(task_ids) * repeat / elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--attempts", type=int, default=660)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    suite = load_suite("basic")
    single_turn = [t for t in suite.tasks if not t.tools]
    task_ids = [t.task_id for t in single_turn]
    repeat = max(1, args.attempts // len(task_ids))
    total = len(task_ids) * repeat
    prompts = [t.prompt_text for t in single_turn]
    process, base_url = start_sandbox()
    try:
        # Warm up both paths, then alternate so load drift hits both alike.
        asyncio.run(bare_loop(base_url, prompts, 64, args.concurrency))
        asyncio.run(executor(base_url, task_ids[:4], 4, args.concurrency))
        bare, engine = [], []
        for _ in range(args.rounds):
            bare.append(asyncio.run(bare_loop(base_url, prompts, total, args.concurrency)))
            engine.append(asyncio.run(executor(base_url, task_ids, repeat, args.concurrency)))
    finally:
        process.terminate()
        process.wait(10)
    # Each round measures both back to back; the median of the per-round ratios resists the
    # load other processes put on a shared machine.
    ratios = [e / b for b, e in zip(bare, engine, strict=True)]
    ratio = statistics.median(ratios)
    verdict = "met" if ratio >= 0.5 else "NOT met"
    print(
        f"attempts per measurement: {total}, concurrency {args.concurrency}, rounds {args.rounds}"
    )
    print(f"bare openai loop : {', '.join(f'{b:.1f}' for b in bare)} requests/s")
    print(f"driftdesk engine : {', '.join(f'{e:.1f}' for e in engine)} attempts/s")
    print(f"per-round ratios : {', '.join(f'{r:.2f}' for r in ratios)}")
    print(f"ratio engine/bare: {ratio:.2f} median  (target >= 0.50: {verdict})")


if __name__ == "__main__":
    main()
