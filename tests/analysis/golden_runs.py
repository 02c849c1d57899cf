"""Two generated run dirs (deterministic, seeded) holding every case the report must get right.

The report and compare JSON of these runs is frozen in ``tests/analysis/golden/`` (written by
the code as it was before the report was optimised; see ``test_analysis_report_golden.py``), so
any change to how the numbers are produced must give the same numbers.

What the runs hold, besides plain pass/fail rows:

- retried slots: a link_error row superseded by a later row of the same slot (a resume with
  ``--retry-link-errors``), once with another model than the winning row's, and a task with
  two rows for attempts past 64 and past 128 (both duplicate-detection halves);
- link errors (429, 500, timeout, insufficient_quota) and harness errors left as they are;
- bad lines: broken JSON, a wrong type, a negative token count, a missing task id, an unknown
  outcome, an attempt out of range, a blank line and a torn (unterminated) last line;
- tasks in the manifest without a row, tasks with missing attempts, tasks run once (no C_out),
  tasks run more often than ``repeat``, tasks without a scenario;
- several models (one without a price), zero and missing latencies and tokens, retries,
  model mismatches and model latency;
- run B: newer, some tasks changed, some only in A or only in B.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from analysis_fixtures import attempt_row

REPEAT = 6
TASKS = 48
MODELS = ("gpt-4o", "gpt-4o-mini", "house-model-7b")  # the last has no price


def _rows(run_id: str, seed: int, shift: float) -> tuple[list[dict[str, Any] | str], list[str]]:
    rng = random.Random(seed)
    task_ids = [f"suite/task-{i:03d}" for i in range(TASKS)]
    difficulty = [min(1.0, max(0.0, rng.random() + shift)) for _ in task_ids]
    rows: list[dict[str, Any] | str] = []
    retried: list[tuple[int, int, str]] = []
    for attempt in range(REPEAT):
        for index, task_id in enumerate(task_ids):
            if index % 11 == 5 and attempt >= 3:
                continue  # missing attempts 3..5
            if index % 17 == 16:
                continue  # in the manifest, never written
            if index % 13 == 7 and attempt > 0:
                continue  # run once only
            model = MODELS[index % 3] if index % 5 else MODELS[0]
            extra: dict[str, Any] = {
                "scenario_id": None if index % 7 == 3 else f"scenario-{index // 4}",
                "model": model,
                "prompt_tokens": rng.randint(0, 3000),
                "completion_tokens": rng.randint(0, 600),
                "latency_ms": round(rng.uniform(0, 9000), 3) if index % 9 else 0.0,
                "retries": rng.choice((0, 0, 0, 1, 2)),
            }
            extra["total_tokens"] = extra["prompt_tokens"] + extra["completion_tokens"]
            if index % 4 == 1:
                extra["model_mismatches"] = rng.choice((0, 1))
                extra["model_latency_ms"] = round(rng.uniform(100, 5000), 3)
            if index % 10 == 9:
                extra["prompt_tokens"] = extra["completion_tokens"] = None
                extra["total_tokens"] = None
            roll = rng.random()
            if roll < 0.08:
                code = rng.choice(("429", "500", "timeout", "insufficient_quota"))
                row = attempt_row(run_id, task_id, attempt, "link_error", error_code=code, **extra)
                if roll < 0.04:
                    retried.append((index, attempt, code))
            elif roll < 0.11:
                code = rng.choice(("harness_crash", "no_result"))
                row = attempt_row(
                    run_id, task_id, attempt, "harness_error", error_code=code, **extra
                )
            else:
                passed = rng.random() < difficulty[index]
                row = attempt_row(run_id, task_id, attempt, "pass" if passed else "fail", **extra)
            rows.append(row)
        if attempt == 2:
            rows.extend(_bad_lines(run_id))
    # resume --retry-link-errors: a later row for each retried slot (it wins)
    for index, attempt, _ in retried:
        passed = rng.random() < difficulty[index]
        model = MODELS[(index + 1) % 3]  # another model than the superseded row's, sometimes
        rows.append(
            attempt_row(
                run_id,
                task_ids[index],
                attempt,
                "pass" if passed else "fail",
                scenario_id=None if index % 7 == 3 else f"scenario-{index // 4}",
                model=model,
                latency_ms=round(rng.uniform(100, 9000), 3),
            )
        )
    # a task run past 64 and 128 attempts, with a repeated slot in each half and past 128
    for attempt in (0, 1, 70, 70, 130, 130, 2):
        rows.append(
            attempt_row(
                run_id,
                "suite/long-task",
                attempt,
                "pass" if rng.random() < 0.5 + shift else "fail",
                scenario_id="scenario-long",
                latency_ms=round(rng.uniform(100, 9000), 3),
            )
        )
    return rows, task_ids


def _bad_lines(run_id: str) -> list[dict[str, Any] | str]:
    good = attempt_row(run_id, "suite/task-010", 0, "pass")
    return [
        '{"run_id": "' + run_id + '", "task_id": "suite/task-001", "attempt": 1, "outc',
        {**good, "attempt": "two"},
        {**good, "prompt_tokens": -5},
        {**good, "task_id": None},
        {**good, "outcome": "maybe"},
        {**good, "attempt": 10**12},
        "   ",
        "[1, 2, 3]",
    ]


def write_golden_runs(root: Path) -> tuple[Path, Path]:
    """Run A (older) and run B (newer) under ``root``; both end with a torn last line."""
    paths = []
    for run_id, seed, shift, started in (
        ("golden-a", 11, 0.0, "2026-11-20T10:00:00Z"),
        ("golden-b", 12, 0.15, "2026-11-21T10:00:00Z"),
    ):
        rows, task_ids = _rows(run_id, seed, shift)
        if run_id == "golden-b":
            dropped = set(task_ids[:2])  # only in A
            task_ids = [*task_ids[2:], "suite/only-in-b"]
            rows = [r for r in rows if isinstance(r, str) or r["task_id"] not in dropped]
            rows.append(attempt_row(run_id, "suite/only-in-b", 0, "pass", scenario_id=None))
        run_dir = root / run_id
        run_dir.mkdir(parents=True)
        manifest = {
            "run_id": run_id,
            "profile": "fixture",
            "protocol": "openai",
            "base_url": "https://api.example.test/v1",
            "model": "gpt-4o",
            "repeat": REPEAT,
            "tasks": [*task_ids, "suite/long-task"],
            "started_at": started,
            "ended_at": started.replace("10:00", "11:00"),
            "status": "completed",
        }
        (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
        lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
        torn = '{"run_id": "' + run_id + '", "task_id": "suite/task-002", "attem'
        (run_dir / "attempts.jsonl").write_text("".join(f"{line}\n" for line in lines) + torn)
        paths.append(run_dir)
    return paths[0], paths[1]
