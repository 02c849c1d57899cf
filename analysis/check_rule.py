"""Which rule judged a run's checks, and the tasks whose checks could mostly not judge.

``reruns.workspace.check_outcome`` turns a task's check exit into an outcome; the manifest
names the rule in ``check_rule``. ``exit-v2``: 0 pass, 1–124 fail, 125, 126+, a signal and
the task's ``check_error_codes`` check_error. Runs recorded before have no ``check_rule``:
they were judged by ``exit-v1`` (0 pass, 1 fail, anything else check_error, so a check that
exited 2 on the model's failure took the attempt out of the denominator), and keep their rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

CURRENT_RULE = "exit-v2"  # reruns.workspace.CHECK_RULE (a test holds them equal)
OLD_RULE = "exit-v1"


def check_rule_of(manifest: dict[str, Any] | None) -> tuple[str, bool]:
    """(the rule, whether the manifest recorded it): an old run reads as ``OLD_RULE``."""
    rule = manifest.get("check_rule") if isinstance(manifest, dict) else None
    if isinstance(rule, str) and rule:
        return rule, True
    return OLD_RULE, False


def check_error_warnings(
    con: duckdb.DuckDBPyConnection, f: int, rule: str, recorded: bool
) -> list[str]:
    """One line per task of run ``f`` (rows in ``con``'s ``attempts``) where more than half of
    its attempts ended ``check_error``, and, for a run judged by the old rule, that it was. A
    check_error row is never superseded (resume retries link errors only), so its count over
    the task's distinct attempts is its share."""
    import duckdb

    try:
        found = con.execute(
            "SELECT task_id, count(*) FILTER (WHERE outcome = 'harness_error' "
            "AND error_code = 'check_error'), count(DISTINCT attempt) "
            "FROM attempts WHERE valid AND f = ? GROUP BY task_id ORDER BY min(rowid)",
            [f],
        ).fetchall()
    except duckdb.Error:  # a table of another shape (an import read another way): no lines
        return []
    lines = [
        f"task {task_id}: {errors} of {attempts} attempts are check_error (the check could not "
        "judge them: they are out of the success denominator)"
        for task_id, errors, attempts in found
        if errors * 2 > attempts
    ]
    if not recorded and any(errors for _, errors, _ in found):
        lines.append(
            f"checks judged by the old rule {rule} (recorded before driftdesk named its rule): "
            f"any exit but 0 and 1 was check_error; {CURRENT_RULE} fails exits 1-124"
        )
    return lines
