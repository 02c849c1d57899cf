"""A run dir as the engine uses it: its attempt rows and which (task, attempt) slots are done,
the lock a live run holds, and why a run stopped. The format itself (names, the manifest, the
writes) is ``driftdesk.rundir``'s.

Several rows can exist for one (task_id, attempt) slot after ``resume --retry-link-errors``:
the **later row in file order wins** (it supersedes the earlier link_error row). Readers that
want one row per slot keep the last one (``driftdesk.rundir.latest_rows``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.fileio import JsonlProblem, iter_jsonl
from driftdesk.rundir import (
    ATTEMPTS_FILE,
    CALLS_FILE,
    MANIFEST_FILE,
    attempt_folder,
    latest_rows,
    slot_of,
)

# Short local names for the shared layout (driftdesk.rundir.layout).
MANIFEST = MANIFEST_FILE
ATTEMPTS = ATTEMPTS_FILE
CALLS = CALLS_FILE


def utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def iso(moment: dt.datetime) -> str:
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def attempt_paths(run_dir: Path, task_id: str, attempt: int) -> tuple[Path, Path]:
    """``(log, transcript)`` paths of one attempt."""
    folder = attempt_folder(run_dir, task_id)
    return folder / f"{attempt}.log", folder / f"{attempt}.transcript.json"


def read_attempt_rows(run_dir: Path, problems: list[JsonlProblem]) -> list[dict[str, Any]]:
    path = Path(run_dir) / ATTEMPTS
    if not path.exists():
        return []
    return [row for _, row in iter_jsonl(path, problems)]


@dataclass(frozen=True)
class CommonError:
    """The most common error message among the latest rows of one outcome."""

    message: str
    count: int  # rows carrying it
    of: int  # rows of that outcome
    log: Path  # the log of the first attempt that carries it


def most_common_error(
    run_dir: Path, outcome: str, rows: list[dict[str, Any]] | None = None
) -> CommonError | None:
    """``rows``: the run's attempt rows, when the caller has read them already."""
    if rows is None:
        rows = read_attempt_rows(run_dir, [])
    rows = [row for row in latest_rows(rows).values() if row.get("outcome") == outcome]
    messages = Counter(_error_text(r) for r in rows)
    if not messages:
        return None
    message, count = messages.most_common(1)[0]
    first = next(r for r in rows if _error_text(r) == message)
    log, _ = attempt_paths(run_dir, str(first["task_id"]), int(first["attempt"]))
    return CommonError(message, count, len(rows), log)


def _error_text(row: dict[str, Any]) -> str:
    return str(row.get("error_message") or row.get("error_code") or "no message")


def pending_slots(
    task_ids: list[str], repeat: int, rows: list[dict[str, Any]], retry_link_errors: bool
) -> list[tuple[str, int]]:
    """Slots with no row (and, if asked, slots whose latest row is a link_error)."""
    latest = latest_rows(rows)
    pending = []
    for attempt in range(repeat):
        for task_id in task_ids:
            row = latest.get((task_id, attempt))
            if row is None or (retry_link_errors and row.get("outcome") == "link_error"):
                pending.append((task_id, attempt))
    return pending


def count_calls(run_dir: Path) -> dict[tuple[str, int], int]:
    """Calls already recorded per slot, so call_index keeps counting up across resumes."""
    path = Path(run_dir) / CALLS
    counts: dict[tuple[str, int], int] = {}
    if not path.exists():
        return counts
    for _, row in iter_jsonl(path, []):
        slot = slot_of(row)
        if slot is None:
            continue
        counts[slot] = counts.get(slot, 0) + 1
    return counts


class RunDirBusy(RuntimeError):
    """Another live process is running (or resuming) this run dir."""


def lock_run_dir(run_dir: Path, wait_s: float = 1.0) -> int:
    """Hold an exclusive lock on ``run_dir`` (released by ``unlock_run_dir`` or by the process
    dying, even by ``kill -9``), so two processes never fill the same slots.

    ``wait_s`` rides out the instant another process only probes the lock (``is_live``); a
    run that really holds it is reported busy once the wait is over.
    """
    fd = os.open(Path(run_dir) / ".lock", os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() >= deadline:
                os.close(fd)
                raise RunDirBusy(
                    f"{run_dir} is being run by another driftdesk process; "
                    "wait for it or stop it first"
                ) from None
            time.sleep(0.02)


def unlock_run_dir(fd: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)


# Why a "running" run dir that no process holds stopped: nobody could write it down.
PROCESS_GONE = (
    "its process ended without recording why (killed, crashed, or its disk too full to write "
    "the manifest)"
)


def interruption_reason(run_dir: Path, manifest: dict[str, Any]) -> str | None:
    """Why the run in ``run_dir`` stopped before its end (None: it completed, or still runs):
    the manifest's ``stop_reason``, or ``PROCESS_GONE`` for a "running" one whose lock nobody
    holds, the state a kill or a manifest that could not be written last leaves."""
    status = manifest.get("status")
    if status == "interrupted":
        reason = manifest.get("stop_reason")
        return str(reason) if reason else "interrupted (Ctrl-C or a signal)"
    if status == "running" and not is_live(run_dir):
        return PROCESS_GONE
    return None


def is_live(run_dir: Path) -> bool:
    """True while some process holds the run dir's lock (a "running" manifest whose process
    died — killed, crashed — reads as not live: it is resumable)."""
    try:
        fd = lock_run_dir(run_dir, wait_s=0.0)
    except RunDirBusy:
        return True
    except OSError:
        return False
    unlock_run_dir(fd)
    return False
