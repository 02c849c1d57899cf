"""How a run's concurrency ran, for the report: its setting (``4``, ``auto:1-4-64``), the
limit's range, rate-limit episodes, 429s that reached the agent, and every retune (``ctl``,
the workbench) with its time — "auto:1-4-64, 9–11 concurrent, 3 rate-limit episodes, 0
surfaced".

It reads ``control.jsonl`` (every limit change and retune, written as they happen, so a run
killed with ``kill -9`` keeps them) and the manifest's ``concurrency_control`` (the setting,
and the range once the run ended); the 429s from ``calls.jsonl`` (a 429 the proxy absorbed is
not surfaced). A run from before these files existed, or an imported one, has no section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from driftdesk.fileio import iter_jsonl
from driftdesk.rundir import CALLS_FILE, RunManifest
from driftdesk.rundir.control_log import CONTROL_KIND, EPISODE, LIMIT_KIND, control_rows


def _rows(path: Path) -> list[dict[str, Any]]:
    return [row for _, row in iter_jsonl(path, [])] if path.is_file() else []


def read_concurrency(run_dir: Path | None, manifest: dict[str, Any]) -> dict[str, Any] | None:
    """The report's ``concurrency`` section (None: nothing recorded, an imported run)."""
    typed = RunManifest.from_json(manifest)
    if run_dir is None or typed.imported_from is not None:
        return None
    control = typed.concurrency_control or {}
    rows = control_rows(Path(run_dir))
    if not control and not rows:
        return None
    limits = [r for r in rows if r.get("kind") == LIMIT_KIND and isinstance(r.get("limit"), int)]
    rate_limited = surfaced = 0
    for call in _rows(Path(run_dir) / CALLS_FILE):
        if call.get("status") == 429 and not call.get("injected"):
            rate_limited += 1
            surfaced += not call.get("absorbed")
    started_as = str(control.get("started_as") or control.get("setting") or "")
    low, high = control.get("low"), control.get("high")
    if not isinstance(low, int) or not isinstance(high, int):  # killed: from the rows
        seen = [r["limit"] for r in limits] or [manifest.get("concurrency")]
        numbers = [n for n in seen if isinstance(n, int)]
        low, high = (min(numbers), max(numbers)) if numbers else (None, None)
    return {
        "started_as": started_as or str(manifest.get("concurrency") or ""),
        "setting": str(control.get("setting") or started_as),
        "low": low,
        "high": high,
        "episodes": sum(r.get("reason") == EPISODE for r in limits),
        "rate_limited": rate_limited,
        "surfaced": surfaced,
        "retunes": [
            {k: r.get(k) for k in ("at", "change", "by", "setting", "limit", "paused")}
            for r in rows
            if r.get("kind") == CONTROL_KIND
        ],
    }


def worth_showing(summary: dict[str, Any]) -> bool:
    """A fixed run that met no rate limit and was never retuned says nothing new."""
    return bool(
        summary["started_as"].startswith("auto")
        or summary["setting"] != summary["started_as"]
        or summary["rate_limited"]
        or summary["retunes"]
    )


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The text report's lines: how it ran, then one line per retune."""
    low, high = summary["low"], summary["high"]
    span = f"{low}" if low == high else f"{low}–{high}"
    setting = summary["started_as"]
    if summary["setting"] != setting:
        setting += f" (now {summary['setting']})"
    episodes = summary["episodes"]
    lines = [
        f"concurrency: {setting}, {span} concurrent, {episodes} rate-limit "
        f"episode{'' if episodes == 1 else 's'}, {summary['surfaced']} surfaced"
        + (
            f" (of {summary['rate_limited']} 429s; the rest absorbed at the proxy)"
            if summary["rate_limited"] > summary["surfaced"]
            else ""
        )
    ]
    for retune in summary["retunes"]:
        at = str(retune.get("at") or "")
        when = at[11:19] if len(at) >= 19 else at
        lines.append(f"  {when} {retune.get('change')} (by {retune.get('by')})")
    return lines
