"""Benchmark: `driftdesk import big.jsonl --format jsonl` of 1M generic rows against the floor.

Side by side, interleaved rounds, each a fresh process:

- ``floor``: DuckDB's minimal query for the one metric (per-task max − min of success,
  averaged) over the same file;
- ``driftdesk import`` (zero-copy, the default): every line checked and mapped, the bad ones
  named; the run dir links the source file (``analysis/zero_copy.py``);
- ``driftdesk import --copy``: the same, and the mapped rows written into the run dir
  (self-contained) and fsynced;
- ``report of the zero-copy run``: what reading through the link costs afterwards (for
  comparison with the report of the copied run; not a target).

Targets: import ≤ 4× the floor, peak RSS ≤ 512 MiB; the bad lines (a few are planted) named by
number, in both modes. Data lives in a temporary folder, deleted at the end.

    .venv-test/bin/python tests/benchmarks/bench_import.py [--rows 1000000] [--rounds 3]
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
    private_home("bench-import-home-")  # the kept reports go there, not the user's
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

        def run_import(*extra: str):
            def run():
                shutil.rmtree(out / extra_id(extra), ignore_errors=True)
                return timed_child([*import_argv, "--run-id", extra_id(extra), *extra])

            return run

        def extra_id(extra: tuple[str, ...]) -> str:
            return "big-copy" if extra else "big"

        report_argv = [python, "-m", "driftdesk", "report", "--format", "json"]

        def cold_report(run_dir: Path) -> Sample:
            drop_caches(run_dir)  # a report of this run made before is kept
            return timed_child([*report_argv, str(run_dir)])

        floor_name = "floor (duckdb one metric)"
        runners = {
            floor_name: lambda: timed_child([python, "-c", FLOOR, str(source)]),
            "driftdesk import (zero-copy)": run_import(),
            "driftdesk import --copy": run_import("--copy"),
            "report of the zero-copy run": lambda: cold_report(out / "big"),
            "report of the copied run": lambda: cold_report(out / "big-copy"),
        }
        results = interleave(runners, args.rounds)
        table(results)
        floor = results[floor_name]
        print()
        ok = lines_ok = True
        for mode, extra in (("zero-copy", ()), ("--copy", ("--copy",))):
            name = f"driftdesk import{' ' + extra[0] if extra else ' (zero-copy)'}"
            check = subprocess.run(
                [*import_argv, "--run-id", f"check-{mode}", *extra],
                capture_output=True,
                text=True,
                check=True,
            )
            named = re.findall(r": line (\d+): ([^\n]*)", check.stderr)
            print(f"{mode}: bad lines named: {named}")
            lines_ok &= [int(number) for number, _ in named] == list(BAD_LINES)
            print(f"{mode}: CPU time ratio import / floor: {results[name].cpu / floor.cpu:.2f}×")
            ratio = results[name].wall / floor.wall
            if mode == "zero-copy":  # the target is the default import's
                ok &= verdict(f"{mode} import vs floor (median wall)", ratio, 4)
            else:
                print(f"{mode} import vs floor (median wall): {ratio:.3f}× (not a target)")
            ok &= verdict(f"{mode} import peak RSS", results[name].peak_rss / 2**20, 512, " MiB")
        for name in ("report of the zero-copy run", "report of the copied run"):
            print(f"{name} / floor: {results[name].wall / floor.wall:.2f}× (not a target)")
        print(f"bad lines named by number: {'OK' if lines_ok else 'MISSED'}")
        return 0 if ok and lines_ok else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
