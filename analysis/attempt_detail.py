"""What the drill-down shows of one attempt beyond its row: the check's output, the workspace
diff and the provider calls the metering proxy recorded for it (with the served model when
the proxy recorded one)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.rundir import (
    CALLS_FILE,
    CHECK_OUTPUT_SUFFIX,
    WORKSPACE_DIFF_SUFFIX,
    attempt_file,
)

MAX_SHOWN_LINES = 2000


@dataclass
class AttemptDetail:
    check_output: list[str] | None = None  # None: the task had no check (or it never ran)
    diff: list[str] | None = None  # None: no workspace
    calls: list[dict[str, Any]] = field(default_factory=list)


def _lines(path: Path) -> list[str] | None:
    if not path.exists():
        return None
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if len(lines) > MAX_SHOWN_LINES:
        lines = [*lines[:MAX_SHOWN_LINES], f"… {len(lines) - MAX_SHOWN_LINES} more lines in {path}"]
    return lines


def attempt_calls(run_dir: Path, task_id: str, attempt: int) -> list[dict[str, Any]]:
    """The calls.jsonl rows of one (task, attempt), in file order (bad lines skipped)."""
    path = Path(run_dir) / CALLS_FILE
    if not path.exists():
        return []
    needle = json.dumps(task_id, ensure_ascii=False).encode("utf-8")
    found: list[dict[str, Any]] = []
    with open(path, "rb") as fh:
        for raw in fh:
            if needle not in raw:  # cheap byte test before parsing
                continue
            try:
                row = json.loads(raw)
            except (json.JSONDecodeError, UnicodeDecodeError):
                continue
            if (
                isinstance(row, dict)
                and row.get("task_id") == task_id
                and row.get("attempt") == attempt
            ):
                found.append(row)
    return found


def attempt_detail(run_dir: Path, task_id: str, attempt: int) -> AttemptDetail:
    run_dir = Path(run_dir)
    check_output = _lines(attempt_file(run_dir, task_id, attempt, CHECK_OUTPUT_SUFFIX))
    if check_output is None:  # a Harbor trial: its verifier's output, read in place
        from driftdesk.analysis.harbor_trial_files import verifier_output

        check_output = verifier_output(run_dir, task_id, attempt)
    return AttemptDetail(
        check_output=check_output,
        diff=_lines(attempt_file(run_dir, task_id, attempt, WORKSPACE_DIFF_SUFFIX)),
        calls=attempt_calls(run_dir, task_id, attempt),
    )


def call_line(call: dict[str, Any]) -> str:
    """One proxied call as a line: index, path, status, latency, tokens, served model, error."""
    tokens = "-"
    if call.get("prompt_tokens") is not None or call.get("completion_tokens") is not None:
        tokens = f"{call.get('prompt_tokens') or 0}+{call.get('completion_tokens') or 0}"
    parts = [
        f"#{call.get('call_index')}",
        f"{call.get('method', '')} {call.get('path', '')}".strip(),
        f"status {call.get('status') if call.get('status') is not None else '-'}",
        f"{float(call.get('latency_ms') or 0):.0f} ms",
        f"tokens {tokens}",
    ]
    if call.get("served_model"):
        served = f"served {call['served_model']}"
        if call.get("model_mismatch"):
            served += " (differs from the requested model)"
        parts.append(served)
    if call.get("error_kind"):
        parts.append(f"error {call['error_kind']}")
    return "  ".join(parts)
