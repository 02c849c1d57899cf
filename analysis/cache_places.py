"""The caches of derived data driftdesk keeps, found and cleared (``driftdesk cache``).

Every one of them is a copy of what the runs' files say, made to be fast the second time:
deleting any of them changes no figure (the next read makes it again). What they are is what
is declared in ``analysis.cache_store`` (``cache_store.declared``): each cache's place under
the user's cache dir, a run's own entries (beside it, or its own under the user's cache dir
for a read-only run), and whether its entries' keys name the runs they were made of.

A run's caches are its own entries and the kept entries whose key names it (its resolved
path): clearing a run's cache makes every report and trend of it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from driftdesk.analysis import cache_store


@dataclass
class Cache:
    """One cache on disk: a file or a folder of them."""

    path: Path
    what: str
    files: int
    size: int  # bytes

    def to_json(self) -> dict[str, object]:
        return {"path": str(self.path), "what": self.what, "files": self.files, "bytes": self.size}


def _measured(path: Path, what: str) -> Cache | None:
    """``path`` as a cache (its files and bytes), or None when it is not there."""
    if path.is_symlink() or path.is_file():
        with contextlib.suppress(OSError):
            return Cache(path, what, 1, path.lstat().st_size)
        return None
    if not path.is_dir():
        return None
    files = size = 0
    for folder, _, names in os.walk(path):
        for name in names:
            with contextlib.suppress(OSError):
                size += (Path(folder) / name).lstat().st_size
                files += 1
    return Cache(path, what, files, size)


def of_user() -> list[Cache]:
    """The caches under the user's cache dir, one per declared cache."""
    found = (_measured(c.place(), c.what) for c in cache_store.declared())
    return [cache for cache in found if cache is not None]


def of_runs(run_dirs: Iterable[Path]) -> list[Cache]:
    """Each run's caches: its own entries of each declared cache, and the kept entries whose
    key names it."""
    declared = cache_store.declared()
    found: list[Cache | None] = []
    names: list[str] = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        for cache in declared:
            for path in cache.run_entries(run_dir) if cache.run_entries else []:
                found.append(_measured(path, f"{cache.what} of {run_dir.name}"))
        names.append(str(run_dir.resolve()))
    found.extend(_kept_naming([c for c in declared if c.names_runs], names))
    return [cache for cache in found if cache is not None]


def _kept_naming(
    caches: Sequence[cache_store.Declared], run_paths: Sequence[str]
) -> list[Cache | None]:
    """The entries of ``caches`` whose key (their first line) names one of these runs
    (JSON-escaped, as the key holds it). A run whose path is the start of another's also
    takes that one's: a cache cleared too many costs one read."""
    needles = [json.dumps(path)[1:-1].encode() for path in run_paths]
    found: list[Cache | None] = []
    for cache in caches:
        folder = cache.place()
        if not folder.is_dir():
            continue
        for entry in sorted(folder.glob("*.json")):
            with contextlib.suppress(OSError), open(entry, "rb") as fh:
                key = fh.readline()
                if any(needle in key for needle in needles):
                    found.append(_measured(entry, cache.what))
    return found


def in_runs_folder(folder: Path) -> list[Path]:
    """The run dirs right under ``folder`` that hold a cache beside them."""
    if not folder.is_dir():
        return []
    beside = [c.beside_run for c in cache_store.declared() if c.beside_run]
    return sorted(
        child
        for child in folder.iterdir()
        if child.is_dir() and any((child / name).exists() for name in beside)
    )


@dataclass
class Cleared:
    caches: int = 0
    files: int = 0
    size: int = 0
    failed: list[tuple[Path, str]] = field(default_factory=list)  # (path, why)


def clear(caches: Iterable[Cache]) -> Cleared:
    """Delete ``caches`` (a cache gone meanwhile is skipped; one that cannot be deleted is
    named in ``failed`` and the others are deleted still)."""
    done = Cleared()
    for cache in caches:
        try:
            if cache.path.is_dir() and not cache.path.is_symlink():
                shutil.rmtree(cache.path)
            else:
                cache.path.unlink()
        except FileNotFoundError:
            continue
        except OSError as exc:
            done.failed.append((cache.path, exc.strerror or type(exc).__name__))
            continue
        done.caches += 1
        done.files += cache.files
        done.size += cache.size
    return done


def without_nested(caches: Sequence[Cache]) -> list[Cache]:
    """``caches`` less those inside another of them (a kept report inside ``report/``)."""
    folders = [c.path for c in caches if c.path.is_dir() and not c.path.is_symlink()]
    return [c for c in caches if not any(f in c.path.parents for f in folders)]
