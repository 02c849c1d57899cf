"""CLI entry points that open the Textual workbench (the only ones that import Textual)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("tui", help="open the workbench (same as driftdesk with no command)")
    p.set_defaults(func=lambda args: open_workbench())
    d = sub.add_parser(
        "demo",
        help="start the simulated sandbox endpoint, run the built-in suite live, show volatility",
    )
    d.set_defaults(func=cmd_demo)


def open_workbench() -> int:
    from tui.app import run_workbench

    return run_workbench()


def cmd_demo(args: argparse.Namespace) -> int:
    from tui.app import run_demo

    return run_demo()
