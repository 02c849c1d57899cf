"""Benchmark: `driftdesk import big.jsonl --format jsonl` of 1M generic rows against the floor.

Side by side, interleaved rounds, each a fresh process:

- ``floor``: DuckDB's minimal query for the one metric (per-task max − min of success,
  averaged) over the same file;
- ``driftdesk import``: the file -> a run dir (validated, mapped, written, fsynced).

Targets: import ≤ 4× the floor, peak RSS ≤ 512 MiB; the bad lines (a few are planted) named by
number. Data lives in a temporary folder, deleted at the end.

    .venv/bin/python tests/benchmarks/bench_import.py [--rows 1000000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchlib import interleave, load, table, timed_child, verdict

FLOOR = r"""
import duckdb, sys
print(duckdb.sql(
    "SELECT avg(s) FROM (SELECT task_id, max(success::INT) - min(success::INT) AS s "
    f"FROM read_json('{sys.argv[1]}', ignore_errors=true) GROUP BY task_id)").fetchall())
"""
BAD_LINES = (17, 5_003, 250_001)  # planted: not JSON, no task id, attempt out of range


def write_generic(path: Path, rows: int, attempts: int = 50, seed: int = 11) -> None:
    """Generic results, the shape other harnesses write: task_id, trial, success, usage, …"""
    rng = random.Random(seed)
    tasks = max(1, rows // attempts)
    difficulty = [rng.random() for _ in range(tasks)]
    with open(path, "w") as fh:
        for i in range(rows):
            line = i + 1
            if line == BAD_LINES[0]:
                fh.write("{this is not json\n")
                continue
            task = i % tasks
            row: dict = {
                "task_id": f"suite/task-{task:06d}",
                "trial": i // tasks,
                "success": rng.random() < difficulty[task],
                "score": round(rng.random(), 4),
                "usage": {"prompt_tokens": rng.randint(500, 4000), "completion_tokens": 300},
                "latency_ms": round(rng.uniform(300, 9000), 3),
                "model": "gpt-4o",
            }
            if line == BAD_LINES[1]:
                del row["task_id"]
            if line == BAD_LINES[2]:
                row["trial"] = 10**20
            fh.write(json.dumps(row) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    args, _ = parser.parse_known_args()
    python = sys.executable
    tmp = Path(tempfile.mkdtemp(prefix="bench-import-"))
    try:
        source = tmp / "big.jsonl"
        write_generic(source, args.rows)
        print(
            f"generic source: {args.rows:,} rows, {source.stat().st_size / 1e6:.0f} MB ({load()})"
        )
        out = tmp / "runs"
        import_argv = [python, "-m", "driftdesk", "import", str(source), "--format", "jsonl"]
        import_argv += ["--out", str(out)]

        def run_import():
            shutil.rmtree(out, ignore_errors=True)
            return timed_child([*import_argv, "--run-id", "big"])

        runners = {
            "floor (duckdb one metric)": lambda: timed_child([python, "-c", FLOOR, str(source)]),
            "driftdesk import": run_import,
        }
        results = interleave(runners, args.rounds)
        table(results)
        check = subprocess.run(
            [*import_argv, "--run-id", "check"],
            capture_output=True,
            text=True,
            check=True,
        )
        named = re.findall(r": line (\d+): ([^\n]*)", check.stderr)
        print(f"\nbad lines named: {named}")
        lines_ok = [int(number) for number, _ in named] == list(BAD_LINES)
        ratio = results["driftdesk import"].wall / results["floor (duckdb one metric)"].wall
        cpu_ratio = results["driftdesk import"].cpu / results["floor (duckdb one metric)"].cpu
        print(f"CPU time ratio import / floor: {cpu_ratio:.2f}×")
        ok = verdict("import vs floor (median wall)", ratio, 4)
        ok &= verdict("import peak RSS", results["driftdesk import"].peak_rss / 2**20, 512, " MiB")
        print(f"bad lines named by number: {'OK' if lines_ok else 'MISSED'}")
        return 0 if ok and lines_ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
