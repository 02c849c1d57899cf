"""The caches of derived data driftdesk keeps, found and cleared (``driftdesk cache``).

Every one of them is a copy of what the runs' files say, made to be fast the second time:
deleting any of them changes no figure (the next read makes it again). Beside a run:
``.rows-cache/`` (its typed rows and aggregates, ``analysis.row_cache``) and
``.trend-aggregate.json`` (its trend figures, ``analysis.trend_data``). Under the user's cache
dir: the same for read-only runs (``rows/``, ``trend/``), the kept reports (``report/``), the
kept trends and pair verdicts (``trend/``) and the measured successes the workbench lists
(``measured-success.json``).

A run's caches are the ones beside it, its own under the user's cache dir, and the kept
reports and trends that name it (its resolved path in their key): clearing a run's cache makes
every report of it again.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from driftdesk.analysis import row_cache, trend_data
from driftdesk.paths import cache_dir

# What of the user's cache dir is ours to list and clear (nothing else is touched there).
USER_PARTS = (
    ("rows", "typed rows of read-only runs"),
    ("report", "kept reports"),
    ("trend", "kept trends, pair verdicts, trend figures of read-only runs"),
    ("measured-success.json", "the workbench's measured successes"),
)


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
    """The caches under the user's cache dir."""
    root = cache_dir()
    found = (_measured(root / name, what) for name, what in USER_PARTS)
    return [cache for cache in found if cache is not None]


def of_runs(run_dirs: Iterable[Path]) -> list[Cache]:
    """Each run's caches: beside it, its own under the user's cache dir, and the kept reports
    and trends that name it."""
    from driftdesk.analysis.sources import RunSource
    from driftdesk.rundir import ATTEMPTS_FILE

    found: list[Cache | None] = []
    names: list[str] = []
    for run_dir in run_dirs:
        run_dir = Path(run_dir)
        # where its caches are follows from its path alone: a run whose manifest or rows
        # are broken still has them listed and cleared
        source = RunSource(run_dir / ATTEMPTS_FILE, run_dir, {})
        for folder in row_cache.folders(source):
            found.append(_measured(folder, f"typed rows of {run_dir.name}"))
        for path in (run_dir / trend_data.CACHE_FILE, trend_data.user_cache_file(run_dir)):
            found.append(_measured(path, f"trend figures of {run_dir.name}"))
        names.append(str(run_dir.resolve()))
    found.extend(_kept_naming(names))
    return [cache for cache in found if cache is not None]


def _kept_naming(run_paths: Sequence[str]) -> list[Cache | None]:
    """The kept reports and whole trends whose key (their first line) names one of these runs
    (JSON-escaped, as the key holds it). A run whose path is the start of another's also
    takes that one's: a cache cleared too many costs one read."""
    needles = [json.dumps(path)[1:-1].encode() for path in run_paths]
    found: list[Cache | None] = []
    for folder, what in ((cache_dir() / "report", "kept report"),
                         (cache_dir() / "trend" / "whole", "kept trend")):  # fmt: skip
        if not folder.is_dir():
            continue
        for entry in sorted(folder.glob("*.json")):
            with contextlib.suppress(OSError), open(entry, "rb") as fh:
                key = fh.readline()
                if any(needle in key for needle in needles):
                    found.append(_measured(entry, what))
    return found


def in_runs_folder(folder: Path) -> list[Path]:
    """The run dirs right under ``folder`` that hold a cache beside them."""
    if not folder.is_dir():
        return []
    return sorted(
        child
        for child in folder.iterdir()
        if child.is_dir()
        and ((child / row_cache.CACHE_FOLDER).exists() or (child / trend_data.CACHE_FILE).exists())
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
