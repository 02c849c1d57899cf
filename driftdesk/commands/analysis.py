"""CLI sub-commands for the analysis area. Handlers import their core lazily (fast start)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's sub-commands to the top-level parser."""


def cmd_import_results(args: argparse.Namespace) -> int:
    raise NotImplementedError
