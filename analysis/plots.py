"""Terminal plots (plotext) of a RunReport, returned as text for the CLI and the TUI.

Colourless by default (the CLI's output is piped and diffed); ``color=True`` adds ANSI colours
for a face that renders them (the TUI, through ``rich.text.Text.from_ansi``). Either way the two
curves differ by marker too, and are named in the title, not in a plotext legend box (which
covered the curves).

plotext keeps one global figure, so building is serialised by a lock (the TUI may ask from a
worker thread while the CLI never does).
"""

from __future__ import annotations

import threading
from typing import Any

from driftdesk.analysis.run_report import RunReport

HISTOGRAM_BINS = 10
# Thin braille line for pass^k, a dotted line for pass@k: distinct without colour.
PASS_HAT_K_MARKER = ("braille", "⠤⠤")
PASS_AT_K_MARKER = ("dot", "••")
# 256-colour codes (ANSI bright blue and bright green): the TUI's key line uses the same ones.
PASS_HAT_K_COLOR = 12
PASS_AT_K_COLOR = 10
HISTOGRAM_COLOR = 14
_LOCK = threading.Lock()


def _figure(width: int, height: int, color: bool) -> Any:
    import plotext as plt

    fig = plt.figure
    fig.clear()
    plt.terminal.limit(False, False)  # size from the caller, not from the terminal
    fig.plot_size(max(width, 20), max(height, 6))
    # "simple": no colour on canvas or frame (the face's own background shows through).
    fig.theme("simple" if color else "colorless")
    return fig


def _marker(symbol: str, color: int | None) -> Any:
    from plotext._primitives.marker import marker
    from plotext._primitives.pixel import pixel

    return marker(symbol, pixel(foreground=color) if color is not None else None)


def pass_hat_k_title(run_id: str, width: int) -> str:
    """The curves named with their markers; the run id only when it fits."""
    curves = f"pass^k {PASS_HAT_K_MARKER[1]}  pass@k {PASS_AT_K_MARKER[1]}"
    titled = f"{run_id}: {curves}"
    return titled if len(titled) <= width else curves


def pass_hat_k_plot(report: RunReport, width: int, height: int, *, color: bool = False) -> str:
    """pass^k and pass@k against k, as a ``width`` × ``height`` text plot."""
    if not report.pass_hat_k:
        return f"{report.run_id}: no judged attempts yet: nothing to plot\n"
    ks = sorted(report.pass_hat_k)
    with _LOCK:
        fig = _figure(width, height, color)
        hat = _marker(PASS_HAT_K_MARKER[0], PASS_HAT_K_COLOR if color else None)
        at = _marker(PASS_AT_K_MARKER[0], PASS_AT_K_COLOR if color else None)
        # pass^k first, then pass@k over it where they meet (k = 1). pass@k's dots fill whole
        # cells: an interpolated dotted line put its first cell a row off the value at k = 1
        # (0.83 drawn for 0.741), so it is drawn as one dot per k, each in its nearest cell.
        fig.draw(fig.signal(ks, [report.pass_hat_k[k] for k in ks], marker=hat).lines())
        fig.draw(fig.signal(ks, [report.pass_at_k[k] for k in ks], marker=at))
        fig.title(pass_hat_k_title(report.run_id, max(width, 20)))
        fig.ruler("y").lim(0, 1)
        # Integer k only; at most ~10 labelled ticks however many attempts there are.
        step = max(1, len(ks) // 10)
        fig.ruler("x").ticks(ks[::step], [str(k) for k in ks[::step]])
        return str(fig.build().string(colorless=not color))


def success_histogram(report: RunReport, width: int, height: int, *, color: bool = False) -> str:
    """Tasks per success-rate bin (10 bins over 0..100 %, the last one closed: 90–100)."""
    rates = [t.success_rate for t in report.tasks if t.success_rate is not None]
    if not rates:
        return f"{report.run_id}: no judged tasks yet: nothing to plot\n"
    counts = histogram_counts(rates)
    # Each bin by its lower edge; the last by its range, so the axis reads to 100 % (that bin is
    # closed: 90–100 holds the tasks that always passed).
    labels = [f"{10 * i}" for i in range(HISTOGRAM_BINS - 1)] + [
        f"{100 - 100 // HISTOGRAM_BINS}–100"
    ]
    title = f"{report.run_id}: tasks by success rate %"
    if len(title) > width:
        title = "tasks by success rate %"
    with _LOCK:
        fig = _figure(width, height, color)
        fig.draw(fig.bar(labels, counts, marker=_marker("█", HISTOGRAM_COLOR if color else None)))
        top = max(counts)
        step = max(1, top // 5)
        fig.ruler("y").ticks(
            list(range(0, top + 1, step)), [str(v) for v in range(0, top + 1, step)]
        )
        fig.title(title)
        return str(fig.build().string(colorless=not color))


def histogram_counts(rates: list[float]) -> list[int]:
    """Counts per bin [0,0.1), [0.1,0.2), …, [0.9,1.0]."""
    counts = [0] * HISTOGRAM_BINS
    for rate in rates:
        counts[min(int(rate * HISTOGRAM_BINS + 1e-9), HISTOGRAM_BINS - 1)] += 1
    return counts
