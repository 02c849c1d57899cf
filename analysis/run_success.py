"""A run's success (passed / judged attempts, the last row of each slot) as last measured.

Listing runs must not read their rows: a run of a million rows takes about 2 s to read. A
face lists runs from their manifests and measures each run's success in the background, once,
and again only when its rows changed (``success_to_measure``). What was measured is kept on
disk too (``store_path()``), under the code digest of the figures (``analysis.cache_store``:
other code measures again) and keyed by the identity of the file the rows were read from
(``cache_store.file_identity``: an edit that keeps the size and puts the mtime back still
changes the ctime), so the next start lists every unchanged run's success at once instead of reading every run
again.

The store is a cache (nothing in it is anything but a copy of what the rows say): a store, or
an entry, that does not parse is left out, and the store is replaced at the next measurement.
Several processes share it (two workbenches open at once): a save merges with the store on
disk under a lock, the newer measurement of a run winning.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.analysis import cache_store
from driftdesk.analysis.cache_store import FileIdentity, identity_of
from driftdesk.rundir import ATTEMPTS_FILE

CACHE = cache_store.declare(
    cache_store.Declared(
        name="success",
        format=3,  # 3: under the code digest, the rows by the store's file identity
        what="the workbench's measured successes",
        keys_on="each run's resolved path and the identity of its rows file",
        user_part="measured-success.json",
    )
)
STORE_FILE = CACHE.user_part
# A run being written is measured again no sooner than this many times its last measurement
# took: a runs list's share of the CPU stays small however big the run.
REMEASURE_AFTER_COSTS = 10

# the identity of the file a run's rows are read from
RowsKey = FileIdentity


@dataclass(frozen=True)
class Measured:
    rows_key: RowsKey | None
    success: float | None
    at: float  # time.monotonic() when it was measured (0 for one read from the store)
    cost: float  # seconds it took (0 for one read from the store: due as soon as rows change)
    when: float = 0.0  # time.time() when it was measured: of two processes', the newer is kept


_lock = threading.Lock()  # measurements land from worker threads
_measured: dict[Path, Measured] = {}  # resolved run dir -> its last measurement
_loaded_from: Path | None = None  # the store read into ``_measured``
_gone: set[str] = set()  # runs in the store that were deleted (left out of every save)


def store_path() -> Path:
    return CACHE.place()


def rows_key(run_dir: Path, manifest: dict[str, Any] | None = None) -> RowsKey | None:
    """The identity (``RowsKey``) of the file a run's rows are read from (``zero_copy.rows_path``: its
    attempts file, or a zero-copy import's source), ``manifest`` read if not given; None when
    there is none."""
    from driftdesk.analysis.sources import RunSource, manifest_or_empty
    from driftdesk.analysis.zero_copy import rows_path

    try:
        if manifest is None:
            manifest = manifest_or_empty(run_dir)
        stat = rows_path(RunSource(run_dir / ATTEMPTS_FILE, run_dir, manifest)).stat()
    except (OSError, ValueError):  # SourceError is a ValueError: gone, changed, unreadable
        return None
    return identity_of(stat)


def known_success(run_dir: Path) -> float | None:
    """The success last measured for ``run_dir`` (in this process or an earlier one)."""
    measured = last_measured(run_dir)
    return None if measured is None else measured.success


def last_measured(run_dir: Path) -> Measured | None:
    with _lock:
        _load_store()
        return _measured.get(run_dir.resolve())


def success_to_measure(
    runs: Iterable[tuple[Path, dict[str, Any] | None]], now: float
) -> list[Path]:
    """Of ``runs`` ((run dir, its manifest)), those whose success is not known, or whose rows
    changed since it was measured and whose measurement is due again (``now``:
    ``time.monotonic()``; see ``REMEASURE_AFTER_COSTS``)."""
    due = []
    for run_dir, manifest in runs:
        last = last_measured(run_dir)
        changed = last is None or last.rows_key != rows_key(run_dir, manifest)
        if changed and (last is None or now - last.at >= REMEASURE_AFTER_COSTS * last.cost):
            due.append(run_dir)
    return due


def measure_success(run_dir: Path) -> None:
    """Measure a run's success: passed / judged over the latest row per slot, read by the
    report's reader (a zero-copy import's through its source); unknown when the rows cannot
    be read."""
    from driftdesk.analysis.report import pooled_task_outcomes

    started = time.monotonic()
    key = rows_key(run_dir)
    success = None
    if key is not None:
        try:
            counts = list(pooled_task_outcomes([run_dir]).values())
        except (OSError, ValueError):  # SourceError is a ValueError: gone, changed, unreadable
            counts = []
        success = pooled_success((passes, passes + fails) for passes, fails in counts)
    remember_success(run_dir, key, success, started)


def pooled_success(tasks: Iterable[tuple[int, int]]) -> float | None:
    """Passes over judged attempts of the whole run, from each task's (passes, judged);
    unknown without a judged attempt."""
    passes = judged = 0
    for task_passes, task_judged in tasks:
        passes, judged = passes + task_passes, judged + task_judged
    return passes / judged if judged else None


def remember_success(
    run_dir: Path, key: RowsKey | None, success: float | None, started: float
) -> None:
    """Keep ``success`` as ``run_dir``'s, read from its rows as they were at ``key`` by a
    measurement that began at ``started`` (``time.monotonic()``), here and in the store."""
    remember_successes([(run_dir, key, success)], started)


def remember_successes(
    measured: Iterable[tuple[Path, RowsKey | None, float | None]], started: float
) -> None:
    """``remember_success`` for several runs measured together (``driftdesk trend`` reads a
    history's rows and keeps what it learnt for the runs list), with one save of the store."""
    now = time.monotonic()
    entries = list(measured)
    cost = (now - started) / max(1, len(entries))
    with _lock:
        _load_store()
        for run_dir, key, success in entries:
            _measured[run_dir.resolve()] = Measured(key, success, now, cost, time.time())
        _save_store()


def forget_measured() -> None:
    """Forget what this process measured or read from the store (the store stays): the
    state of a process that has just started."""
    global _loaded_from
    with _lock:
        _measured.clear()
        _gone.clear()
        _loaded_from = None


def _load_store() -> None:
    """Read the store into ``_measured`` once (again if the store's path changed), keeping
    what this process measured over what the store says."""
    global _loaded_from
    path = store_path()
    if _loaded_from == path:
        return
    _loaded_from = path
    for run_dir, measured in _read_store(path).items():
        if Path(run_dir).is_dir():
            _measured.setdefault(Path(run_dir), measured)
        else:  # a run deleted since is not kept
            _gone.add(run_dir)


def _read_store(path: Path) -> dict[str, Measured]:
    """The store's entries that parse, by run dir (none when the store does not parse, or
    caches are off: ``--no-cache``, or it was kept by other code)."""
    if not cache_store.enabled():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        entries = data["runs"] if data.get("version") == CACHE.version() else {}
        items = list(entries.items())
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return {}  # none yet, or not ours to trust: measured again, replaced at the next save
    measured = {}
    for run_dir, entry in items:
        try:
            key, success, when = entry["rows"], entry["success"], entry.get("measured_at", 0.0)
        except (TypeError, KeyError, AttributeError):
            continue  # that run is measured again
        if not cache_store.is_identity(key) or not (
            (success is None or type(success) in (int, float)) and type(when) in (int, float)
        ):
            continue  # of the wrong types: measured again
        success = None if success is None else float(success)
        measured[str(run_dir)] = Measured(key, success, 0.0, 0.0, float(when))
    return measured


def _save_store() -> None:
    """Merge the measurements of runs with rows into the store (under a hundred bytes a run):
    under a lock, what another process saved since this one read the store is kept, and of
    two measurements of one run the newer. Runs deleted since are dropped when the store is
    read."""
    from driftdesk.fileio import atomic_write_json
    from driftdesk.filelock import locked

    if not cache_store.enabled():
        return
    path = store_path()
    # a read-only home: successes are measured again at the next start
    with contextlib.suppress(OSError), locked(STORE_FILE):
        runs = {run: m for run, m in _read_store(path).items() if run not in _gone}
        for run_dir, measured in _measured.items():
            theirs = runs.get(str(run_dir))
            if measured.rows_key is not None and (theirs is None or measured.when >= theirs.when):
                runs[str(run_dir)] = measured
        atomic_write_json(
            path,
            {
                "version": CACHE.version(),
                "runs": {
                    run: {
                        "rows": m.rows_key,
                        "success": m.success,
                        "measured_at": m.when,
                    }
                    for run, m in runs.items()
                    if m.rows_key is not None
                },
            },
        )
