"""Benchmark: the volatility report on a synthetic 1M-row run, against DuckDB's floor.

Measured side by side in interleaved rounds, each a fresh process (start-up included):

- ``floor``: DuckDB's minimal query for the one metric (per-task max − min of success,
  averaged) over the same attempts file;
- ``report``: ``python -m driftdesk report RUN --format json``, the whole report (stdout to
  /dev/null);
- ``typed load only``: the report's first step alone (the rows read and typed by the row rules
  into its table, nothing computed): what that step leaves of the target;
- ``python loop``: the seed-style pure-Python report (``json.loads`` every line, group by task,
  max − min) for scale;

with each one's CPU time and peak memory. Then, in this process, a ``LiveVolatility``: its first
refresh (the whole file), a refresh after 1,000 lines are appended, half of them superseding
earlier slots (a resume's retries), and one after 1,000 lines that only add slots (what a
running run writes), against a cold in-process report; each under CPython's collector settings
and under the app's (``tui.app.tune_collector``: the live view runs in the TUI's process),
interleaved.

Every report is cold: the caches a report keeps (``analysis.row_cache``, ``report_cache``) are
deleted before each; ``bench_row_cache.py`` times the warm ones.

Targets (issue 13): report ≤ 1.5× the floor with peak ≤ 512 MiB; live refresh after 1k lines
≤ 0.1× the cold report. Every ratio is printed with the load average beside it.

    .venv-test/bin/python tests/benchmarks/bench_report.py [--rows 1000000] [--attempts 50] [--rounds 3]

``--rows 10000000``: the scale benchmark (``scale``): reports of 1M and 10M rows and compare of
two 10M runs, with the 10M/1M ratio (target ≤ 12×) and peak RSS (target ≤ 1 GiB).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import (
    Sample,
    drop_caches,
    interleave,
    load,
    private_home,
    table,
    timed_child,
    verdict,
)

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

# The first step of any report that keeps the row rules: the rows read and typed into the
# report's table (``attempt_table.load_file``), nothing computed. Its ratio to the floor is
# what that step alone leaves of the cold report's target.
TYPED_LOAD = r"""
import sys
from driftdesk.analysis import attempt_table
with attempt_table.connection() as con:
    print(attempt_table.load_file(con, sys.argv[1], 0))
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


BASE_ROWS = 1_000_000


def replicate_run(base: Path, root: Path, name: str, chunks: int, *, flip_first: bool) -> Path:
    """A run of ``chunks`` copies of ``base``'s rows, each copy's tasks renamed (so the tasks
    are ``chunks`` times as many, each with the same attempts); ``flip_first`` turns the
    first copy's fails into passes (a run B that differs from A).

    Copied a block of whole lines at a time: this process must stay small, since a child's
    peak RSS as the kernel reports it includes its parent's high-water mark at exec."""
    manifest = json.loads((base / "manifest.json").read_text())
    run_dir = root / name
    run_dir.mkdir(parents=True)
    tasks: list[str] = []
    with open(run_dir / "attempts.jsonl", "wb") as out:
        for chunk in range(chunks):
            prefix = f"suite/c{chunk:03d}-task-"
            with open(base / "attempts.jsonl", "rb") as source:
                rest = b""
                for block in iter(lambda: source.read(1 << 24), b""):
                    block = rest + block
                    cut = block.rfind(b"\n") + 1
                    block, rest = block[:cut], block[cut:]
                    block = block.replace(b'"suite/task-', b'"' + prefix.encode())
                    if flip_first and chunk == 0:
                        block = block.replace(b'"outcome": "fail"', b'"outcome": "pass"')
                    out.write(block)
            tasks.extend(t.replace("suite/task-", prefix) for t in manifest["tasks"])
    started = "2026-11-29T10:00:00Z" if not flip_first else "2026-11-30T10:00:00Z"
    manifest.update(run_id=name, tasks=tasks, started_at=started)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    return run_dir


