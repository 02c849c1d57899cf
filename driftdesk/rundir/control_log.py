"""``control.jsonl``: how a run's concurrency moved and what was asked of it, as it happened.

The one reader of the file and the names of its row kinds, for the run that writes it
(``reruns/run_control.py``), ``driftdesk ctl``, the workbench following a run and the report.
The file is appended as things happen (it outlives a ``kill -9``); a run from before it existed
has none.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftdesk.fileio import iter_jsonl
from driftdesk.rundir.layout import CONTROL_FILE

# The row kinds: the limit moved; a request applied; an execution started (its setting, limit
# and pause then: a resume's, which may differ from where the run was left).
LIMIT_KIND, CONTROL_KIND, START_KIND = "limit", "control", "start"
EPISODE = "rate-limit episode"  # the controller's reason for a cut


def control_rows(run_dir: Path) -> list[dict[str, Any]]:
    """The rows of ``control.jsonl`` in file order (none for a run from before it existed)."""
    path = Path(run_dir) / CONTROL_FILE
    if not path.is_file():
        return []
    return [row for _, row in iter_jsonl(path, [])]
