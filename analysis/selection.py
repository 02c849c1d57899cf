"""Which tasks to rerun: ``driftdesk run --only-failed`` / ``--only-volatile`` call this.

- ``failed``: tasks with at least one judged attempt that failed (outcome ``fail``).
- ``volatile``: tasks whose judged attempts disagree (both ``pass`` and ``fail`` seen).

Judged means outcome pass/fail; link and harness errors are not model behaviour and never make
a task "failed" (rerun those with ``--retry-link-errors``). When several rows exist for the same
(task_id, attempt) slot, the last row in file order wins. Over several run dirs the attempts are
pooled per task, so a task that passed in run A and failed in run B is volatile.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

Selection = Literal["failed", "volatile"]


def select_task_ids(run_dirs: list[Path], which: Selection) -> list[str]:
    """Task ids matching ``which`` over ``run_dirs``, in manifest order (then first seen).

    Raises ``FileNotFoundError`` when a run dir has no attempts.jsonl and ``ValueError`` for an
    unknown ``which``. Malformed lines are skipped (the report lists them).
    """
    if which not in ("failed", "volatile"):
        raise ValueError(f"unknown selection {which!r}: use 'failed' or 'volatile'")
    from driftdesk.analysis.report import pooled_task_outcomes

    pooled = pooled_task_outcomes([Path(d) for d in run_dirs])
    if which == "failed":
        return [task for task, (passes, fails) in pooled.items() if fails > 0]
    return [task for task, (passes, fails) in pooled.items() if passes > 0 and fails > 0]
