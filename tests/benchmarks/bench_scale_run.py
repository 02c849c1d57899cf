"""Benchmark: 10,000 attempts at concurrency 256 against the sandbox with 0.5 % injected faults
(429, 500, hangs), SIGKILLed at a random moment and resumed.

Prints: every slot exactly once in attempts.jsonl (lost, doubled), driftdesk's own CPU time
per attempt (``run`` + ``resume`` processes, from ``wait4``; the sandbox runs in this process
and is not counted) and their peak RSS, with the load average. The TUI key-press latency part
of issue 13 is not measured here.

    .venv-test/bin/python tests/benchmarks/bench_scale_run.py [--repeat 295] [--concurrency 256]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import load, rerun_in_private_keyring


def _rows(path: Path) -> list[dict]:
    return [
        json.loads(line)
        for line in path.read_bytes().splitlines(keepends=True)
        if line.endswith(b"\n")
    ]


def _wait(proc: subprocess.Popen[bytes]) -> tuple[int, float, int]:
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=295, help="34 basic tasks × this")
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--seed", type=int, default=13)
    args, _ = parser.parse_known_args()
    argv = ["--repeat", str(args.repeat), "--concurrency", str(args.concurrency)]
    code = rerun_in_private_keyring(__file__, [*argv, "--seed", str(args.seed)])
    if code is not None:
        return code

    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, FaultRates, SandboxServer
    from driftdesk.reruns.suites import load_suite

    with tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        os.environ.update(
            HOME=tmp,
            XDG_CONFIG_HOME=f"{tmp}/.config",
            XDG_DATA_HOME=f"{tmp}/.local/share",
            DRIFTDESK_KEYRING_SERVICE="driftdesk-bench-scale",
        )
        faults = FaultRates(rate_limit=0.002, server_error=0.002, timeout=0.001)
        sandbox = SandboxServer(seed=args.seed, latency_ms=20, faults=faults, retry_after_s=0.2)
        sandbox.start()
        try:
            ProfileStore().save(
                Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
            )
            set_key("sim", "sk-bench-scale-0123456789abcdef")
            slots = len(load_suite("basic").tasks) * args.repeat
            kill_after = random.Random(args.seed).randint(slots // 5, slots * 4 // 5)
            out = Path(tmp) / "runs"
            print(f"{slots:,} attempts, concurrency {args.concurrency}, kill -9 after "
                  f"{kill_after:,} rows ({load()})", flush=True)  # fmt: skip
            started = time.perf_counter()
            run = subprocess.Popen(
                [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite",
                 "basic", *argv, "--timeout", "5", "--out", str(out)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            attempts: Path | None = None
            while run.poll() is None:
                found = list(out.glob("*/attempts.jsonl"))
                if found and found[0].read_bytes().count(b"\n") >= kill_after:
                    attempts = found[0]
                    break
                time.sleep(0.05)
            if attempts is None:
                print("the run ended before the kill")
                return 1
            os.kill(run.pid, signal.SIGKILL)
            _, run_cpu, run_rss = _wait(run)
            before = len(_rows(attempts))
            resume = subprocess.Popen(
                [sys.executable, "-m", "driftdesk", "resume", str(attempts.parent)],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            code, resume_cpu, resume_rss = _wait(resume)
            wall = time.perf_counter() - started
        finally:
            sandbox.stop()
        rows = _rows(attempts)
        counts = Counter((r["task_id"], r["attempt"]) for r in rows)
        lost = slots - len(counts)
        doubled = sum(1 for n in counts.values() if n > 1)
        print(f"resume exit {code}; rows before the kill {before:,}, after resume {len(rows):,}")
        print(f"slots: {slots:,}  lost: {lost}  doubled: {doubled}  "
              f"{'OK' if lost == doubled == 0 else 'MISSED'}")  # fmt: skip
        print(f"sandbox requests {sandbox.stats.requests:,}, by kind {dict(sandbox.stats.by_kind)}")
        cpu = run_cpu + resume_cpu
        print(f"driftdesk CPU: {cpu:.1f} s for {slots:,} attempts = {cpu / slots * 1000:.2f} ms "
              f"per attempt; peak RSS run {run_rss / 2**20:.0f} MiB, resume "
              f"{resume_rss / 2**20:.0f} MiB; wall {wall:.0f} s   [{load()}]")  # fmt: skip
        return 0 if lost == doubled == 0 and code == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