def cold_sample(argv: list[str], *runs: Path) -> Sample:
    """``argv`` timed with every cache of ``runs`` deleted first."""
    drop_caches(*runs)
    return timed_child(argv)


def scale(args: argparse.Namespace) -> None:
    """--rows past 1M: the report of 1M rows and of ``--rows`` rows (the 1M run copied with
    other task names), and compare of two such big runs, each a fresh process; the big report
    must take ≤ 12× the 1M one with peak RSS ≤ 1 GiB (issue 13)."""
    python = sys.executable
    chunks = args.rows // BASE_ROWS
    tmp_root = os.environ.get("DRIFTDESK_BENCH_TMP") or tempfile.gettempdir()
    needed = 2 * chunks * 0.47e9 + 0.5e9
    free = shutil.disk_usage(tmp_root).free
    if free < needed * 1.1:
        raise SystemExit(f"needs {needed / 1e9:.1f} GB free in {tmp_root}, has {free / 1e9:.1f}")
    with tempfile.TemporaryDirectory(prefix="bench-report-scale-", dir=tmp_root) as tmp:
        started = time.perf_counter()
        base = write_synthetic_run(Path(tmp), BASE_ROWS, args.attempts)
        big_a = replicate_run(base, Path(tmp), "big-a", chunks, flip_first=False)
        big_b = replicate_run(base, Path(tmp), "big-b", chunks, flip_first=True)
        size = (big_a / "attempts.jsonl").stat().st_size
        print(
            f"runs: 1M rows ({(base / 'attempts.jsonl').stat().st_size / 1e6:.0f} MB) and two "
            f"of {chunks}× that ({size / 1e9:.2f} GB each, {chunks * BASE_ROWS // args.attempts:,}"
            f" tasks), written in {time.perf_counter() - started:.0f} s ({load()})",
            flush=True,
        )
        report = [python, "-m", "driftdesk", "report", "--format", "json"]
        argv = {
            "report 1M": [*report, str(base)],
            f"report {chunks}M": [*report, str(big_a)],
            f"compare {chunks}M × 2": [
                python,
                "-m",
                "driftdesk",
                "compare",
                str(big_a),
                str(big_b),
                "--format",
                "json",
            ],
        }
        runners = {
            name: (lambda a=a: cold_sample(a, base, big_a, big_b)) for name, a in argv.items()
        }
        results = interleave(runners, args.rounds)
        table(results)
        small, big = results["report 1M"], results[f"report {chunks}M"]
        compare = results[f"compare {chunks}M × 2"]
        verdict(f"report {chunks}M vs 1M (median wall)", big.wall / small.wall, 12)
        verdict(f"report {chunks}M peak RSS", big.peak_rss / 2**20, 1024, " MiB")
        verdict(f"compare {chunks}M × 2 vs report 1M (median wall)", compare.wall / small.wall, 24)
        verdict(f"compare {chunks}M × 2 peak RSS", compare.peak_rss / 2**20, 1024, " MiB")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--rows",
        type=int,
        default=BASE_ROWS,
        help="rows of the run; past 1M (e.g. 10000000): the scale benchmark instead (needs "
        "about 1 GB of free disk per million rows in $DRIFTDESK_BENCH_TMP or the temp dir)",
    )
    parser.add_argument(
        "--attempts", type=int, default=50, help="attempts per task (default: 20k tasks × 50)"
    )
    parser.add_argument("--rounds", type=int, default=3)
    args, _ = parser.parse_known_args()
    private_home("bench-report-home-")  # the kept reports and trends go there, not the user's
    if args.rows > BASE_ROWS:
        scale(args)
        return

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
            "typed load only": [python, "-c", TYPED_LOAD, str(attempts)],
            "python loop": [python, "-c", PYTHON_LOOP, str(attempts)],
        }
        runners = {name: (lambda a=a: cold_sample(a, run)) for name, a in argv.items()}
        results = interleave(runners, args.rounds)
        table(results)
        floor = results["floor (duckdb one metric)"]
        report = results["report --format json"]
        print(f"CPU time ratio report / floor: {report.cpu / floor.cpu:.2f}×")
        print(f"report vs python loop: {results['python loop'].wall / report.wall:.1f}× faster")
        typed_load = results["typed load only"]
        print(
            f"the rows read and typed alone (no report): {typed_load.wall / floor.wall:.2f}× the "
            f"floor (CPU {typed_load.cpu / floor.cpu:.2f}×); the report's steps after it: "
            f"{(report.wall - typed_load.wall) / floor.wall:.2f}× the floor"
        )
        verdict("cold report vs floor (median wall)", report.wall / floor.wall, 1.5)
        verdict("cold report peak RSS", report.peak_rss / 2**20, 512, " MiB")

        from driftdesk.analysis.live import LiveVolatility
        from driftdesk.analysis.report import build_report
        from driftdesk.tui.app import restore_collector, tune_collector

        # The live view runs in the TUI's process, under the collector settings the app sets
        # (``tune_collector``); both are measured, the cold report beside each under the same.
        settings = ("CPython's collector", "the app's collector")
        colds: dict[str, list[float]] = {name: [] for name in settings}
        firsts: dict[str, list[float]] = {name: [] for name in settings}
        refreshes: dict[str, list[float]] = {name: [] for name in settings}
        adding: dict[str, list[float]] = {name: [] for name in settings}
        rng = random.Random(99)
        appended = 0

        def append_lines(superseding: bool) -> None:
            """1,000 lines for 1,000 tasks: each a new attempt, or with ``superseding`` every
            other one a later row for a slot already written (a resume's retry)."""
            nonlocal appended
            with open(attempts, "a") as fh:
                for i in range(1000):
                    new_slot = i % 2 or not superseding
                    attempt = args.attempts + appended if new_slot else i % args.attempts
                    row = _row(f"suite/task-{i * 7:06d}", attempt, "pass", None, rng)
                    fh.write(json.dumps(row) + "\n")
            appended += 1

        for round_ in range(3):
            for name in settings if round_ % 2 == 0 else settings[::-1]:
                thresholds = tune_collector() if name == settings[1] else None
                try:
                    drop_caches(run)
                    start = time.perf_counter()
                    build_report([run])
                    colds[name].append(time.perf_counter() - start)
                    live = LiveVolatility(run)
                    start = time.perf_counter()
                    live.refresh()
                    firsts[name].append(time.perf_counter() - start)
                    for superseding, times in ((True, refreshes), (False, adding)):
                        append_lines(superseding)
                        start = time.perf_counter()
                        live_report = live.refresh()
                        times[name].append(time.perf_counter() - start)
                        assert live.lines_read_last_refresh == 1000, live.lines_read_last_refresh
                    live.close()
                finally:
                    if thresholds is not None:
                        restore_collector(thresholds)
        print()
        for name in settings:
            cold, first, refresh, add = (
                statistics.median(v[name]) for v in (colds, firsts, refreshes, adding)
            )
            print(
                f"live, {name} (median of 3): first refresh (whole file) {first:.2f} s; refresh "
                f"after 1k appended lines {refresh * 1000:.0f} ms, half of them superseding "
                f"a slot ({refresh / cold:.3f}×), {add * 1000:.0f} ms when they only add slots "
                f"({add / cold:.3f}×), vs cold report {cold:.2f} s in-process; tasks judged "
                f"{live_report.tasks_judged:,}"
            )
        cold, refresh, add = (statistics.median(v[settings[1]]) for v in (colds, refreshes, adding))
        verdict(
            "live refresh after 1k lines, half superseding, vs cold report (the app's collector)",
            refresh / cold,
            0.1,
        )
        verdict(
            "live refresh after 1k lines adding slots (a running run), vs cold report",
            add / cold,
            0.1,
        )


if __name__ == "__main__":
    main()
