"""Runs in a bucket read in place: a local view of their reading set, kept by ETag.

``view(url)`` lists the URL once (``store.list_runs``) and keeps, per run, under the user's
cache dir, what every reader of a run dir reads: its manifest and the two growing files as the
run-dir reader reads them (their parts joined in offset order, ``store.join_parts``). Nothing
else of a run is copied (its logs, transcripts, recordings and workspaces stay in the bucket;
``task_ids`` brings one task's attempt files, for ``explain``). The view of a run is rewritten
only when the ETags of its reading set change; a run that grew by parts has only its new parts
fetched and appended, so the file a cache keyed on (``cache_store.file_identity``) grows as a
local run's does. An unchanged history costs one listing: every file identity stays, and every
cache of derived data (rows, reports, trend aggregates) is used as for runs on disk.

Why a view and not DuckDB reading the objects through fsspec (``register_filesystem``, which
works with any DuckDB; its own ``httpfs`` needs an extension downloaded at first use, and a
credential chain of its own): every read of the rows — a report, then a trend, the workbench
every few seconds — would fetch the whole object again (DuckDB keeps no cache of a registered
filesystem, and sends a HEAD per file per query), and the readers that tail a file by byte
offset (the row cache, the live workbench) would each need a second reader of objects.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftdesk.rundir import store
from driftdesk.rundir.layout import ATTEMPTS_DIR, MANIFEST_FILE, task_folder_name

VIEW_STATE = ".remote-view.json"  # in each run's view: its URL and the ETags it was made of
VIEWS_FOLDER = "remote-runs"
ATTEMPTS_TO_LIST = 4  # listings tried while objects change under the read
RELIST_AFTER_S = 0.1  # then 0.3, 0.9 s


def views_root() -> Path:
    from driftdesk.paths import cache_dir

    return cache_dir() / VIEWS_FOLDER


def view_folder(url: str) -> Path:
    readable = store.safe_name_of_url(url)[:60]
    digest = hashlib.sha256(url.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return views_root() / f"{readable}-{digest}"


def is_view(path: Path) -> bool:
    """Whether ``path`` is (in) a view of runs in a bucket: read-only, never resumed."""
    try:
        return Path(path).resolve().is_relative_to(views_root().resolve())
    except OSError:
        return False


def url_of_view(run_dir: Path) -> str | None:
    state = _read_state(Path(run_dir))
    return None if state is None else str(state.get("url"))


def published_live(run_dir: Path) -> bool | None:
    """Whether the run a view stands for was held by its publisher's lock object when last
    listed (None: ``run_dir`` is no view)."""
    state = _read_state(Path(run_dir))
    return None if state is None else bool(state.get("locked"))


def view(url: str, *, task_ids: tuple[str, ...] = ()) -> Path:
    """The local view of ``url`` (a folder of runs, or a run dir when the URL is one run),
    in step with the bucket as one listing sees it (``StoreError`` when it cannot be read)."""
    from driftdesk.filelock import locked

    url = store.normal_url(url)
    fs = store.client(url)  # s3fs made only if an object must be read by range
    root = store.strip_protocol(fs, url)
    folder = view_folder(url)
    last: store.Changed | None = None
    with locked(f"remote-view-{folder.name}"):
        for attempt in range(ATTEMPTS_TO_LIST):
            if attempt:  # a store that lists an object a moment before it serves it
                time.sleep(RELIST_AFTER_S * 3 ** (attempt - 1))
            runs = store.list_runs(fs, root)
            try:
                _sync(fs, url, root, folder, runs, task_ids)
                break
            except store.Changed as changed:
                last = changed  # an object replaced or deleted since the listing: list again
                continue
        else:
            raise store.StoreError(
                f"the objects of {url} kept changing under the read ({last}); try again"
            )
    if not runs:
        _exists_or_fail(fs, root, url)
    single = next((r for r in runs.values() if r.path == root), None)
    return folder / single.run_id if single is not None else folder


def _exists_or_fail(fs: Any, root: str, url: str) -> None:
    bucket = root.split("/", 1)[0]
    try:
        if not fs.exists(bucket):
            raise store.StoreError(f"{url}: no bucket {bucket!r} (or no permission to see it)")
    except PermissionError as exc:
        raise store.StoreError(f"{url}: the store refused access: {exc}") from None


def _read_state(run_view: Path) -> dict[str, Any] | None:
    try:
        state = json.loads((run_view / VIEW_STATE).read_text())
    except (OSError, ValueError):
        return None
    return state if isinstance(state, dict) else None


@dataclass
class _Plan:
    """What one run's view needs from the bucket, fetched with every other run's at once."""

    run: store.StoredRun
    view: Path
    url: str
    manifest: bool
    growing: dict[str, tuple[int, list[tuple[int, store.StoredObject]]]]  # name -> start, parts
    task_files: list[store.StoredObject]
    files: dict[str, str]
    # a task's bundled files: relative path -> (bundle, offset, size), read by ranges
    ranged: dict[str, tuple[store.StoredObject, int, int]]
    # the whole reading set wanted and sealed in one object: it is fetched in their stead
    sealed: store.StoredObject | None = None

    def objects(self) -> list[store.StoredObject]:
        wanted = list(self.task_files)
        if self.sealed is not None:
            return [*wanted, self.sealed]
        if self.manifest and self.run.manifest is not None:
            wanted.append(self.run.manifest)
        for _, parts in self.growing.values():
            wanted.extend(stored for _, stored in parts)
        return wanted


def _sync(
    fs: Any,
    url: str,
    root: str,
    folder: Path,
    runs: dict[str, store.StoredRun],
    task_ids: tuple[str, ...],
) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    plans = []
    for run in runs.values():
        plan = _plan(
            fs,
            run,
            folder / run.run_id,
            url if run.path == root else store.join(url, run.run_id),
            task_ids,
        )
        if plan is not None:
            plans.append(plan)
    # each run's view is written as soon as its objects are there, while others still come
    store.fetch_groups(
        fs, [plan.objects() for plan in plans], lambda i, got: _apply(fs, plans[i], got)
    )
    for child in list(folder.iterdir()):
        if child.name not in runs and (child / VIEW_STATE).is_file():
            shutil.rmtree(child, ignore_errors=True)  # gone from the bucket


def _plan(
    fs: Any, run: store.StoredRun, run_view: Path, run_url: str, task_ids: tuple[str, ...]
) -> _Plan | None:
    """What of ``run`` its view lacks (None: the view is the run as listed)."""
    state = _read_state(run_view) or {}
    files: dict[str, str] = dict(state.get("files") or {})
    wanted = [o for o in _task_files(run, task_ids) if files.get(o.path) != o.etag]
    ranged = {}
    if task_ids:
        prefixes = tuple(f"{ATTEMPTS_DIR}/{task_folder_name(t)}/" for t in task_ids)
        for relative, where in store.bundled_files(fs, run).items():
            if relative.startswith(prefixes) and files.get(relative) != _tag(where):
                ranged[relative] = where
    if (
        state.get("key") == run.key()
        and bool(state.get("locked")) == (run.lock is not None)
        and not wanted
        and not ranged
    ):
        return None
    old_key = state.get("key") or [None, {}]
    assert run.manifest is not None
    manifest = old_key[0] != run.manifest.etag or not (run_view / MANIFEST_FILE).is_file()
    growing = {}
    for name in store.GROWING_FILES:
        parts = run.parts.get(name, [])
        growing[name] = _growth(run_view / name, parts, old_key[1].get(name) or [])
    # read whole: one sealed object in their stead, when one holds them (the only source of a
    # run whose parts were dropped once sealed)
    whole = all(start < 0 for start, _ in growing.values()) and (manifest or not run.parts)
    sealed = run.sealed_reading_set() if whole else None
    return _Plan(run, run_view, run_url, manifest, growing, wanted, files, ranged, sealed)


def _tag(where: tuple[store.StoredObject, int, int]) -> str:
    data, offset, size = where
    return f"{data.etag}:{offset}:{size}"


def _growth(
    target: Path, parts: list[tuple[int, store.StoredObject]], had: list[list[Any]]
) -> tuple[int, list[tuple[int, store.StoredObject]]]:
    """(from which byte, the parts to read): only the new parts when the old ones are all
    still there and the view's file is what they made, else all of them (-1: written again)."""
    now = [[offset, stored.etag] for offset, stored in parts]
    if had and now[: len(had)] == had:
        end = max(o + p.size for o, p in parts[: len(had)])
        with contextlib.suppress(OSError):
            if target.stat().st_size == end:
                return end, store.parts_to_read(parts, end)
    return -1, store.parts_to_read(parts)


