"""The run-dir layout: one definition for its writer (reruns), its readers (analysis, tui) and
the importer of foreign results, so the places a file is looked for are where it was written."""

from __future__ import annotations

import re
from pathlib import Path

MANIFEST_FILE = "manifest.json"
ATTEMPTS_FILE = "attempts.jsonl"
CALLS_FILE = "calls.jsonl"
INSPECT_LOG_DIR = "inspect"  # run --agent inspect: inspect_ai's own logs and output
ATTEMPTS_DIR = "attempts"  # attempts/<safe task id>/<attempt>.log|.transcript.json|.result.json

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str) -> str:
    """``text`` as a file or folder name: runs of other characters become ``-``."""
    return _UNSAFE.sub("-", text).strip("-.") or "x"


def attempt_folder(run_dir: Path, task_id: str) -> Path:
    """The folder holding one task's per-attempt logs, transcripts and result files."""
    return Path(run_dir) / ATTEMPTS_DIR / safe_name(task_id)


# Per-attempt files beside ``<attempt>.log`` for tasks that change files (workspace + check)
# and for the client presets (Claude Code, Codex): ``<attempt><suffix>`` in the task's folder.
WORKSPACE_SUFFIX = ".workspace"  # the attempt's own copy of the task's workspace (a folder)
CHECK_OUTPUT_SUFFIX = ".check.txt"  # the check's stdout/stderr and exit status
WORKSPACE_DIFF_SUFFIX = ".diff"  # the final workspace against its start, git diff style, capped
CLIENT_HOME_SUFFIX = ".client-home"  # the fresh config dir a preset client runs with
CLIENT_OUTPUT_SUFFIX = ".client.out"  # the client's own native result (JSON / JSON lines)


def attempt_file(run_dir: Path, task_id: str, attempt: int, suffix: str) -> Path:
    """One per-attempt file (or folder) of ``task_id``: ``<attempt><suffix>``."""
    return attempt_folder(run_dir, task_id) / f"{attempt}{suffix}"
