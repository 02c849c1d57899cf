"""How a run treated link faults (``run --link-faults absorb|retry``), for the report, compare
and trend.

Under ``absorb`` the proxy held a 429/5xx/connection error/timeout before the answer's first
byte and sent the call again (``reruns/link_absorb.py``); each attempt row counts what it
absorbed (``absorbed_faults``) and the waits (``absorbed_wait_s``, inside its wall time, not
in the model's latency). What still reached the agent surfaced as today: a ``link_error``
attempt. The section says both: "absorb: 37 link faults absorbed in 21 attempts (waited
41.2 s), 0 surfaced". A run that recorded no mode (older than absorbing) retried.

R_fault (``compare --baseline``) and link-error rates mean another thing under absorbing: a
fault the proxy absorbed never reached the agent. ``mode_warning`` says so when two runs
differ in mode.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from driftdesk.fileio import iter_jsonl
from driftdesk.rundir import ATTEMPTS_FILE, RunManifest, latest_rows

DEFAULT_MODE = "retry"  # what a run that recorded no mode did


def link_faults_mode(manifest: dict[str, Any]) -> str | None:
    """The run's mode; None for an imported run (no proxy of ours saw its calls)."""
    typed = RunManifest.from_json(manifest)
    if typed.imported_from is not None:
        return None
    return typed.link_faults or DEFAULT_MODE


def link_faults_summary(mode: str, rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The report's ``link_faults``: the mode, what was absorbed (the last row per slot
    counts, as everywhere) and what surfaced (link errors)."""
    absorbed = attempts_absorbing = surfaced = 0
    waited = 0.0
    for row in latest_rows(rows).values():
        count = row.get("absorbed_faults")
        if isinstance(count, int) and not isinstance(count, bool) and count > 0:
            absorbed += count
            attempts_absorbing += 1
            wait = row.get("absorbed_wait_s")
            waited += float(wait) if isinstance(wait, int | float) else 0.0
        if row.get("outcome") == "link_error":
            surfaced += 1
    return {
        "mode": mode,
        "absorbed": absorbed,
        "attempts_with_absorbed": attempts_absorbing,
        "absorbed_wait_s": round(waited, 3),
        "surfaced": surfaced,
    }


def read_link_faults(run_dir: Path | None, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The summary of a run dir (None: an imported run, or no run dir)."""
    mode = link_faults_mode(manifest)
    if mode is None or run_dir is None:
        return None
    path = Path(run_dir) / ATTEMPTS_FILE
    rows = [row for _, row in iter_jsonl(path, [])] if path.is_file() else []
    return link_faults_summary(mode, rows)


def summary_line(summary: dict[str, Any]) -> str:
    """One line for the text report."""
    if summary["mode"] != "absorb":
        return f"link faults: {summary['mode']} (each one reached the agent; its try was rerun)"
    return (
        f"link faults: absorb: {summary['absorbed']} absorbed at the proxy in "
        f"{summary['attempts_with_absorbed']} attempts (waited {summary['absorbed_wait_s']:.1f} s"
        f" in all), {summary['surfaced']} surfaced as link errors"
    )


def mode_warning(mode_a: str | None, mode_b: str | None) -> str | None:
    """Why two runs' link errors and R_fault cannot be read alike, or None."""
    if mode_a is None or mode_b is None or mode_a == mode_b:
        return None
    return (
        f"the runs treat link faults differently (A: {mode_a}, B: {mode_b}): under absorb the "
        "proxy resends a faulted call and the agent never sees the fault, so link errors, "
        "retries and R_fault are not comparable"
    )


def run_link_faults_mode(run_dir: Path | str | None) -> str | None:
    """The mode a run dir's manifest records (None: none readable, or an imported run)."""
    from driftdesk.analysis.sources import SourceError, manifest_or_empty

    if run_dir is None:
        return None
    try:
        manifest = manifest_or_empty(Path(run_dir))
    except SourceError:
        return None
    return link_faults_mode(manifest) if manifest else None
