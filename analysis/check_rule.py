"""Which rule judged a run's checks, and the tasks whose checks could mostly not judge.

``reruns.workspace.check_outcome`` turns a task's check exit into an outcome; the manifest
names the rule in ``check_rule``. ``exit-v2``: 0 pass, 1–124 fail, 125, 126+, a signal and
the task's ``check_error_codes`` check_error. Runs recorded before have no ``check_rule``:
they were judged by ``exit-v1`` (0 pass, 1 fail, anything else check_error, so a check that
exited 2 on the model's failure took the attempt out of the denominator), and keep their rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftdesk.fileio import iter_jsonl
from driftdesk.rundir import RunManifest

CURRENT_RULE = "exit-v2"  # reruns.workspace.CHECK_RULE (a test holds them equal)
OLD_RULE = "exit-v1"


def check_rule_of(manifest: dict[str, Any] | None) -> tuple[str, bool]:
    """(the rule, whether the manifest recorded it): an old run reads as ``OLD_RULE``. An old
    run resumed since was judged by two rules, named in order: ``exit-v1+exit-v2``."""
    typed = RunManifest.from_json(manifest if isinstance(manifest, dict) else {})
    rule = typed.check_rule
    recorded = rule is not None
    rules: list[str] = [rule if rule is not None else OLD_RULE]
    for resume in typed.resumes:  # the objects among them
        later = resume.get("check_rule")
        if isinstance(later, str) and later and later not in rules:
            rules.append(later)
    return "+".join(rules), recorded


def check_error_warnings(rows_path: Path, rule: str, recorded: bool) -> list[str]:
    """One line per task of the run whose rows are ``rows_path`` where more than half of its
    attempts ended ``check_error`` (the last row of a slot wins), and, for a run judged by the
    old rule, that it was. Read only for a run with a check_error (a report's aggregates may
    come from a cache that holds no rows)."""
    latest: dict[tuple[str, Any], dict[str, Any]] = {}
    for _, row in iter_jsonl(rows_path, []):
        if "task_id" in row and "attempt" in row:
            latest[(str(row["task_id"]), row["attempt"])] = row
    errors: dict[str, int] = {}
    attempts: dict[str, int] = {}
    for (task_id, _), row in latest.items():
        attempts[task_id] = attempts.get(task_id, 0) + 1
        if row.get("outcome") == "harness_error" and row.get("error_code") == "check_error":
            errors[task_id] = errors.get(task_id, 0) + 1
    lines = [
        f"task {task_id}: {count} of {attempts[task_id]} attempts are check_error (the check "
        "could not judge them: they are out of the success denominator)"
        for task_id, count in errors.items()
        if count * 2 > attempts[task_id]
    ]
    if not recorded and errors:
        first, _, later = rule.partition("+")
        then = f" until it was resumed (then {later})" if later else ""
        lines.append(
            f"checks judged by the old rule {first}{then} (recorded before driftdesk named its "
            f"rule): any exit but 0 and 1 was check_error; {CURRENT_RULE} fails exits 1-124"
        )
    return lines
