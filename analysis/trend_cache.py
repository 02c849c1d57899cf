"""The whole computed trend, kept in the user's cache: a trend over a history where no run
changed is printed as it was, without reading a run (``driftdesk trend`` answers in a blink).

An entry is keyed by the trend's **identity**: the code version (the sources the figures and
flags come from), the options (suite, profile, last, allowed pp, the run judged last), and per
run dir its resolved path and the identity (path, device, inode, size, mtime and ctime, as the
row cache keys its source) of every file its aggregate is read from
(``trend_data.source_keys``) and of its aggregate's own cache entries (a rewritten entry is a
changed input). Any of them differs, and the trend is computed again (each unchanged run
by its kept aggregate, each unchanged pair by its kept verdict) and kept anew.

An entry holds its key line, the seal of the rest (size and sha256, ``analysis.cache_seal``),
the JSON ``trend --json`` prints (printed as it is) and the trend's full state (for the text
table, ``check --trend`` and the Trend view): one cut short, edited or replaced is no entry,
and the trend is computed again. It is derived: deleting it changes
no figure. The newest ``KEEP`` entries are kept (one per selection of runs and options).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from driftdesk.analysis import cache_seal
from driftdesk.analysis.code_version import code_version as shared_code_version
from driftdesk.analysis.trend_data import CACHE_FILE, file_key, source_keys, user_cache_file
from driftdesk.paths import caches_enabled

CACHE_VERSION = 2  # 2: sealed, keyed by the files' full identity
KEEP = 8  # entries kept: each is about 20 bytes per task × run


def code_version() -> str:
    """The code version of a trend entry (``analysis.code_version``)."""
    return shared_code_version(f"trend:{CACHE_VERSION}")


def run_identity(run_dir: Path, resolved: Path, manifest: dict[str, Any], root: Path) -> list[Any]:
    """What a run contributes to a trend's identity (see the module); ``resolved``: the run
    dir's resolved path; ``root``: the user's cache dir."""
    return [
        str(resolved),
        *source_keys(run_dir, manifest),
        file_key(run_dir / CACHE_FILE),
        file_key(user_cache_file(run_dir, resolved=resolved, root=root)),
    ]


def sources_of(identity: list[Any]) -> list[Any]:
    """An identity without its runs' aggregate entries (the last two of each
    ``run_identity``): what a trend is read from, which must not change while it is made."""
    return [identity[:2], [run[:-2] for run in identity[2]]]


def identity(
    run_dirs: Sequence[Path],
    resolved: Sequence[Path],
    manifests: Sequence[dict[str, Any]],
    options: dict[str, Any],
) -> list[Any]:
    """A trend's identity: the code, the options, each run's identity."""
    from driftdesk.paths import cache_dir

    root = cache_dir()
    runs = zip(run_dirs, resolved, manifests, strict=True)
    return [code_version(), options, [run_identity(*run, root) for run in runs]]


def entry_file(resolved: Sequence[Path], options: dict[str, Any]) -> Path:
    """One entry per selection (the same runs, by resolved path, and options): a changed run
    overwrites it."""
    from driftdesk.paths import cache_dir

    selection = [options, [str(d) for d in resolved]]
    text = json.dumps(selection, sort_keys=True, separators=(",", ":"))
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    return cache_dir() / "trend" / "whole" / f"{digest[:40]}.json"


def _key_line(key: list[Any]) -> bytes:
    return json.dumps(key, sort_keys=True, separators=(",", ":")).encode("utf-8", "surrogatepass")


def load(path: Path, key: list[Any]) -> tuple[str, bytes] | None:
    """(the JSON text, the state's JSON) of the entry at ``path`` if kept under ``key`` and
    whole (its seal)."""
    if not caches_enabled():
        return None
    payload = cache_seal.read_sealed(path, _key_line(key))
    if payload is None:
        return None  # none, or not ours to trust: computed again
    try:
        text, state = payload.split(b"\n", 1)
        return text.decode("utf-8"), state
    except ValueError:
        return None


def store(path: Path, key: list[Any], text: str, state: dict[str, Any]) -> None:
    """Keep an entry (its lines: key, JSON text, state); a cache that cannot be written is
    left aside. The oldest entries past ``KEEP`` go."""
    from driftdesk.fileio import atomic_write_bytes

    if not caches_enabled():
        return
    payload = b"\n".join(
        (
            text.encode("utf-8", "surrogatepass"),
            json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "surrogatepass"
            ),
        )
    )
    body = cache_seal.sealed(_key_line(key), payload)
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        # sealed and checked whole on read: a torn entry is no entry, so no fsync
        atomic_write_bytes(path, body, mode=0o600, durable=False)
        _prune(path.parent)


def _prune(folder: Path) -> None:
    entries = []
    for entry in folder.glob("*.json"):
        with contextlib.suppress(OSError):
            entries.append((entry.stat().st_mtime_ns, entry))
    for _, old in sorted(entries, reverse=True)[KEEP:]:
        with contextlib.suppress(OSError):
            old.unlink()
