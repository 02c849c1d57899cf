"""Hand-built run dirs in the attempts.jsonl schema of docs/ARCHITECTURE.md.

``write_handmade_run`` writes the run whose every number the tests compute by hand; the
arithmetic is spelled out next to each assertion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from driftdesk.analysis.run_report import RunReport

FIELDS = (
    "run_id",
    "task_id",
    "scenario_id",
    "attempt",
    "outcome",
    "success",
    "score",
    "error_code",
    "error_message",
    "retries",
    "calls",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "latency_ms",
    "started_at",
    "ended_at",
    "model",
    "base_url",
)

# Newer optional row fields (docs/ARCHITECTURE.md): absent in older rows.
OPTIONAL_FIELDS = (
    "model_mismatches",
    "model_latency_ms",
    "client_prompt_tokens",
    "client_completion_tokens",
)


def attempt_row(run_id: str, task_id: str, attempt: int, outcome: str, **extra: Any) -> dict:
    """A complete row with every schema field (defaults for the ones not given)."""
    judged = outcome in ("pass", "fail")
    row: dict[str, Any] = {
        "run_id": run_id,
        "task_id": task_id,
        "scenario_id": None,
        "attempt": attempt,
        "outcome": outcome,
        "success": (outcome == "pass") if judged else None,
        "score": None,
        "error_code": None,
        "error_message": None,
        "retries": 0,
        "calls": 1,
        "prompt_tokens": 100,
        "completion_tokens": 20,
        "total_tokens": 120,
        "latency_ms": 1000.0,
        "started_at": "2026-11-29T10:00:00.000Z",
        "ended_at": "2026-11-29T10:00:01.000Z",
        "model": "gpt-4o",
        "base_url": "https://api.example.test/v1",
    }
    row.update(extra)
    assert set(FIELDS) <= set(row) <= set(FIELDS) | set(OPTIONAL_FIELDS)
    return row


def write_run(
    root: Path,
    run_id: str,
    rows: list[dict[str, Any] | str],
    *,
    tasks: list[str] | None = None,
    repeat: int | None = None,
    status: str = "completed",
    model: str = "gpt-4o",
) -> Path:
    """A run dir: manifest.json plus attempts.jsonl; a str row is written verbatim."""
    run_dir = root / run_id
    run_dir.mkdir(parents=True)
    manifest: dict[str, Any] = {
        "run_id": run_id,
        "profile": "fixture",
        "protocol": "openai",
        "base_url": "https://api.example.test/v1",
        "model": model,
        "suite": {"path": "suite.jsonl", "name": "fixture", "sha256": "0" * 64},
        "repeat": repeat,
        "concurrency": 2,
        "timeout_seconds": 60,
        "agent": "builtin",
        "command": None,
        "seed": 1,
        "tasks": tasks,
        "driftdesk_version": "0.1.0",
        "started_at": "2026-11-29T10:00:00Z",
        "ended_at": "2026-11-29T11:00:00Z",
        "status": status,
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    lines = [r if isinstance(r, str) else json.dumps(r) for r in rows]
    (run_dir / "attempts.jsonl").write_text("".join(line + "\n" for line in lines))
    return run_dir


def handmade_rows(run_id: str = "handmade") -> list[dict[str, Any]]:
    """Five tasks × repeat 4, in the order a run would finish them.

    t1 (s1): pass pass pass pass                       n=4 c=4
    t2 (s1): pass fail pass fail, latency 100..400 ms  n=4 c=2
    t3 (s2): fail fail fail fail                       n=4 c=0
    t4 (s3): #0 link_error 429 (50 prompt tokens), later retried -> pass (row at the end);
             #1 fail; #2 link_error timeout (no tokens); #3 pass
                                                        judged n=3 c=2, 1 link error left
    t5 (s3): #0 pass; #1..#3 never written              n=1 c=1, 3 missing slots
    """
    r = run_id
    rows = [
        attempt_row(r, "t1", 0, "pass", scenario_id="s1"),
        attempt_row(r, "t2", 0, "pass", scenario_id="s1", latency_ms=100.0),
        attempt_row(r, "t3", 0, "fail", scenario_id="s2"),
        attempt_row(
            r,
            "t4",
            0,
            "link_error",
            scenario_id="s3",
            error_code="429",
            prompt_tokens=50,
            completion_tokens=0,
            total_tokens=50,
        ),
        attempt_row(r, "t5", 0, "pass", scenario_id="s3"),
        attempt_row(r, "t1", 1, "pass", scenario_id="s1"),
        attempt_row(r, "t2", 1, "fail", scenario_id="s1", latency_ms=200.0),
        attempt_row(r, "t3", 1, "fail", scenario_id="s2"),
        attempt_row(r, "t4", 1, "fail", scenario_id="s3"),
        attempt_row(r, "t1", 2, "pass", scenario_id="s1"),
        attempt_row(r, "t2", 2, "pass", scenario_id="s1", latency_ms=300.0),
        attempt_row(r, "t3", 2, "fail", scenario_id="s2"),
        attempt_row(
            r,
            "t4",
            2,
            "link_error",
            scenario_id="s3",
            error_code="timeout",
            prompt_tokens=None,
            completion_tokens=None,
            total_tokens=None,
        ),
        attempt_row(r, "t1", 3, "pass", scenario_id="s1"),
        attempt_row(r, "t2", 3, "fail", scenario_id="s1", latency_ms=400.0),
        attempt_row(r, "t3", 3, "fail", scenario_id="s2"),
        attempt_row(r, "t4", 3, "pass", scenario_id="s3"),
        # resume --retry-link-errors: a new row for the 429 slot; it wins (last in file order)
        attempt_row(r, "t4", 0, "pass", scenario_id="s3"),
    ]
    return rows


def write_handmade_run(root: Path, run_id: str = "handmade") -> Path:
    return write_run(
        root, run_id, list(handmade_rows(run_id)), tasks=["t1", "t2", "t3", "t4", "t5"], repeat=4
    )


def report_of(run_dir: Path, **options: object) -> RunReport:
    """The report of the one run at ``run_dir`` (``options``: ``build_report``'s)."""
    from driftdesk.analysis.report import build_report

    (report,) = build_report([run_dir], **options)  # type: ignore[arg-type]
    return report


def rows_of(run_dir: Path) -> list[dict]:
    """The run's attempts.jsonl rows, in file order."""
    return [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
