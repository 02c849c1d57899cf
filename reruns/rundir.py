"""Run directories: naming, manifest.json, and which (task, attempt) slots are done.

Several rows can exist for one (task_id, attempt) slot after ``resume --retry-link-errors``:
the **later row in file order wins** (it supersedes the earlier link_error row). Readers that
want one row per slot keep the last one (``driftdesk.rundir.latest_rows``).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import errno
import fcntl
import itertools
import os
import shutil
import stat
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TextIO

from driftdesk.fileio import JsonlProblem, atomic_write_json, iter_jsonl
from driftdesk.rundir import (
    ATTEMPTS_FILE,
    CALLS_FILE,
    MANIFEST_FILE,
    attempt_folder,
    candidate_run_ids,
    latest_rows,
    read_manifest,  # noqa: F401  (run_start reads it as rundir.read_manifest; to go: issue 47)
    run_id_base,
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


def create_run_dir(out_dir: Path, profile: str, model: str, now: dt.datetime) -> tuple[str, Path]:
    """Make a new, empty run dir; never reuses an existing one (suffix -2, -3...)."""
    base = run_id_base(profile, model, now)
    out_dir.mkdir(parents=True, exist_ok=True)
    for run_id in itertools.islice(candidate_run_ids(base), 9_999):
        path = out_dir / run_id
        try:
            path.mkdir()
        except FileExistsError:
            continue
        return run_id, path
    raise RuntimeError(f"could not find a free run dir name under {out_dir}")


def missing_folders(path: Path) -> list[Path]:
    """The folders of ``path`` (itself included) that do not exist yet, deepest first: what
    ``create_run_dir`` is about to make for a run that may yet be refused."""
    missing = []
    for folder in (Path(path), *Path(path).parents):
        if folder.exists() or folder.is_symlink():
            break
        missing.append(folder)
    return missing


def discard_unstarted_run_dir(run_dir: Path | None, made: list[Path]) -> None:
    """A run refused before its manifest was written leaves nothing behind: its run dir (only
    our lock and reserve are in it; no harness has run) and the folders ``made`` for it that
    are still empty. A run dir with a manifest is a run, and is kept."""
    if run_dir is not None:
        if (Path(run_dir) / MANIFEST).exists():
            return
        shutil.rmtree(run_dir, ignore_errors=True)
    for folder in made:
        try:
            folder.rmdir()  # only while empty: another run may have started there meanwhile
        except OSError:
            break


# Never through what a harness may have planted where our file goes: a symlink (O_NOFOLLOW),
# a FIFO that would block the open (O_NONBLOCK: no reader is ENXIO), a hard link (checked).
_PRIVATE_FLAGS = os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_PLANTED_ERRNOS = (errno.ELOOP, errno.ENXIO, errno.EISDIR)


def _open_own_file(path: Path, append: bool) -> int:
    """An fd on ``path`` that is our own regular file (made 0600): anything else found there
    (a symlink, FIFO, socket, hard link, folder) is removed, never written through."""
    flags = _PRIVATE_FLAGS | os.O_CREAT | (os.O_APPEND if append else 0)
    for _ in range(8):  # a harness still running may plant again between unlink and open
        try:
            fd = os.open(path, flags, 0o600)
        except OSError as exc:
            if exc.errno not in _PLANTED_ERRNOS:
                raise
            _remove_planted(path)
            flags |= os.O_EXCL  # create it ourselves: O_EXCL never follows a symlink either
            continue
        info = os.fstat(fd)
        if stat.S_ISREG(info.st_mode) and info.st_nlink == 1:
            os.set_blocking(fd, True)
            return fd
        os.close(fd)  # a hard link to someone else's file, or no regular file: not ours
        _remove_planted(path)
        flags |= os.O_EXCL
    raise OSError(errno.EEXIST, f"{path}: something keeps being planted here; not written")


def _remove_planted(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()


def open_private(path: Path, mode: Literal["a", "w"] = "a") -> TextIO:
    """Open an attempt's log or transcript for writing ("a" or "w"), readable by its owner
    only (0600, like the JSONL files): harness output may quote things we did not write. The
    attempt's folder is the harness's to write: a symlink, hard link or FIFO it put at
    ``path`` is replaced, never written through (``_open_own_file``)."""
    fd = _open_own_file(Path(path), append=mode == "a")
    try:
        os.fchmod(fd, 0o600)  # a file left by an older version keeps no wider mode
        if mode == "w":
            os.ftruncate(fd, 0)  # only now: truncating at open would hit a hard link's target
        return os.fdopen(fd, mode, encoding="utf-8")
    except BaseException:
        os.close(fd)
        raise


def attempt_paths(run_dir: Path, task_id: str, attempt: int) -> tuple[Path, Path]:
    """``(log, transcript)`` paths of one attempt."""
    folder = attempt_folder(run_dir, task_id)
    return folder / f"{attempt}.log", folder / f"{attempt}.transcript.json"


def write_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    atomic_write_json(run_dir / MANIFEST, manifest)


# Space a running run holds back for its last manifest: a disk filled by the run (its rows,
# logs, the harness's files) would otherwise leave the manifest saying "running", no reason.
MANIFEST_RESERVE = ".manifest-reserve"
MANIFEST_RESERVE_BYTES = 64 * 1024


def reserve_manifest_space(run_dir: Path) -> None:
    """Hold ``MANIFEST_RESERVE_BYTES`` in the run dir (real blocks, not a sparse file) until
    ``write_final_manifest``. Raises ``OSError`` when the disk cannot spare them: a run that
    could not record how it ended is not started."""
    path = Path(run_dir) / MANIFEST_RESERVE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            data = b"\0" * MANIFEST_RESERVE_BYTES
            if os.write(fd, data) != len(data):  # a short write: the disk is full
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        release_manifest_space(run_dir)
        raise


def release_manifest_space(run_dir: Path) -> bool:
    """Free the reserve; whether there was one."""
    try:
        (Path(run_dir) / MANIFEST_RESERVE).unlink()
    except FileNotFoundError:
        return False
    except OSError:
        return False
    return True


def write_final_manifest(run_dir: Path, manifest: dict[str, Any]) -> None:
    """The run's last manifest; when the disk is full, written into the space reserved for it
    (``reserve_manifest_space``). The reserve is released either way."""
    try:
        write_manifest(run_dir, manifest)
    except OSError:
        if not release_manifest_space(run_dir):
            raise
        write_manifest(run_dir, manifest)
    else:
        release_manifest_space(run_dir)


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


def most_common_error(run_dir: Path, outcome: str) -> CommonError | None:
    rows = [
        row
        for row in latest_rows(read_attempt_rows(run_dir, [])).values()
        if row.get("outcome") == outcome
    ]
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


def drop_torn_tail(path: Path) -> int:
    """Cut a torn last line (no trailing newline: a writer was killed mid-row) off ``path``.

    Returns the number of bytes dropped (0 if the file ends cleanly or does not exist).
    """
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return 0
    if size == 0:
        return 0
    with open(path, "rb+") as fh:
        data = fh.read()
        if data.endswith(b"\n"):
            return 0
        keep = data.rfind(b"\n") + 1
        fh.truncate(keep)
        fh.flush()
        os.fsync(fh.fileno())
    return size - keep


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