def _apply(fs: Any, plan: _Plan, fetched: dict[str, bytes]) -> None:
    from driftdesk.fileio import atomic_write_bytes

    run, run_view = plan.run, plan.view
    run_view.mkdir(parents=True, exist_ok=True)
    unsealed = {} if plan.sealed is None else store.unseal(plan.sealed, fetched[plan.sealed.path])
    if plan.manifest and run.manifest is not None:
        data = unsealed[MANIFEST_FILE] if unsealed else fetched[run.manifest.path]
        atomic_write_bytes(run_view / MANIFEST_FILE, data, mode=0o600, durable=False)
    for name, (start, parts) in plan.growing.items():
        target = run_view / name
        if name in unsealed:  # the file as its parts make it, in the sealed object
            if len(unsealed[name]) or target.exists():
                atomic_write_bytes(target, unsealed[name], mode=0o600, durable=False)
        elif start >= 0:
            tail = store.join_parts(fs, parts, start, fetched)
            if tail:
                with open(target, "ab") as out:  # grown: appended, as a local run grows
                    out.write(tail)
        elif parts or target.exists():
            data = store.join_parts(fs, parts, 0, fetched)
            atomic_write_bytes(target, data, mode=0o600, durable=False)
    for stored in plan.task_files:
        target = run_view / stored.path[len(run.path) + 1 :]
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, fetched[stored.path], mode=0o600, durable=False)
        plan.files[stored.path] = stored.etag
    ranged = list(plan.ranged.items())
    for (relative, where), data in zip(
        ranged, store.read_ranges(fs, [w for _, w in ranged]), strict=True
    ):
        if ".." in Path(relative).parts or Path(relative).is_absolute():
            continue  # never outside the view
        target = run_view / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(target, data, mode=0o600, durable=False)
        plan.files[relative] = _tag(where)
    locked = run.lock is not None
    state = {"url": plan.url, "key": run.key(), "files": plan.files, "locked": locked}
    atomic_write_bytes(run_view / VIEW_STATE, json.dumps(state).encode(), durable=False)


def _task_files(run: store.StoredRun, task_ids: tuple[str, ...]) -> list[store.StoredObject]:
    prefixes = tuple(f"{run.path}/{ATTEMPTS_DIR}/{task_folder_name(t)}/" for t in task_ids)
    return [o for o in run.other if prefixes and o.path.startswith(prefixes)]
