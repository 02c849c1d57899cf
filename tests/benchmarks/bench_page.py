"""Benchmark: the shareable page (``report --format html``): its size, the time to make it, and
the time it takes to open in headless Chromium (targets: the built-in suite × 5 ≤ 5 MB with its
headline shown ≤ 1 s after navigation starts; 2,000 tasks × 10 ≤ 50 MB and usable).

Two runs:

- ``suite × 5``: the basic suite, 5 attempts a task, made by the real engine (the builtin agent
  against the simulated endpoint through the metering proxy, with ``--inject`` faults);
- ``2000 × 10``: 2,000 tasks of 10 attempts, each attempt recorded as the proxy records it
  (``tests/analysis/recording_fixtures``): three tool calls and an answer, a third of the
  tasks volatile.

For each, measured side by side in interleaved rounds as child processes (interpreter start
included): ``report --format json`` (the floor: the same report, no page) and ``report
--format html --out``; the ratio is the page's cost over the JSON's. Then the page is opened
``--opens`` times in a fresh Chromium context, and the page's own performance marks are read:
``driftdesk-headline`` (the headline figures parsed and shown) and ``driftdesk-ready`` (the task
table drawn); and, on the big page, the time one click on a column sorts 2,000 tasks and draws
the first page. Not part of the test suite.

    .venv-test/bin/python tests/benchmarks/bench_page.py [--rounds 3] [--opens 5] [--tasks 2000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "analysis"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "page"))
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchlib import drop_caches, interleave, load, private_home, table, timed_child, verdict
from page_helpers import CHROMIUM, CHROMIUM_FLAGS
from recording_fixtures import attempt_row, write_slot

from tests.sandbox_runs import faulted_basic_run

SMALL_MB, SMALL_OPEN_MS = 5.0, 1000.0
BIG_MB = 50.0


def big_run(run: Path, tasks: int, attempts: int) -> Path:
    """``tasks`` × ``attempts`` recorded slots; every third task volatile."""
    import json

    run.mkdir(parents=True)
    ids = [f"task-{i:05d}" for i in range(tasks)]
    (run / "manifest.json").write_text(
        json.dumps({"run_id": run.name, "status": "completed", "tasks": ids, "repeat": attempts})
    )
    for i, task_id in enumerate(ids):
        for attempt in range(attempts):
            passes = attempt % 3 != 0 if i % 3 == 0 else i % 3 == 1
            script = [
                (
                    "call",
                    "lookup",
                    {"id": f"{task_id}-{turn}"},
                    json.dumps({"status": "ok", "n": turn}),
                )
                for turn in range(3)
            ]
            script.append(("answer", "Done: all found." if passes else "Not found."))
            write_slot(
                run, task_id, attempt, script, outcome="pass" if passes else "fail", row=False
            )
            row = attempt_row(task_id, attempt, "pass" if passes else "fail", calls=4)
            with open(run / "attempts.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
    return run


def open_times(page_path: Path, opens: int, sort: bool) -> dict[str, list[float]]:
    from playwright.sync_api import sync_playwright

    marks: dict[str, list[float]] = {"headline": [], "ready": [], "sort": []}
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        for _ in range(opens):
            context = browser.new_context()
            page = context.new_page()
            page.goto(page_path.as_uri())
            page.wait_for_selector("body[data-ready]", timeout=120_000)
            for name in ("headline", "ready"):
                marks[name].append(
                    page.evaluate(f"performance.getEntriesByName('driftdesk-{name}')[0].startTime")
                )
            if sort:
                marks["sort"].append(
                    page.evaluate(
                        "() => { const t = performance.now();"
                        " document.querySelector('button[data-sort=success]').click();"
                        " return performance.now() - t; }"
                    )
                )
            context.close()
        browser.close()
    return marks


def measure(
    label: str, run: Path, rounds: int, opens: int, mb_target: float, open_target: float | None
) -> bool:
    cli = [sys.executable, "-m", "driftdesk"]
    page = Path(tempfile.mkdtemp(prefix="bench-page-out-")) / "page.html"
    env = dict(os.environ)

    def cold(*args: str):  # type: ignore[no-untyped-def]
        def go():  # type: ignore[no-untyped-def]
            drop_caches(run)
            return timed_child([*cli, "report", str(run), *args], env=env)

        return go

    print(f"\n== {label}: {run.name}  ({load()})")
    contenders = interleave(
        {
            "report --format json": cold("--format", "json"),
            "report --format html": cold("--format", "html", "--out", str(page)),
        },
        rounds,
    )
    table(contenders)
    json_s, html_s = (c.wall for c in contenders.values())
    print(f"page over json: {html_s / json_s:.2f}× ({html_s:.2f} s vs {json_s:.2f} s, cold)")
    size_mb = page.stat().st_size / 1e6
    ok = verdict(f"{label}: page size", size_mb, mb_target, " MB")
    marks = open_times(page, opens, sort=True)
    for name, values in marks.items():
        if values:
            print(
                f"  {name:>8}: median {statistics.median(values):7.1f} ms  ({' '.join(f'{v:.0f}' for v in values)})"
            )
    if open_target is not None:
        ok &= verdict(
            f"{label}: headline shown after navigation start",
            statistics.median(marks["headline"]),
            open_target,
            " ms",
        )
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--attempts", type=int, default=10)
    args = parser.parse_args()
    if not Path(CHROMIUM).exists():
        print(f"needs Chromium at {CHROMIUM} (./run tests installs Debian's)")
        return 1
    home = private_home("bench-page-")
    small = faulted_basic_run(
        home / "runs", server_seed=3, api_key="sk-bench-page-0123456789abcdef"
    )
    ok = measure("suite × 5", small, args.rounds, args.opens, SMALL_MB, SMALL_OPEN_MS)
    big = big_run(home / "big" / f"big-{args.tasks}x{args.attempts}", args.tasks, args.attempts)
    ok &= measure(f"{args.tasks} × {args.attempts}", big, args.rounds, args.opens, BIG_MB, None)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
