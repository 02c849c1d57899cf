"""CLI sub-commands for the profiles area. Handlers import their core lazily (fast start)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    """Add this area's sub-commands to the top-level parser."""


def cmd_import_profile(args: argparse.Namespace) -> int:
    raise NotImplementedError
