"""Benchmark: the workbench's runs list over a folder of many big runs (months of reruns).

Measured side by side in interleaved rounds, in this process:

- ``rescan, every manifest parsed``: ``discover_runs`` with nothing kept (what each rescan
  did before manifests were kept: the runs list is made again every 2 s);
- ``rescan, manifests kept``: ``discover_runs`` again, no manifest changed;
- ``first start, successes measured``: the runs listed from their manifests, then each run's
  success read from its rows (``measure_success``: what every start did before successes were
  kept);
- ``next start, successes kept``: a new process's view (nothing in memory) listing the runs,
  every success from the store on disk;

and the memory a listing holds (tracemalloc).

    .venv-test/bin/python tests/benchmarks/bench_runs_list.py [--runs 200] [--tasks 20000]
        [--measured 5] [--rows 200000] [--rounds 3]

``--runs`` run dirs hold a manifest of ``--tasks`` tasks each; ``--measured`` of them also
hold ``--rows`` attempt rows. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_report import write_synthetic_run
from benchlib import load, private_home


def make_runs(root: Path, runs: int, tasks: int, measured: int, rows: int) -> list[Path]:
    """``runs`` completed run dirs with ``tasks``-task manifests; the first ``measured`` with
    ``rows`` attempt rows (``bench_report``'s synthetic run)."""
    dirs = []
    for index in range(runs):
        if index < measured:
            run = write_synthetic_run(root / f"rows-{index:03d}", rows, rows // tasks)
            target = root / f"run-{index:03d}"
            run.rename(target)
            (root / f"rows-{index:03d}").rmdir()
            manifest = json.loads((target / "manifest.json").read_text())
        else:
            target = root / f"run-{index:03d}"
            target.mkdir()
            manifest = {"tasks": [f"suite/task-{i:06d}" for i in range(tasks)], "repeat": 10}
        manifest.update(
            run_id=target.name, status="completed", model="gpt-4o",
            started_at=f"2026-11-{1 + index % 28:02d}T10:00:00Z",
        )  # fmt: skip
        (target / "manifest.json").write_text(json.dumps(manifest))
        dirs.append(target)
    return dirs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--measured", type=int, default=5)
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    private_home("bench-runs-list-home-")

    from driftdesk.analysis import run_success
    from driftdesk.reruns.run_facts import run_facts
    from driftdesk.rundir import catalog

    facts = run_facts()
    with tempfile.TemporaryDirectory(prefix="bench-runs-list-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        dirs = make_runs(root, args.runs, args.tasks, args.measured, args.rows)
        size = sum((d / "manifest.json").stat().st_size for d in dirs)
        print(
            f"{args.runs} runs, manifests of {args.tasks:,} tasks ({size / 1e6:.0f} MB in all); "
            f"{args.measured} of {args.rows:,} rows; written in "
            f"{time.perf_counter() - started:.0f} s ({load()})",
            flush=True,
        )
        times: dict[str, list[float]] = {}

        def timed(name: str, action: object) -> object:
            start = time.perf_counter()
            result = action()  # type: ignore[operator]
            times.setdefault(name, []).append(time.perf_counter() - start)
            return result

        for number in range(1, args.rounds + 1):
            catalog.MANIFESTS.clear()
            timed("rescan, every manifest parsed", lambda: catalog.discover_runs([root], facts))
            runs = timed("rescan, manifests kept", lambda: catalog.discover_runs([root], facts))
            assert len(runs) == args.runs  # type: ignore[arg-type]
            run_success.store_path().unlink(missing_ok=True)
            run_success.forget_measured()

            def first_start() -> list[catalog.RunInfo]:
                catalog.MANIFESTS.clear()
                listed = catalog.discover_runs([root], facts)
                for run in dirs[: args.measured]:
                    run_success.measure_success(run)
                return listed

            def next_start() -> list[catalog.RunInfo]:
                catalog.MANIFESTS.clear()
                run_success.forget_measured()  # a new process: only the store is known
                return catalog.discover_runs([root], facts)

            timed("first start, successes measured", first_start)
            listed = timed("next start, successes kept", next_start)
            known = sum(r.success is not None for r in listed)  # type: ignore[attr-defined]
            assert known == args.measured, known
            print(f"round {number}: " + ", ".join(
                f"{name} {values[-1] * 1000:.0f} ms" for name, values in times.items()
            ) + f"  [{load()}]", flush=True)  # fmt: skip

        # What a listing holds while it is shown (the manifests without their task lists).
        catalog.MANIFESTS.clear()
        gc.collect()
        tracemalloc.start()
        listing = catalog.discover_runs([root], facts)
        gc.collect()
        held = tracemalloc.get_traced_memory()[0]
        tracemalloc.stop()
        print(f"a listing of {len(listing)} runs holds {held / 1e6:.1f} MB (tracemalloc)")

        median = {name: statistics.median(values) for name, values in times.items()}
        print(f"\nmedians of {args.rounds} rounds [{load()}]:")
        for name, value in median.items():
            print(f"  {name:<34} {value * 1000:9.1f} ms")
        kept, parsed = median["rescan, manifests kept"], median["rescan, every manifest parsed"]
        print(f"rescan with manifests kept: {kept / parsed:.3f}× every manifest parsed")
        first, after = (
            median["first start, successes measured"],
            median["next start, successes kept"],
        )
        print(
            f"runs list with every success, next start: {after / first:.3f}× the first "
            f"(both parse every manifest; the first also measures {args.measured} runs)"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
