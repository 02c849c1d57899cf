"""The slot rule: a slot is one (task_id, attempt) of a run, and the last row in file order wins.

Several rows can exist for one slot after ``resume --retry-link-errors``: the later row
supersedes the earlier link_error row. Readers that want one row per slot keep the last one
(``latest_rows``); a row without a usable task id and attempt number belongs to no slot.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Slot = tuple[str, int]


def slot_of(row: dict[str, Any]) -> Slot | None:
    """The (task_id, attempt) slot ``row`` fills, or None for a row that names none."""
    try:
        return (str(row["task_id"]), int(row["attempt"]))
    except (KeyError, TypeError, ValueError):
        return None


def latest_rows(rows: Iterable[dict[str, Any]]) -> dict[Slot, dict[str, Any]]:
    """One row per (task_id, attempt): the last in file order wins."""
    latest: dict[Slot, dict[str, Any]] = {}
    for row in rows:
        slot = slot_of(row)
        if slot is not None:
            latest[slot] = row
    return latest
