"""The page's plots, drawn by matplotlib as SVG and inlined as ``data:`` images.

Why matplotlib and SVG images: a plot drawn in Python needs no script in the page (the page's
Content-Security-Policy allows only its own script, by hash), an SVG with its text kept as
text is a few tens of kB, and an ``<img>`` of SVG is inert (no script, no fetch, whatever its
labels say). matplotlib is a heavy install (numpy), so it is the ``page`` extra: without it the
page is whole, its figures in tables, and says which extra adds the plots (``available``).
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

EXTRA = "page"  # pip install 'driftdesk[page]' adds the plots
PASS_COLOUR = "#2a7d4f"
FAIL_COLOUR = "#b3392f"
BAND_COLOUR = "#9cc3e6"
LINE_COLOUR = "#1f5f99"
SIZE = (6.4, 3.0)  # inches at 100 dpi: a plot the width of a column


def available() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _figure() -> Figure:
    from matplotlib.figure import Figure

    fig = Figure(figsize=SIZE, dpi=100, layout="constrained")
    return fig


def _data_url(fig: Figure) -> str:
    import matplotlib

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "driftdesk"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    return "data:image/svg+xml;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _finished(
    fig: Figure,
    ax: Axes,
    *,
    title: str,
    ylabel: str,
    xlabel: str | None = None,
    percent: bool = False,
    legend: bool = False,
) -> str:
    """The figure's data URL once its axes are named (``percent``: y from 0 to 100)."""
    if percent:
        ax.set_ylim(0, 100)
    if xlabel is not None:
        ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if legend:
        ax.legend(fontsize="small")
    return _data_url(fig)


def success_per_run(runs: Sequence[tuple[str, float | None, Sequence[float] | None]]) -> str:
    """Each run's success with its 95 % CI, one point a run (label, rate, [lo, hi])."""
    fig = _figure()
    ax = fig.add_subplot()
    for i, (_, rate, ci) in enumerate(runs):
        if rate is None:
            continue
        low, high = (ci[0], ci[1]) if ci else (rate, rate)
        ax.errorbar(
            [i], [rate * 100], yerr=[[(rate - low) * 100], [(high - rate) * 100]],
            fmt="o", color=LINE_COLOUR, capsize=6,
        )  # fmt: skip
    ax.set_xticks(range(len(runs)), [_short(label) for label, _, _ in runs])
    ax.set_xlim(-0.5, len(runs) - 0.5)
    return _finished(fig, ax, title="success per run", ylabel="success % (95 % CI)", percent=True)


def pass_k_curves(curves: Sequence[tuple[str, dict[str, float], dict[str, float]]]) -> str:
    """pass^k (solid) and pass@k (dashed) against k, one colour a run (label, pass^k, pass@k)."""
    fig = _figure()
    ax = fig.add_subplot()
    for label, hat, at in curves:
        ks = sorted(int(k) for k in hat)
        line = ax.plot(
            ks, [hat[str(k)] * 100 for k in ks], marker="o", label=f"pass^k {_short(label)}"
        )
        ks_at = sorted(int(k) for k in at)
        ax.plot(
            ks_at, [at[str(k)] * 100 for k in ks_at], linestyle="--", marker=".",
            color=line[0].get_color(), label=f"pass@k {_short(label)}",
        )  # fmt: skip
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return _finished(
        fig,
        ax,
        title="pass^k (all k attempts pass) and pass@k (at least one)",
        xlabel="k",
        ylabel="%",
        percent=True,
        legend=True,
    )


def success_histogram(rates: Sequence[float]) -> str:
    """How many tasks have each success rate (ten bins, 0 to 100 %)."""
    fig = _figure()
    ax = fig.add_subplot()
    ax.hist([r * 100 for r in rates], bins=10, range=(0, 100), color=LINE_COLOUR, rwidth=0.9)
    return _finished(fig, ax, title="per-task success", xlabel="task success %", ylabel="tasks")


def trend_chart(runs: Sequence[dict[str, Any]]) -> str:
    """Success per run in start order with its 95 % CI as a band; flagged runs marked.
    ``runs``: the trend JSON's runs (``success_rate``, ``success_ci95``, ``flags``)."""
    fig = _figure()
    ax = fig.add_subplot()
    xs = list(range(1, len(runs) + 1))
    rates = [r.get("success_rate") for r in runs]
    lows = [(r.get("success_ci95") or [None, None])[0] for r in runs]
    highs = [(r.get("success_ci95") or [None, None])[1] for r in runs]
    shown = [(x, v) for x, v in zip(xs, rates, strict=True) if v is not None]
    band = [
        (x, lo, hi)
        for x, lo, hi in zip(xs, lows, highs, strict=True)
        if lo is not None and hi is not None
    ]
    if band:
        ax.fill_between(
            [b[0] for b in band], [b[1] * 100 for b in band], [b[2] * 100 for b in band],
            color=BAND_COLOUR, alpha=0.6, label="95 % CI",
        )  # fmt: skip
    if shown:
        ax.plot(
            [s[0] for s in shown],
            [s[1] * 100 for s in shown],
            marker="o",
            color=LINE_COLOUR,
            label="success",
        )
    flagged = [
        (x, v) for x, v, r in zip(xs, rates, runs, strict=True) if v is not None and r.get("flags")
    ]
    if flagged:
        ax.scatter(
            [f[0] for f in flagged], [f[1] * 100 for f in flagged], s=120, facecolors="none",
            edgecolors=FAIL_COLOUR, linewidths=2, label="flagged", zorder=3,
        )  # fmt: skip
    ax.set_xticks(xs)
    return _finished(
        fig,
        ax,
        title="success over time",
        xlabel="run (oldest first)",
        ylabel="success %",
        percent=True,
        legend=True,
    )


def _short(label: str, width: int = 28) -> str:
    return label if len(label) <= width else "…" + label[-(width - 1) :]
