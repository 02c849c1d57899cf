"""Terminal plots (plotext) of a RunReport, returned as text for the CLI and the TUI."""

from __future__ import annotations

from analysis.volatility import RunReport


def pass_hat_k_plot(report: RunReport, width: int, height: int) -> str:
    """pass^k and pass@k against k, as a ``width`` × ``height`` text plot."""
    raise NotImplementedError


def success_histogram(report: RunReport, width: int, height: int) -> str:
    """Histogram of per-task success rates (10 bins over 0..1)."""
    raise NotImplementedError
