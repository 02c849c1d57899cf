"""A run under a folder named like a Hive partition (``k=v``, as a CI checkout or a dated
folder may be): DuckDB guessed a partition column from the path and the cached report's read
of its own files broke ("task_aggs has 39 columns but 40 values") from the second report on."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _run_dir(folder: Path) -> Path:
    run_dir = folder / "r1"
    run_dir.mkdir(parents=True)
    manifest = {"run_id": "r1", "repeat": 2, "tasks": ["a", "b"], "status": "completed",
                "model": "m", "profile": "p", "started_at": "2026-01-01T00:00:00Z"}  # fmt: skip
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    rows = [
        {
            "run_id": "r1",
            "task_id": task,
            "attempt": attempt,
            "outcome": outcome,
            "success": outcome == "pass",
            "score": None,
            "error_code": None,
            "retries": 0,
            "calls": 1,
            "prompt_tokens": 1,
            "completion_tokens": 1,
            "total_tokens": 2,
            "latency_ms": 10.0,
            "started_at": "2026-01-01T00:00:00Z",
            "ended_at": "2026-01-01T00:00:01Z",
            "model": "m",
        }
        for task, outcomes in (("a", ["pass", "fail"]), ("b", ["pass", "pass"]))
        for attempt, outcome in enumerate(outcomes)
    ]
    (run_dir / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return run_dir


def test_a_run_under_a_folder_named_k_equals_v_reports_again_from_its_cache(
    home: object, tmp_path: Path
) -> None:
    run_dir = _run_dir(tmp_path / "branch=main" / "runs")
    outputs = []
    for _ in range(3):  # cold, then from the cache the first one kept
        done = subprocess.run(
            [sys.executable, "-m", "driftdesk", "report", str(run_dir), "--format", "json"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        outputs.append(json.loads(done.stdout))
    assert outputs[0] == outputs[1] == outputs[2]
