"""Benchmark: ``driftdesk trend`` over a long history (200 runs × 5,000 attempts by default).

Measured side by side in interleaved rounds, each a child process (wall, CPU, peak RSS):

- ``trend, first time``: every trend cache deleted first, so every run is read (round 1
  from its JSONL; later rounds from the row caches the report's reader kept, ``.rows-cache``);
- ``trend, nothing changed``: the cache entries kept from the round before;
- ``duckdb reads the files once``: the floor — DuckDB counting the rows of the same attempts
  files in one ``read_json`` (no aggregation, no Python);

then, in this process, the Trend view's key response on the same history (a cursor move in
the flip matrix, the median of ``--keys`` presses at 120×40).

    .venv/bin/python tests/benchmarks/bench_trend.py [--runs 200] [--tasks 500] [--repeat 10]
        [--rounds 3] [--keys 20]

Targets (issue #32): first time ≤ 3 s, nothing changed ≤ 0.3 s, peak ≤ 512 MiB, a key < 100 ms.
Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import interleave, load, private_home, table, timed_child, verdict

TREND_CODE = "from driftdesk.cli.main import main; raise SystemExit(main(['trend', '--runs', {folder!r}, '--json']))"
DUCKDB_CODE = (
    'import duckdb, glob; print(duckdb.sql("SELECT count(*) FROM read_json($p, '
    "format='newline_delimited', records=true, ignore_errors=true)\", params={{'p': "
    "sorted(glob.glob({pattern!r}))}}).fetchall()[0])"
)


def make_history(root: Path, runs: int, tasks: int, repeat: int) -> Path:
    """``runs`` completed run dirs of one suite, ``tasks`` × ``repeat`` rows each, a few
    tasks drifting (seeded), plus calls.jsonl with the served model."""
    folder = root / "runs"
    folder.mkdir()
    rng = random.Random(32)
    skills = [rng.choice([1.0, 1.0, 0.9, 0.6, 0.2, 0.0]) for _ in range(tasks)]
    for index in range(runs):
        run_id = f"nightly-{index:04d}"
        run_dir = folder / run_id
        run_dir.mkdir()
        served = "model-a" if index < runs // 2 else "model-b"
        started = f"2026-{1 + index // 28 % 12:02d}-{1 + index % 28:02d}T{index // 336:02d}:00:00Z"
        manifest = {
            "run_id": run_id, "profile": "nightly", "model": "model-a", "status": "completed",
            "suite": {"name": "bench", "path": None, "sha256": "0" * 64},
            "repeat": repeat, "tasks": [f"task-{t:05d}" for t in range(tasks)],
            "started_at": started,
        }  # fmt: skip
        (run_dir / "manifest.json").write_text(json.dumps(manifest))
        rows, calls = [], []
        for t in range(tasks):
            for attempt in range(repeat):
                passed = rng.random() < skills[t]
                rows.append(
                    json.dumps(
                        {
                            "run_id": run_id,
                            "task_id": f"task-{t:05d}",
                            "attempt": attempt,
                            "outcome": "pass" if passed else "fail",
                            "total_tokens": 900 + t % 50,
                            "prompt_tokens": 800,
                            "completion_tokens": 100 + t % 50,
                            "latency_ms": 1000.0 + rng.random() * 500,
                            "model": "model-a",
                        }
                    )
                )
                calls.append(
                    json.dumps(
                        {
                            "task_id": f"task-{t:05d}",
                            "attempt": attempt,
                            "status": 200,
                            "served_model": served,
                            "system_fingerprint": f"fp-{served}",
                        }
                    )
                )
        (run_dir / "attempts.jsonl").write_text("\n".join(rows) + "\n")
        (run_dir / "calls.jsonl").write_text("\n".join(calls) + "\n")
    return folder


def drop_cache(folder: Path) -> None:
    """Every cache trend keeps: the runs' aggregates, the pairs' paired-test verdicts and the
    whole trends kept (all under the user's cache dir's trend/ but the first)."""
    import shutil

    from driftdesk.analysis.trend_data import CACHE_FILE
    from driftdesk.paths import cache_dir

    for entry in folder.glob(f"*/{CACHE_FILE}"):
        entry.unlink()
    shutil.rmtree(cache_dir() / "trend", ignore_errors=True)


async def key_response(folder: Path, presses: int) -> tuple[float, float]:
    """(median, worst) seconds of a cursor move in the Trend view's flip matrix."""
    from driftdesk.tui.app import DriftdeskApp
    from driftdesk.tui.screens.trend import TrendScreen

    runs = sorted(folder.iterdir())
    app = DriftdeskApp(out_dir=folder, runs_dirs=[folder], blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = TrendScreen(runs[-1], runs)
        await app.push_screen(screen)
        while screen.trend is None:
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        times = []
        for i in range(presses):
            start = time.perf_counter()
            await pilot.press("left" if i % 2 else "down")
            await pilot.pause()
            times.append(time.perf_counter() - start)
    return statistics.median(times), max(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--keys", type=int, default=20)
    args = parser.parse_args()
    private_home("driftdesk-bench-trend-")
    root = Path(tempfile.mkdtemp(prefix="driftdesk-bench-trend-runs-"))
    started = time.perf_counter()
    folder = make_history(root, args.runs, args.tasks, args.repeat)
    print(
        f"{args.runs} runs × {args.tasks * args.repeat} attempts written in "
        f"{time.perf_counter() - started:.1f} s ({load()})"
    )
    trend = [sys.executable, "-c", TREND_CODE.format(folder=str(folder))]
    floor = [sys.executable, "-c", DUCKDB_CODE.format(pattern=str(folder / "*/attempts.jsonl"))]

    def cold() -> object:
        drop_cache(folder)
        return timed_child(trend)

    contenders = interleave(
        {
            "trend, first time": cold,  # type: ignore[dict-item]
            "trend, nothing changed": lambda: timed_child(trend),
            "duckdb reads the files once": lambda: timed_child(floor),
        },
        args.rounds,
    )
    table(contenders)
    first = contenders["trend, first time"]
    warm = contenders["trend, nothing changed"]
    duck = contenders["duckdb reads the files once"]
    print(f"\nfirst time / duckdb once: {first.wall / duck.wall:.2f}×;  "
          f"nothing changed / duckdb once: {warm.wall / duck.wall:.2f}×")  # fmt: skip
    ok = verdict("trend, first time", first.wall, 3.0, " s")
    ok &= verdict("trend, nothing changed", warm.wall, 0.3, " s")
    ok &= verdict("peak RSS", max(first.peak_rss, warm.peak_rss) / 2**20, 512, " MiB")
    median, worst = asyncio.run(key_response(folder, args.keys))
    print(f"Trend view key (cursor move, {args.runs} runs): median {median * 1000:.1f} ms, "
          f"worst {worst * 1000:.1f} ms")  # fmt: skip
    ok &= verdict("Trend view key, median", median * 1000, 100, " ms")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
