"""What a run's page holds beyond its report JSON: who made the run, every attempt's row in
short, and for volatile tasks ``analysis.explain``'s explanation with one pass beside one fail.

Everything leaves through a ``Scrubber``. Only the two trajectories of the pair shown are kept
per volatile task: a big run's other recordings stay in its run dir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftdesk.analysis.page.scrub import Scrubber, safe_url
from driftdesk.fileio import JsonlProblem, iter_jsonl
from driftdesk.rundir import ATTEMPTS_FILE, latest_rows, read_manifest

MAX_ERROR_CHARS = 300  # an attempt's error message, as a table cell
# Attempt columns, in the order each attempt's list holds them (the script reads this order).
ATTEMPT_FIELDS = (
    "attempt",
    "outcome",
    "error_code",
    "retries",
    "calls",
    "injected_faults",
    "latency_ms",
    "total_tokens",
    "error_message",
)


def manifest_of(run_dir: str | None) -> dict[str, Any]:
    if not run_dir:
        return {}
    try:
        return read_manifest(Path(run_dir))
    except (OSError, ValueError):  # an attempts file given alone, or a manifest gone bad
        return {}


def bodies_recorded(manifest: dict[str, Any]) -> bool:
    """False for a run made with ``--no-bodies``: its page holds no content either."""
    recording = manifest.get("recording")
    return not (isinstance(recording, dict) and recording.get("bodies") is False)


def run_identity(
    report: dict[str, Any], manifest: dict[str, Any], scrub: Scrubber
) -> dict[str, Any]:
    """Who made the run, against what, when: the profile's name (never its key), the base URL
    without credentials or query, the model asked for and the ones that answered."""
    from driftdesk.analysis.trend_data import aggregates

    served: dict[str, int] = {}
    run_dir = report.get("run_dir")
    if run_dir and manifest:
        try:
            served = aggregates([Path(run_dir)])[0].served_models
        except (OSError, ValueError):
            served = {}
    suite = manifest.get("suite") if isinstance(manifest.get("suite"), dict) else {}
    recording = manifest.get("recording") if isinstance(manifest.get("recording"), dict) else {}
    injection = manifest.get("injection") if isinstance(manifest.get("injection"), dict) else {}
    identity = {
        "run_id": report.get("run_id"),
        "profile": manifest.get("profile"),
        "protocol": manifest.get("protocol"),
        "base_url": safe_url(_text(manifest.get("base_url"))),
        "model_requested": manifest.get("model") or report.get("model"),
        "models_served": served,
        "agent": report.get("agent"),
        "driftdesk_version": manifest.get("driftdesk_version"),
        "suite": suite.get("name") if suite else None,
        "repeat": report.get("repeat"),
        "started_at": report.get("started_at"),
        "ended_at": manifest.get("ended_at"),
        "status": report.get("status"),
        "inject": injection.get("spec") if injection else None,
        "bodies_recorded": recording.get("bodies") if recording else None,
        "imported_from": _imported_format(manifest),
    }
    return scrub.value(identity)


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _imported_format(manifest: dict[str, Any]) -> str | None:
    imported = manifest.get("imported_from")
    if not isinstance(imported, dict):
        return None
    fmt = imported.get("format")
    return fmt if isinstance(fmt, str) else "a results file"


def attempt_rows(
    run_dir: str | None,
    manifest: dict[str, Any],
    scrub: Scrubber,
    listed: set[str] | None = None,
) -> dict[str, list[list[Any]]]:
    """task id -> its attempts (the winning row of each slot, by attempt), each a list in
    ``ATTEMPT_FIELDS`` order; ``listed``: only these tasks. The run's own ``attempts.jsonl``
    is read once; a zero-copy import's rows are read where they live, task by task."""
    if not run_dir:
        return {}
    from driftdesk.analysis import zero_copy

    rows: list[dict[str, Any]]
    if zero_copy.linked_source(manifest) is not None:
        rows = _linked_rows(Path(run_dir), manifest)
    else:
        path = Path(run_dir) / ATTEMPTS_FILE
        if not path.exists():
            return {}
        problems: list[JsonlProblem] = []  # the report names bad lines; the page skips them
        rows = [row for _, row in iter_jsonl(path, problems)]
    by_task: dict[str, list[list[Any]]] = {}
    for (task_id, _), row in sorted(latest_rows(rows).items()):
        if listed is not None and task_id not in listed:
            continue  # a task ``--top`` left out of the table
        by_task.setdefault(scrub.text(task_id), []).append(_attempt_cells(row, scrub))
    return by_task


def _linked_rows(run_dir: Path, manifest: dict[str, Any]) -> list[dict[str, Any]]:
    from driftdesk.analysis.attempts import task_attempts

    tasks = manifest.get("tasks") if isinstance(manifest.get("tasks"), list) else []
    rows: list[dict[str, Any]] = []
    for task_id in tasks or []:
        rows.extend(r for r in task_attempts(run_dir, str(task_id)) if not r["superseded"])
    return rows


def _attempt_cells(row: dict[str, Any], scrub: Scrubber) -> list[Any]:
    message = row.get("error_message")
    if isinstance(message, str) and not scrub.drop_content:
        message = scrub.text(message)
        if len(message) > MAX_ERROR_CHARS:
            message = message[: MAX_ERROR_CHARS - 1] + "…"
    else:
        message = None
    cells = []
    for name in ATTEMPT_FIELDS:
        value = message if name == "error_message" else row.get(name)
        if isinstance(value, bool) or not isinstance(value, int | float | str | type(None)):
            value = None
        cells.append(scrub.text(value) if isinstance(value, str) else value)
    return cells
