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
    refusal = _not_a_terminal("demo")
    if refusal:
        print(refusal, file=sys.stderr)
        return EXIT_NOT_A_TERMINAL
    return run_demo(out_dir=args.out, repeat=args.repeat, concurrency=args.concurrency)
