"""``driftdesk ctl RUN``: retune a live run (its concurrency, a number or ``auto``), pause
starting new attempts, unpause; with no change, say how it runs now.

The channel and its refusals are reruns/run_control.py's: only the run's own user, never from
inside one of its harnesses, never a finished, unknown or foreign run (one line each).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from driftdesk.cli.errors import EXIT_BAD_INPUT, EXIT_FAILED
from driftdesk.terminal import printable


def register(sub: argparse._SubParsersAction) -> None:
    from driftdesk.cli.runs import concurrency_argument

    p = sub.add_parser(
        "ctl",
        help="retune a live run: --concurrency N|auto, --pause, --unpause",
        description="Change a running run from another terminal (or CI): its concurrency "
        "(attempts at once and model calls in flight; auto gives it back to the controller), "
        "or pause starting new attempts (attempts in flight finish) and unpause. Every change "
        "is recorded with its time (control.jsonl) and shown in the run's report. Only the "
        "user who started the run can control it. With no change: how it runs now.",
    )
    p.add_argument("run", help="the run dir (or a run id in the runs folder)")
    p.add_argument(
        "--concurrency",
        type=concurrency_argument,
        metavar="N|auto[:MIN-START-MAX]",
        help="set the limit (a number), or give it back to the controller (auto)",
    )
    pause = p.add_mutually_exclusive_group()
    pause.add_argument("--pause", action="store_true", help="start no new attempts")
    pause.add_argument("--unpause", action="store_true", help="start new attempts again")
    p.set_defaults(func=cmd_ctl)


def resolve_run(text: str) -> Path:
    """A run dir as given, else a run id in the runs folder (``$DRIFTDESK_RUNS_DIR``)."""
    path = Path(text)
    if path.exists() or "/" in text:
        return path
    from driftdesk.paths import runs_dir

    candidate = runs_dir() / text
    return candidate if candidate.exists() else path


def cmd_ctl(args: argparse.Namespace) -> int:
    from driftdesk.reruns.run_control import (
        ControlRefused,
        ControlRequest,
        refusal,
        send_request,
    )
    from driftdesk.rundir.control_log import control_rows

    run_dir = resolve_run(args.run)
    pause = True if args.pause else False if args.unpause else None
    if args.concurrency is None and pause is None:
        why = refusal(run_dir)
        if why is not None:
            print(printable(f"driftdesk ctl: {why}"), file=sys.stderr)
            return EXIT_BAD_INPUT
        print(printable(describe_state(run_dir, control_rows(run_dir))))
        return 0
    try:
        row = send_request(run_dir, ControlRequest(args.concurrency, pause, by="ctl"))
    except ControlRefused as exc:
        print(printable(f"driftdesk ctl: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT if "did not take" not in str(exc) else EXIT_FAILED
    paused = ", new attempts paused" if row.get("paused") else ""
    print(
        printable(
            f"{run_dir}: {row.get('change')} at {row.get('at')} "
            f"(concurrency {row.get('setting')}, limit now {row.get('limit')}{paused})"
        )
    )
    return 0


def describe_state(run_dir: Path, rows: list[dict[str, object]]) -> str:
    """One line: the run's concurrency setting, its limit now, whether it is paused (its
    ``control.jsonl`` rows replayed: a resumed run's own execution, not the one before)."""
    from driftdesk.reruns.events import RunStats
    from driftdesk.reruns.run_control import ControlReplay
    from driftdesk.rundir import RunManifest

    stats = RunStats()
    for event in ControlReplay(run_dir.name).events([dict(r) for r in rows]):
        stats.record_event(event)
    manifest = RunManifest.read(run_dir).data
    setting = stats.concurrency_setting or (
        (manifest.get("concurrency_control") or {}).get("setting") or manifest.get("concurrency")
    )
    return (
        f"{run_dir}: running, concurrency {setting}"
        + (f", limit now {stats.concurrency}" if stats.concurrency else "")
        + (", new attempts paused" if stats.paused else "")
    )
