"""The fixed run dirs the TUI tests read: a module of its own, so a test file can import
``write_run`` whatever other ``conftest`` pytest imported first."""

from __future__ import annotations

import json
from pathlib import Path

from driftdesk.rundir import attempt_folder

# task -> outcomes of attempts 0..n-1 ("pass", "fail", "link_error:429", ...)
RUN_A: dict[str, list[str]] = {
    "arith-01": ["pass", "pass", "pass", "pass"],
    "arith-02": ["pass", "fail", "pass", "fail"],
    "lookup-01": ["fail", "fail", "fail", "fail"],
    "format-01": ["pass", "link_error:429", "pass", "fail"],
    "travel-2_1": ["pass", "pass", "pass", "pass"],
}
RUN_B: dict[str, list[str]] = {
    "arith-01": ["pass", "pass", "pass", "pass"],
    "arith-02": ["pass", "pass", "pass", "pass"],
    "lookup-01": ["fail", "pass", "fail", "fail"],
    "format-01": ["pass", "pass", "pass", "pass"],
    "travel-2_1": ["pass", "fail", "pass", "pass"],
}


def write_run(runs_dir: Path, run_id: str, outcomes: dict[str, list[str]], day: int = 1) -> Path:
    """A completed run dir as the engine writes it (manifest, attempts.jsonl, transcripts)."""
    run_dir = runs_dir / run_id
    (run_dir / "attempts").mkdir(parents=True)
    tasks = list(outcomes)
    repeat = max(len(v) for v in outcomes.values())
    started = f"2026-01-0{day}T10:00:00Z"
    manifest = {
        "run_id": run_id,
        "profile": "sandbox",
        "protocol": "openai",
        "base_url": "http://127.0.0.1:1/v1",
        "model": "sandbox-sim",
        "suite": {"path": None, "name": "basic", "sha256": "0" * 64},
        "repeat": repeat,
        "concurrency": 2,
        "timeout_seconds": 30,
        "agent": "builtin",
        "command": None,
        "seed": 0,
        "tasks": tasks,
        "driftdesk_version": "0.1.0",
        "started_at": started,
        "ended_at": f"2026-01-0{day}T10:05:00Z",
        "status": "completed",
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest, indent=2))
    lines = []
    for t_index, task in enumerate(tasks):
        for attempt, spec in enumerate(outcomes[task]):
            outcome, _, code = spec.partition(":")
            judged = outcome in ("pass", "fail")
            tokens = None if not judged else 100 + 10 * t_index + attempt
            row = {
                "run_id": run_id,
                "task_id": task,
                "scenario_id": None,
                "attempt": attempt,
                "outcome": outcome,
                "success": (outcome == "pass") if judged else None,
                "score": (1.0 if outcome == "pass" else 0.0) if judged else None,
                "error_code": code or None,
                "error_message": f"HTTP {code} from the provider" if code else None,
                "retries": 1 if code else 0,
                "calls": 1,
                "prompt_tokens": None if tokens is None else tokens - 20,
                "completion_tokens": None if tokens is None else 20,
                "total_tokens": tokens,
                "latency_ms": 200.0 + 15 * t_index + 3 * attempt,
                "started_at": f"2026-01-0{day}T10:0{attempt}:00Z",
                "ended_at": f"2026-01-0{day}T10:0{attempt}:01Z",
                "model": "sandbox-sim",
                "base_url": "http://127.0.0.1:1/v1",
            }
            lines.append(json.dumps(row))
            folder = attempt_folder(run_dir, task)
            folder.mkdir(exist_ok=True)
            transcript = [
                {"role": "user", "content": f"Solve task {task}."},
                {"role": "assistant", "content": f"Answer for {task}, attempt {attempt}."},
            ]
            (folder / f"{attempt}.transcript.json").write_text(json.dumps(transcript))
    (run_dir / "attempts.jsonl").write_text("\n".join(lines) + "\n")
    return run_dir
