"""Benchmark: the volatility report on a synthetic 1M-row attempts file.

Measured side by side in one run, each in a fresh process (process start included), median of
``--repeat`` runs, alternating so that machine load hits every contender alike:

- ``report``: ``python -m driftdesk report RUN --format json`` (stdout to /dev/null);
- ``python loop``: the seed-style pure-Python report: ``json.loads`` every line, group by task,
  max − min of the outcomes;
- ``duckdb count``: DuckDB's bare ``count(*)`` over ``read_json`` of the same file;

and the report's peak memory (``ru_maxrss`` of the child). Then, in this process, a
``LiveVolatility``: its first refresh (the whole file) and a refresh after 1k lines are
appended (including rows that supersede earlier slots), against a cold in-process report.

Targets: report ≥ 4× faster than the Python loop; ≤ 1.5× DuckDB's count; ≤ 1 GiB peak.

    .venv/bin/python tests/benchmarks/bench_report.py [--rows 1000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PYTHON_LOOP = r"""
import json, sys
outcomes = {}
with open(sys.argv[1], "rb") as fh:
    for line in fh:
        row = json.loads(line)
        if row["outcome"] in ("pass", "fail"):
            outcomes.setdefault(row["task_id"], []).append(1 if row["outcome"] == "pass" else 0)
