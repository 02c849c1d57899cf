"""Reading call recordings in tests (the readers proper live in analysis/)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

from reruns_helpers import read_rows

from driftdesk.reruns import rundir
from driftdesk.rundir import RECORDING_SUFFIX, attempt_file


def read_records(path: Path) -> tuple[list[dict[str, Any]], bool]:
    """Every whole record of a recording, read line by line through gzip, and whether its
    tail is torn (a writer killed mid-record)."""
    records: list[dict[str, Any]] = []
    try:
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            for line in fh:
                if not line.endswith("\n"):
                    return records, True
                records.append(json.loads(line))
    except (EOFError, gzip.BadGzipFile):
        return records, True
    return records, False


def full_item_lists(records: list[dict[str, Any]]) -> list[list[Any]]:
    """Each record's whole conversation: full(n) = full(n-1)[:base] + items."""
    lists: list[list[Any]] = []
    previous: list[Any] = []
    for record in records:
        request = record["request"]
        previous = previous[: request["base"]] + request["items"]
        lists.append(previous)
    return lists


def recording_of(run_dir: Path, task_id: str, attempt: int) -> Path:
    return attempt_file(run_dir, task_id, attempt, RECORDING_SUFFIX)


def joined_to_calls(
    run_dir: Path, records: list[dict[str, Any]], task_id: str, attempt: int
) -> None:
    """The records are the slot's calls.jsonl rows, one for one, by call_index and request_id."""
    rows = [
        r
        for r in read_rows(run_dir / rundir.CALLS)
        if (r["task_id"], r["attempt"]) == (task_id, attempt)
    ]
    assert rows and len(rows) == len(records)
    assert [(r["call_index"], r["request_id"]) for r in rows] == [
        (r["call_index"], r["request_id"]) for r in records
    ]
