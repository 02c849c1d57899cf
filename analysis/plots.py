"""Terminal plots (plotext) of a RunReport, returned as text for the CLI and the TUI.

plotext keeps one global figure, so building is serialised by a lock (the TUI may ask from a
worker thread while the CLI never does).
"""

from __future__ import annotations

import threading
from typing import Any

from analysis.volatility import RunReport

HISTOGRAM_BINS = 10
_LOCK = threading.Lock()


def _figure(width: int, height: int) -> Any:
    import plotext as plt

    fig = plt.figure
    fig.clear()
    plt.terminal.limit(False, False)  # size from the caller, not from the terminal
    fig.plot_size(max(width, 20), max(height, 6))
    return fig


def pass_hat_k_plot(report: RunReport, width: int, height: int) -> str:
    """pass^k and pass@k against k, as a ``width`` × ``height`` text plot (no colour codes)."""
    if not report.pass_hat_k:
        return f"{report.run_id}: no judged attempts yet: nothing to plot\n"
    ks = sorted(report.pass_hat_k)
    with _LOCK:
        fig = _figure(width, height)
        fig.draw(fig.signal(ks, [report.pass_hat_k[k] for k in ks]).lines().label("pass^k"))
        fig.draw(fig.signal(ks, [report.pass_at_k[k] for k in ks]).lines().label("pass@k"))
        fig.title(f"{report.run_id}: pass^k and pass@k by k")
        fig.ruler("y").lim(0, 1)
        # Integer k only; at most ~10 labelled ticks however many attempts there are.
        step = max(1, len(ks) // 10)
        fig.ruler("x").ticks(ks[::step], [str(k) for k in ks[::step]])
        return str(fig.build().string(colorless=True))


def success_histogram(report: RunReport, width: int, height: int) -> str:
    """Tasks per success-rate bin (10 bins over 0..100 %, the last one closed: 90–100)."""
    rates = [t.success_rate for t in report.tasks if t.success_rate is not None]
    if not rates:
        return f"{report.run_id}: no judged tasks yet: nothing to plot\n"
    counts = histogram_counts(rates)
    labels = [f"{10 * i}%" for i in range(HISTOGRAM_BINS)]  # lower edge of each bin
    with _LOCK:
        fig = _figure(width, height)
        fig.draw(fig.bar(labels, counts))
        top = max(counts)
        step = max(1, top // 5)
        fig.ruler("y").ticks(
            list(range(0, top + 1, step)), [str(v) for v in range(0, top + 1, step)]
        )
        fig.title(f"{report.run_id}: tasks by success rate")
        return str(fig.build().string(colorless=True))


def histogram_counts(rates: list[float]) -> list[int]:
    """Counts per bin [0,0.1), [0.1,0.2), …, [0.9,1.0]."""
    counts = [0] * HISTOGRAM_BINS
    for rate in rates:
        counts[min(int(rate * HISTOGRAM_BINS + 1e-9), HISTOGRAM_BINS - 1)] += 1
    return counts