spread = {t: max(v) - min(v) for t, v in outcomes.items()}
print(len(spread), sum(spread.values()))
"""

DUCKDB_COUNT = r"""
import duckdb, sys
print(duckdb.sql(f"SELECT count(*) FROM read_json('{sys.argv[1]}')").fetchall())
"""


def write_synthetic_run(root: Path, rows: int, attempts_per_task: int, seed: int = 7) -> Path:
    """A run dir with ``rows`` attempt rows (tasks × attempts), ~1 % link errors of which half
    were retried by a resume: ~0.5 % more rows appended, each a later row for a slot already
    written, so the report's dedup path is exercised. Every field of the schema."""
    rng = random.Random(seed)
    tasks = rows // attempts_per_task
    run_dir = root / "bench-run"
    run_dir.mkdir(parents=True)
    task_ids = [f"suite/task-{i:06d}" for i in range(tasks)]
    difficulty = [rng.random() for _ in range(tasks)]  # per-task pass probability
    retried: list[tuple[int, int]] = []
    written = 0
    with open(run_dir / "attempts.jsonl", "w") as fh:
        for attempt in range(attempts_per_task):
            for index, task_id in enumerate(task_ids):
                if written >= rows:
                    break
                roll = rng.random()
                if roll < 0.01:
                    outcome, code = "link_error", rng.choice(["429", "timeout", "500"])
                    if roll < 0.005:
                        retried.append((index, attempt))
                else:
                    outcome, code = ("pass" if rng.random() < difficulty[index] else "fail"), None
                fh.write(json.dumps(_row(task_id, attempt, outcome, code, rng)) + "\n")
                written += 1
        for index, attempt in retried:
            outcome = "pass" if rng.random() < difficulty[index] else "fail"
            fh.write(json.dumps(_row(task_ids[index], attempt, outcome, None, rng)) + "\n")
    manifest = {
        "run_id": "bench-run",
        "model": "gpt-4o",
        "repeat": attempts_per_task,
        "tasks": task_ids,
        "status": "completed",
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def _row(task_id: str, attempt: int, outcome: str, code: str | None, rng: random.Random) -> dict:
    prompt, completion = rng.randint(500, 4000), rng.randint(50, 800)
    return {
        "run_id": "bench-run",
        "task_id": task_id,
        "scenario_id": task_id.rsplit("-", 1)[0],
        "attempt": attempt,
        "outcome": outcome,
        "success": None if outcome == "link_error" else outcome == "pass",
        "score": None,
        "error_code": code,
        "error_message": None if code is None else f"provider said {code}",
        "retries": 0,
        "calls": rng.randint(1, 6),
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "latency_ms": round(rng.uniform(300, 9000), 3),
        "started_at": "2026-11-29T10:00:00.000Z",
        "ended_at": "2026-11-29T10:00:04.000Z",
        "model": "gpt-4o",
        "base_url": "https://api.example.test/v1",
    }


def _count_lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(block.count(b"\n") for block in iter(lambda: fh.read(1 << 24), b""))


def timed_child(argv: list[str]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds (user + system) and peak RSS (bytes) of one child process,
    stdout discarded. CPU time says how much work a contender does when other processes
    share the cores (wall time then depends on the load)."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as devnull:
        proc = subprocess.Popen(argv, stdout=devnull, stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{argv[:4]} failed: {stderr}")
    return elapsed, usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--attempts", type=int, default=100, help="attempts per task (default: 10k tasks × 100)"
    )
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        started = time.perf_counter()
        run = write_synthetic_run(Path(tmp), args.rows, args.attempts)
        attempts = run / "attempts.jsonl"
        size_mb = attempts.stat().st_size / 1e6
        print(
            f"synthetic run: {_count_lines(attempts):,} rows ({args.rows // args.attempts:,} tasks "
            f"× {args.attempts} + retried slots), {size_mb:.0f} MB "
            f"(written in {time.perf_counter() - started:.1f} s)"
        )
        contenders = {
            "report": [python, "-m", "driftdesk", "report", str(run), "--format", "json"],
            "python loop": [python, "-c", PYTHON_LOOP, str(attempts)],
            "duckdb count": [python, "-c", DUCKDB_COUNT, str(attempts)],
        }
        times: dict[str, list[float]] = {name: [] for name in contenders}
        cpus: dict[str, list[float]] = {name: [] for name in contenders}
        peaks: dict[str, int] = dict.fromkeys(contenders, 0)
        for _ in range(args.repeat):
            for name, argv in contenders.items():
                elapsed, cpu, peak = timed_child(argv)
                times[name].append(elapsed)
                cpus[name].append(cpu)
                peaks[name] = max(peaks[name], peak)
        best = {name: statistics.median(values) for name, values in times.items()}
        cpu = {name: statistics.median(values) for name, values in cpus.items()}
        print(f"\n{'':14}{'median s':>9}{'runs (s)':>34}{'median CPU s':>14}{'peak RSS':>12}")
        for name in contenders:
            runs = " ".join(f"{t:.2f}" for t in times[name])
            print(
                f"{name:14}{best[name]:>9.2f}{runs:>34}{cpu[name]:>14.2f}"
                f"{peaks[name] / 2**20:>9.0f} MiB"
            )
        speedup = best["python loop"] / best["report"]
        vs_count = best["report"] / best["duckdb count"]
        print(
            f"\nreport vs python loop: {speedup:.2f}× faster (target ≥ 4×) "
            f"{'OK' if speedup >= 4 else 'MISSED'}"
        )
        print(
            f"report vs duckdb count(*): {vs_count:.2f}× (target ≤ 1.5×) "
            f"{'OK' if vs_count <= 1.5 else 'MISSED'}"
        )
        print(
            f"CPU time: python loop / report {cpu['python loop'] / cpu['report']:.2f}×, "
            f"report / duckdb count {cpu['report'] / cpu['duckdb count']:.2f}×"
        )
        print(
            f"machine load average while measuring: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores"
        )
        peak_gib = peaks["report"] / 2**30
        print(
            f"report peak memory: {peak_gib:.2f} GiB (target ≤ 1 GiB) "
            f"{'OK' if peak_gib <= 1 else 'MISSED'}"
        )

        from driftdesk.analysis.live import LiveVolatility
        from driftdesk.analysis.volatility import build_report

        colds, firsts, refreshes = [], [], []
        rng = random.Random(99)
        for round_ in range(3):
            start = time.perf_counter()
            build_report([run])
            colds.append(time.perf_counter() - start)
            live = LiveVolatility(run)
            start = time.perf_counter()
            live.refresh()
            firsts.append(time.perf_counter() - start)
            with open(attempts, "a") as fh:
                for i in range(1000):
                    # new attempts for some tasks, new rows for existing slots for others
                    attempt = args.attempts + round_ if i % 2 else i % args.attempts
                    row = _row(f"suite/task-{i * 7:06d}", attempt, "pass", None, rng)
                    fh.write(json.dumps(row) + "\n")
            start = time.perf_counter()
            report = live.refresh()
            refreshes.append(time.perf_counter() - start)
            assert live.lines_read_last_refresh == 1000, live.lines_read_last_refresh
            live.close()
        cold, first, refresh = (statistics.median(v) for v in (colds, firsts, refreshes))
        print(
            f"\nlive (median of 3): first refresh (whole file) {first:.2f} s; refresh after 1k "
            f"appended lines {refresh * 1000:.0f} ms vs cold report {cold:.2f} s in-process / "
            f"{best['report']:.2f} s CLI ({cold / refresh:.0f}× cheaper); "
            f"tasks judged {report.tasks_judged:,}"
        )


if __name__ == "__main__":
    main()
