"""Benchmark: the volatility report on a synthetic 1M-row run, against DuckDB's floor.

Measured side by side in interleaved rounds, each a fresh process (start-up included):

- ``floor``: DuckDB's minimal query for the one metric (per-task max − min of success,
  averaged) over the same attempts file;
- ``report``: ``python -m driftdesk report RUN --format json``, the whole report (stdout to
  /dev/null);
- ``python loop``: the seed-style pure-Python report (``json.loads`` every line, group by task,
  max − min) for scale;

with each one's CPU time and peak memory. Then, in this process, a ``LiveVolatility``: its first
refresh (the whole file) and a refresh after 1,000 lines are appended (some superseding earlier
slots), against a cold in-process report.

Targets (issue 13): report ≤ 1.5× the floor with peak ≤ 512 MiB; live refresh after 1k lines
≤ 0.1× the cold report. Every ratio is printed with the load average beside it.

    .venv/bin/python tests/benchmarks/bench_report.py [--rows 1000000] [--attempts 50] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import interleave, load, table, timed_child, verdict

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

FLOOR = r"""
import duckdb, sys
print(duckdb.sql(
    "SELECT avg(s) FROM (SELECT task_id, max(CASE WHEN outcome = 'pass' THEN 1 ELSE 0 END) "
    "- min(CASE WHEN outcome = 'pass' THEN 1 ELSE 0 END) AS s "
    f"FROM read_json('{sys.argv[1]}') WHERE outcome IN ('pass', 'fail') GROUP BY task_id)"
).fetchall())
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument(
        "--attempts", type=int, default=50, help="attempts per task (default: 20k tasks × 50)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    args, _ = parser.parse_known_args()

    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        started = time.perf_counter()
        run = write_synthetic_run(Path(tmp), args.rows, args.attempts)
        attempts = run / "attempts.jsonl"
        size_mb = attempts.stat().st_size / 1e6
        print(
            f"synthetic run: {_count_lines(attempts):,} rows ({args.rows // args.attempts:,} tasks "
            f"× {args.attempts} + retried slots), {size_mb:.0f} MB "
            f"(written in {time.perf_counter() - started:.1f} s; {load()})"
        )
        argv = {
            "floor (duckdb one metric)": [python, "-c", FLOOR, str(attempts)],
            "report --format json": [
                python,
                "-m",
                "driftdesk",
                "report",
                str(run),
                "--format",
                "json",
            ],
            "python loop": [python, "-c", PYTHON_LOOP, str(attempts)],
        }
        runners = {name: (lambda a=a: timed_child(a)) for name, a in argv.items()}
        results = interleave(runners, args.rounds)
        table(results)
        floor = results["floor (duckdb one metric)"]
        report = results["report --format json"]
        print(f"CPU time ratio report / floor: {report.cpu / floor.cpu:.2f}×")
        print(f"report vs python loop: {results['python loop'].wall / report.wall:.1f}× faster")
        verdict("cold report vs floor (median wall)", report.wall / floor.wall, 1.5)
        verdict("cold report peak RSS", report.peak_rss / 2**20, 512, " MiB")

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
            live_report = live.refresh()
            refreshes.append(time.perf_counter() - start)
            assert live.lines_read_last_refresh == 1000, live.lines_read_last_refresh
            live.close()
        cold, first, refresh = (statistics.median(v) for v in (colds, firsts, refreshes))
        print(
            f"\nlive (median of 3): first refresh (whole file) {first:.2f} s; refresh after 1k "
            f"appended lines {refresh * 1000:.0f} ms vs cold report {cold:.2f} s in-process; "
            f"tasks judged {live_report.tasks_judged:,}"
        )
        verdict("live refresh after 1k lines vs cold report", refresh / cold, 0.1)


if __name__ == "__main__":
    main()
