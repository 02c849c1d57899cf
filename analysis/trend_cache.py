"""The whole computed trend, kept in the user's cache: a trend over a history where no run
changed is printed as it was, without reading a run (``driftdesk trend`` answers in a blink).

An entry is keyed by the trend's **identity**: the code digest (``analysis.cache_store``: the
sources the figures and flags come from), the options (suite, profile, last, allowed pp, the
run judged last), and per run dir its resolved path and the identity (``cache_store``'s: device,
inode, size, mtime and ctime) of every file its aggregate is read from
(``trend_data.source_keys``), not of other caches' files. Any of them differs, and the trend is computed again (each unchanged run
by its kept aggregate, each unchanged pair by its kept verdict) and kept anew.

An entry holds its key line, the seal of the rest (size and sha256, ``analysis.cache_seal``),
the JSON ``trend --json`` prints (printed as it is) and the trend's full state (for the text
table, ``check --trend`` and the Trend view): one cut short, edited or replaced is no entry,
and the trend is computed again. It is derived: deleting it changes
no figure. The newest ``CACHE.keep`` entries are kept (one per selection of runs and options).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from driftdesk.analysis.cache_store import Declared, declare
from driftdesk.analysis.trend_data import source_keys

CACHE = declare(
    Declared(
        name="trend",
        format=3,  # 3: keyed by the code digest, the options and the runs' files alone
        what="kept trends",
        keys_on="the options; each run's resolved path and the identity of its files",
        user_part="trend/whole",
        names_runs=True,
        keep=8,  # each is about 20 bytes per task × run
    )
)


def identity(
    run_dirs: Sequence[Path],
    resolved: Sequence[Path],
    manifests: Sequence[dict[str, Any]],
    options: dict[str, Any],
) -> list[Any]:
    """A trend's identity: the options, each run's resolved path and the identity of every
    file its figures are read from (``trend_data.source_keys``)."""
    runs = zip(run_dirs, resolved, manifests, strict=True)
    return [options, [[str(d), *source_keys(r, m)] for r, d, m in runs]]


def entry_file(resolved: Sequence[Path], options: dict[str, Any]) -> Path:
    """One entry per selection (the same runs, by resolved path, and options): a changed run
    overwrites it."""
    return CACHE.entry_file([options, [str(d) for d in resolved]])


def load(path: Path, key: list[Any]) -> tuple[str, bytes] | None:
    """(the JSON text, the state's JSON) of the entry at ``path`` if kept under ``key`` and
    whole (its seal)."""
    payload = CACHE.load(path, key)
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
    payload = b"\n".join(
        (
            text.encode("utf-8", "surrogatepass"),
            json.dumps(state, ensure_ascii=False, separators=(",", ":")).encode(
                "utf-8", "surrogatepass"
            ),
        )
    )
    CACHE.store(path, key, payload)
