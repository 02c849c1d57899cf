"""CLI entry points that open the Textual workbench (the only ones that import Textual)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

EXIT_NOT_A_TERMINAL = 2


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="open the workbench (same as driftdesk with no command)")
    p.add_argument(
        "--runs",
        type=Path,
        action="append",
        help="also list runs from this folder (repeatable; default: ./runs and driftdesk's data dir)",
    )
    p.set_defaults(func=lambda args: open_workbench(args.runs))
    d = sub.add_parser(
        "demo",
        help="start the simulated sandbox endpoint, run the built-in suite live, show volatility",
    )
    d.add_argument("--repeat", type=int, default=5, help="attempts per task (default 5)")
    d.add_argument(
        "--concurrency",
        type=int,
        default=8,
        help="attempts at once (default 8: the simulated sandbox has no rate limit; "
        "driftdesk run defaults to 2)",
    )
    d.add_argument(
        "--out", type=Path, help="folder for the demo run (default: ./runs, as for driftdesk run)"
    )
    d.add_argument(
        "--history",
        action="store_true",
        help="instead: seed six small nightly runs (OUT/demo-history) with one served-model "
        "change and one real regression, and print their driftdesk trend (no terminal needed)",
    )
    d.set_defaults(func=cmd_demo)


def _not_a_terminal(command: str) -> str | None:
    """Why the workbench cannot draw here: piped into ``tee`` or a file, it would write a
    screen of escape codes sized for no terminal."""
    if sys.stdout.isatty() and sys.stdin.isatty():
        return None
    instead = (
        "for text progress run: driftdesk run --profile P --suite S"
        if command == "demo"
        else "for text use driftdesk report RUN_DIR"
    )
    return (
        f"driftdesk {command}: the workbench needs a terminal, and its input or output is not "
        f"a terminal (piped or redirected); {instead}"
    )


def open_workbench(runs: list[Path] | None = None) -> int:
    refusal = _not_a_terminal("tui")
    if refusal:
        print(refusal, file=sys.stderr)
        return EXIT_NOT_A_TERMINAL
    from driftdesk.tui.app import run_workbench

    return run_workbench(runs)


def cmd_demo(args: argparse.Namespace) -> int:
    from driftdesk.tui.app import run_demo

    if args.repeat < 1 or args.concurrency < 1:
        raise SystemExit("driftdesk demo: --repeat and --concurrency must be at least 1")
    if args.history:
        return demo_history(args.out)
    refusal = _not_a_terminal("demo")
    if refusal:
        print(refusal, file=sys.stderr)
        return EXIT_NOT_A_TERMINAL
    return run_demo(out_dir=args.out, repeat=args.repeat, concurrency=args.concurrency)


def demo_history(out: Path | None) -> int:
    """``demo --history``: the nightly runs, each said as it ends, then their trend."""
    from driftdesk.cli.trend import render_trend
    from driftdesk.paths import runs_dir
    from driftdesk.reruns.demo_history import HISTORY_FOLDER, HISTORY_NIGHTS, seed_history
    from driftdesk.terminal import printable

    folder = (out or runs_dir()) / HISTORY_FOLDER
    print(
        f"driftdesk demo --history: {len(HISTORY_NIGHTS)} nightly runs of a SIMULATED model "
        f"(local sandbox, no network) into {folder}",
        file=sys.stderr,
    )

    def said(night: int, run_dir: Path) -> None:
        print(f"  night {night}: {run_dir.name}", file=sys.stderr, flush=True)

    seed_history(folder, on_night=said)
    from driftdesk.analysis.trend import build_trend
    from driftdesk.cli.trend import find_run_dirs

    sys.stdout.write(printable(render_trend(build_trend(find_run_dirs([folder])))))
    print(
        f"\nnext: driftdesk tui --runs {folder}  (select a run, press t for its Trend), or "
        f"driftdesk check RUN --trend --runs {folder}",
        file=sys.stderr,
    )
    return 0
