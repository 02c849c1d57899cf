"""Drill-down: every row of one task in a run, with the paths of its logs and transcripts."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def task_attempts(run_dir: Path | str, task_id: str) -> list[dict[str, Any]]:
    """Rows of ``task_id`` in file order, each with ``line`` (1-based), ``superseded`` (a later
    row exists for the same slot), ``log_path`` and ``transcript_path`` (str, or None when the
    file does not exist)."""
    raise NotImplementedError
