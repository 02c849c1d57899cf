"""Benchmark: reports read through the run's typed cache (analysis/row_cache.py), against
DuckDB's one-metric floor, on the synthetic run of ``bench_report.py``.

Each a fresh process (start-up included), in interleaved rounds:

- ``floor``: DuckDB's minimal query for one metric over the attempts file;
- ``cold report``: ``driftdesk report RUN --format json`` with no cache (it writes one);
- ``cold, no cache written``: the same with the run's cache folder made unwritable (a file in
  its place, and no user cache dir): what writing the cache adds;
- ``warm report``: the run reported before, unchanged;
- ``warm after 1k lines``: 1,000 lines appended (half of them retries of written slots)
  since the last report, which extends the cache;

then the cache's size against the JSONL's. Every ratio has the load average beside it.

    .venv/bin/python tests/benchmarks/bench_row_cache.py [--rows 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import FLOOR, _row, write_synthetic_run
from benchlib import Sample, interleave, load, private_home, table, timed_child, verdict

CACHE = ".rows-cache"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--attempts", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    private_home("bench-row-cache-home-")
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its bytecode
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="bench-row-cache-") as tmp:
        run = write_synthetic_run(Path(tmp), args.rows, args.attempts)
        attempts = run / "attempts.jsonl"
        size = attempts.stat().st_size
        print(f"synthetic run: {args.rows:,} rows, {size / 1e6:.0f} MB ({load()})")
        report = [python, "-m", "driftdesk", "report", str(run), "--format", "json"]
        timed_child(report)  # bytecode compiled, the cache written once
        rng = random.Random(5)
        appended = 0

        def drop_cache() -> None:
            target = run / CACHE
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            shutil.rmtree(Path(os.environ["HOME"]) / ".cache", ignore_errors=True)

        def cold() -> Sample:
            drop_cache()
            return timed_child(report)

        def cold_unwritten() -> Sample:
            drop_cache()
            (run / CACHE).write_text("")  # the cache cannot be made beside the run
            cache_home = Path(os.environ["HOME"]) / ".cache"
            cache_home.write_text("")  # nor under the user's cache dir
            try:
                return timed_child(report)
            finally:
                (run / CACHE).unlink()
                cache_home.unlink()

        def warm() -> Sample:
            if not (run / CACHE / "meta.json").exists():
                timed_child(report)
            return timed_child(report)

        def warm_appended() -> Sample:
            nonlocal appended
            if not (run / CACHE / "meta.json").exists():
                timed_child(report)
            with open(attempts, "a") as fh:
                for i in range(1000):
                    new_slot = i % 2
                    attempt = args.attempts + appended if new_slot else i % args.attempts
                    fh.write(
                        json.dumps(_row(f"suite/task-{i * 7:06d}", attempt, "pass", None, rng))
                    )
                    fh.write("\n")
            appended += 1
            return timed_child(report)

        runners = {
            "floor (duckdb one metric)": lambda: timed_child([python, "-c", FLOOR, str(attempts)]),
            "cold report (writes cache)": cold,
            "cold, no cache written": cold_unwritten,
            "warm report": warm,
            "warm after 1k lines": warm_appended,
        }
        results = interleave(runners, args.rounds)
        table(results)
        floor = results["floor (duckdb one metric)"].wall
        cold_wall = results["cold report (writes cache)"].wall
        unwritten = results["cold, no cache written"].wall
        verdict("warm report vs floor", results["warm report"].wall / floor, 0.3)
        verdict(
            "warm after 1k appended lines vs floor",
            results["warm after 1k lines"].wall / floor,
            0.35,
        )
        verdict("cold report vs floor", cold_wall / floor, 2.5)
        verdict(
            "cold report peak RSS",
            results["cold report (writes cache)"].peak_rss / 2**20,
            512,
            " MiB",
        )
        verdict("writing the cache, share of a cold report", cold_wall / unwritten - 1, 0.10)
        timed_child(report)
        cache_bytes = sum(p.stat().st_size for p in (run / CACHE).iterdir())
        verdict("cache size vs the JSONL's", cache_bytes / attempts.stat().st_size, 0.3)
        from driftdesk.analysis.report import build_report

        build_report([run])  # the workbench's process has imported everything by then
        started = time.perf_counter()
        build_report([run])
        print(f"in-process warm build_report (the workbench's read): "
              f"{time.perf_counter() - started:.3f} s (target ≤ 0.5 s) [{load()}]")  # fmt: skip


if __name__ == "__main__":
    main()
