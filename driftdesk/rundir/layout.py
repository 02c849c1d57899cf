"""The run-dir layout: one definition for its writer (reruns), its readers (analysis, tui) and
the importer of foreign results, so the places a file is looked for are where it was written."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from driftdesk.rundir.ids import safe_name

MANIFEST_FILE = "manifest.json"
ATTEMPTS_FILE = "attempts.jsonl"
CALLS_FILE = "calls.jsonl"
# A live run's control channel (driftdesk ctl, the workbench's Run screen): requests are files
# in CONTROL_DIR (private to the run's user); what the run did with them, and every change of
# its concurrency, is a row of CONTROL_FILE.
CONTROL_DIR = "control"
CONTROL_FILE = "control.jsonl"
INSPECT_LOG_DIR = "inspect"  # run --agent inspect: inspect_ai's own logs and output
# attempts/<task folder>/<attempt>.log|.transcript.json, and one
# <attempt>.<try id>.result.json per try of the command agent (the row's ``result_path``)
ATTEMPTS_DIR = "attempts"
TRANSCRIPT_SUFFIX = ".transcript.json"  # the builtin agent's conversation (redacted)
# an imported attempt's steps, kept from the foreign file (analysis.trajectory)
TRAJECTORY_SUFFIX = ".trajectory.json"

# Room for the hash suffix and a file name inside a 255-byte name limit, and short paths.
_READABLE_PART = 64


def task_folder_name(task_id: str) -> str:
    """A folder name that is unique per task id: a readable start and a hash of the whole id,
    so ``a/b``, ``a-b`` and ``a b`` never share a folder and any id length fits a file name."""
    digest = hashlib.sha256(task_id.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{safe_name(task_id)[:_READABLE_PART].rstrip('-.')}-{digest}"


def attempt_folder(run_dir: Path, task_id: str) -> Path:
    """The folder holding one task's per-attempt logs, transcripts and result files.

    Run dirs written before the hash suffix (``attempts/<safe name>``) stay readable: when
    only the old folder exists, it is the one returned."""
    attempts = Path(run_dir) / ATTEMPTS_DIR
    folder = attempts / task_folder_name(task_id)
    if not folder.exists():
        legacy = attempts / safe_name(task_id)
        if len(safe_name(task_id).encode()) <= 255 and legacy.is_dir():
            return legacy
    return folder


def result_file(run_dir: Path, row: dict[str, Any]) -> Path | None:
    """The command agent's result file of one attempt row: the path the row records
    (relative to the run dir), or the old single ``<attempt>.result.json``."""
    recorded = row.get("result_path")
    if isinstance(recorded, str) and recorded:
        path = Path(run_dir) / recorded
        return path if path.is_file() else None
    legacy = attempt_folder(run_dir, str(row.get("task_id"))) / f"{row.get('attempt')}.result.json"
    return legacy if legacy.is_file() else None


# Per-attempt files beside ``<attempt>.log`` for tasks that change files (workspace + check)
# and for the client presets (Claude Code, Codex): ``<attempt><suffix>`` in the task's folder.
WORKSPACE_SUFFIX = ".workspace"  # the attempt's own copy of the task's workspace (a folder)
CHECK_OUTPUT_SUFFIX = ".check.txt"  # the check's stdout/stderr and exit status
WORKSPACE_DIFF_SUFFIX = ".diff"  # the final workspace against its start, git diff style, capped
CLIENT_HOME_SUFFIX = ".client-home"  # the fresh config dir a preset client runs with
CLIENT_OUTPUT_SUFFIX = ".client.out"  # the client's own native result (JSON / JSON lines)
RECORDING_SUFFIX = ".calls.jsonl.gz"  # what each provider call said: one gzip member per call


def attempt_file(run_dir: Path, task_id: str, attempt: int, suffix: str) -> Path:
    """One per-attempt file (or folder) of ``task_id``: ``<attempt><suffix>``."""
    return attempt_folder(run_dir, task_id) / f"{attempt}{suffix}"
