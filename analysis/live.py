"""Volatility of a run that is still being written, refreshed from the new lines only."""

from __future__ import annotations

from pathlib import Path

from analysis.volatility import RunReport


class LiveVolatility:
    """Keeps per-slot and per-task state; ``refresh()`` reads only bytes appended since the last
    call (up to the last complete line, so a row being written is picked up next time)."""

    def __init__(self, run_dir: Path | str, *, include_link_errors: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.include_link_errors = include_link_errors

    def refresh(self) -> RunReport:
        raise NotImplementedError
