"""Benchmark: the drill-down into one task of a 1M-row run (every row of the task, with its
line number), against the line-by-line read it replaced.

Measured side by side in interleaved rounds, in this process, for tasks whose rows sit early,
in the middle and at the end of the file:

- ``line by line``: every line read in Python and tested for the task id (the reader before);
- ``task_attempts``: the drill-down as the Task screen calls it (a block search of the file,
  then the found lines parsed and checked).

Both give the same rows (asserted). Not part of the test suite.

    .venv-test/bin/python tests/benchmarks/bench_drill_down.py [--rows 1000000] [--rounds 3]
        [--run DIR]

``--run`` reuses a run dir written earlier (``bench_report``'s synthetic run).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import write_synthetic_run
from benchlib import load


def line_by_line(path: Path, task_id: str) -> list[tuple[int, str, int]]:
    """(line, task, attempt) of the task's rows, each line tested in Python."""
    from driftdesk.analysis.sources import iter_bounded_lines

    needle = json.dumps(task_id, ensure_ascii=False)[1:-1].encode("utf-8")
    rows = []
    with open(path, "rb") as fh:
        for number, (raw, _, _) in enumerate(iter_bounded_lines(fh), start=1):
            if needle in raw:
                row = json.loads(raw)
                if row["task_id"] == task_id:
                    rows.append((number, row["task_id"], row["attempt"]))
    return rows


def drill_down(run: Path, task_id: str) -> list[tuple[int, str, int]]:
    from driftdesk.analysis.attempts import task_attempts

    return [(r["line"], r["task_id"], r["attempt"]) for r in task_attempts(run, task_id)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--run", type=Path, help="a run dir written earlier")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="driftdesk-bench-drill-") as tmp:
        run = args.run or write_synthetic_run(Path(tmp), args.rows, 50)
        attempts = run / "attempts.jsonl"
        tasks = json.loads((run / "manifest.json").read_text())["tasks"]
        size = attempts.stat().st_size
        print(f"run {run}: {size / 1e6:.0f} MB, {len(tasks):,} tasks ({load()})")
        times: dict[str, dict[str, list[float]]] = {}
        for round_ in range(args.rounds):
            for task_id in (tasks[0], tasks[len(tasks) // 2], tasks[-1]):
                contenders = [
                    ("line by line", lambda t=task_id: line_by_line(attempts, t)),
                    ("task_attempts", lambda t=task_id: drill_down(run, t)),
                ]
                results = []
                for name, call in contenders if round_ % 2 == 0 else contenders[::-1]:
                    start = time.perf_counter()
                    results.append(call())
                    elapsed = time.perf_counter() - start
                    times.setdefault(task_id, {}).setdefault(name, []).append(elapsed)
                assert results[0] == results[1] and results[0], task_id
                print(
                    f"  round {round_ + 1}: {task_id}: "
                    + ", ".join(f"{n} {times[task_id][n][-1]:.3f} s" for n, _ in contenders)
                    + f" ({len(results[0])} rows; {load()})",
                    flush=True,
                )
        print()
        for task_id, by_name in times.items():
            before = statistics.median(by_name["line by line"])
            after = statistics.median(by_name["task_attempts"])
            print(
                f"{task_id}: medians line by line {before:.3f} s, task_attempts {after:.3f} s: "
                f"{before / after:.2f}× faster   [{load()}]"
            )


if __name__ == "__main__":
    main()
