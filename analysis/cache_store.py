"""The one store of every cache of derived data: what each cache is, where it lives, what it
keys on, and the mechanics they all share.

A cache declares itself here (``declare``: its name, its layout's version, where it lives,
what its key holds, how many entries are kept), and this module owns, for all of them:

- THE switch (``enabled``): off under ``DRIFTDESK_NO_CACHE=1`` (``driftdesk --no-cache``),
  where every figure is computed from the runs' files and nothing is read or kept;
- the code digest every key starts with (``Declared.version``: ``analysis.code_version`` of
  the cache's name and layout version), so a cache made by other code is never read;
- the one identity of a file read (``file_identity``: device, inode, size, mtime, ctime);
- digest-named entries (``Declared.entry_file``), sealed single-file entries loaded and
  stored crash-safely (``Declared.load``/``store``, on ``analysis.cache_seal``) and pruned to
  the declared limits (``prune``);
- the list ``driftdesk cache`` shows (``declared``).

Every cache is a copy of what the runs' files say: deleting any changes no figure.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from driftdesk.analysis import cache_seal
from driftdesk.analysis.code_version import code_version

OFF_ENV = "DRIFTDESK_NO_CACHE"
STALE_TEMP_S = 3600.0  # a temp file (``.name``) this old is no writer's work in progress

# (dev, ino, size, mtime_ns, ctime_ns) of a file, as JSON keeps it (a list)
FileIdentity = list[int]


def enabled() -> bool:
    """Whether driftdesk may read and keep caches of derived data: not under
    ``DRIFTDESK_NO_CACHE=1`` (``driftdesk --no-cache``)."""
    return os.environ.get(OFF_ENV, "").strip().lower() not in ("1", "true", "yes")


def identity_of(stat: os.stat_result) -> FileIdentity:
    # ctime: no tool puts it back after an edit (``touch -r`` can't)
    return [stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns]


def file_identity(path: Path) -> FileIdentity | None:
    """What says a file is the one read before (None when it is not there). The device and
    inode are the file itself: the path it was reached by is the key's, where it matters."""
    try:
        return identity_of(path.stat())
    except OSError:
        return None


def is_identity(value: Any) -> bool:
    return isinstance(value, list) and len(value) == 5 and all(type(v) is int for v in value)


def same_file(one: FileIdentity, other: FileIdentity) -> bool:
    """Whether two identities are of one file (its device and inode), changed or not."""
    return one[:2] == other[:2]


def size_of(identity: FileIdentity) -> int:
    return identity[2]


def key_line(key: Any) -> bytes:
    """A key as the one line an entry starts with."""
    text = json.dumps(key, sort_keys=True, separators=(",", ":"), default=str)
    return text.encode("utf-8", "surrogatepass")


@dataclass(frozen=True)
class Declared:
    """One cache, as declared by the module that fills it."""

    name: str  # in its code digest and in ``driftdesk cache``
    format: int  # its layout's version (the code digest covers what computes it)
    what: str  # what it holds, as ``driftdesk cache`` lists it
    keys_on: str  # what its key holds besides the code digest
    user_part: str  # where it lives under the user's cache dir (a folder or a file)
    beside_run: str | None = None  # its name beside each run dir, if it is kept there
    keep: int | None = None  # the newest entries kept in its folder (None: no limit)
    keep_bytes: int | None = None  # and at most this much of them
    # A run's own entries (beside it, and its own under the user's cache dir), from its
    # path alone: a run whose manifest or rows are broken still has them found and cleared.
    run_entries: Callable[[Path], list[Path]] | None = None
    # Its entries' key line names the runs they were made of (their resolved paths, as JSON
    # holds them): clearing a run's caches clears these too.
    names_runs: bool = False

    def version(self) -> str:
        """The code digest of this cache: every key holds it."""
        return code_version(f"{self.name}:{self.format}")

    def place(self) -> Path:
        """Where it lives under the user's cache dir (its folder, or its one file)."""
        from driftdesk.paths import cache_dir

        return cache_dir() / self.user_part

    def entry_file(self, selection: Any) -> Path:
        """The entry of a selection (JSON-able: what makes one entry another's; a changed
        input overwrites it), digest-named in the cache's folder."""
        return self.place() / f"{hashlib.sha256(key_line(selection)).hexdigest()[:40]}.json"

    def entry_line(self, key: Any) -> bytes:
        """The line an entry kept under ``key`` starts with: the code digest and the key."""
        return key_line([self.version(), key])

    def load(self, path: Path, key: Any) -> bytes | None:
        """The payload of the entry at ``path`` kept under ``key`` by this code, if whole
        (None: caches off, none, another key, or not the payload sealed)."""
        if not enabled():
            return None
        return cache_seal.read_sealed(path, self.entry_line(key))

    def open(self, path: Path, key: Any) -> IO[bytes] | None:
        """``load`` for a payload too big to hold: the entry open at its payload."""
        if not enabled():
            return None
        return cache_seal.open_sealed(path, self.entry_line(key))

    def store(self, path: Path, key: Any, payload: bytes, *, prune: bool = True) -> bool:
        """Keep ``payload`` at ``path`` under ``key``, sealed (whether it was written: a
        cache that cannot be written is left aside). Checked whole on read, a torn entry is
        no entry: no fsync. Then the folder is pruned to the declared limits."""
        from driftdesk.fileio import atomic_write_bytes

        if not enabled():
            return False
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            data = cache_seal.sealed(self.entry_line(key), payload)
            atomic_write_bytes(path, data, mode=0o600, durable=False)
        except OSError:
            return False
        if prune:
            self.prune(path.parent)
        return True

    def prune(self, folder: Path) -> None:
        prune(folder, self.keep, self.keep_bytes)


def prune(folder: Path, keep: int | None, keep_bytes: int | None = None) -> None:
    """Delete all but the newest ``keep`` entries of ``folder`` (and past ``keep_bytes`` of
    them), and writers' temp files (``.name``) surely abandoned."""
    if keep is None and keep_bytes is None:
        return
    entries = []
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            with contextlib.suppress(OSError):
                if not entry.is_file(follow_symlinks=False):
                    continue
                stat = entry.stat(follow_symlinks=False)
                if entry.name.startswith("."):
                    if now - stat.st_mtime > STALE_TEMP_S:
                        os.unlink(entry.path)
                    continue
                entries.append((stat.st_mtime_ns, stat.st_size, entry.path))
    total = 0
    for index, (_, size, old) in enumerate(sorted(entries, reverse=True)):
        total += size
        if (keep is not None and index >= keep) or (keep_bytes is not None and total > keep_bytes):
            with contextlib.suppress(OSError):
                os.unlink(old)


_DECLARED: dict[str, Declared] = {}

# The modules that declare a cache: ``declared`` imports them so that every cache is listed.
DECLARING_MODULES = (
    "row_cache",
    "report_cache",
    "trend_data",
    "trend_cache",
    "trend_pairs",
    "run_success",
)


def declare(cache: Declared) -> Declared:
    """Declare a cache (once per name: a module imported again declares the same one)."""
    known = _DECLARED.setdefault(cache.name, cache)
    if known != cache:
        raise ValueError(f"cache {cache.name!r} declared twice, differently")
    return cache


def declared() -> list[Declared]:
    """Every cache driftdesk keeps, in the order declared above."""
    import importlib

    for module in DECLARING_MODULES:
        importlib.import_module(f"driftdesk.analysis.{module}")
    return list(_DECLARED.values())
