"""The trend chart (plotext): success per run with its 95 % CI band, the consistency gap, and
the flagged runs marked — as text, for the TUI's Trend view (``analysis.plots``' conventions:
colourless unless asked, the lines told apart by marker and named in the title)."""

from __future__ import annotations

from driftdesk.analysis.plots import _LOCK, _figure, _marker
from driftdesk.analysis.trend import Trend

SUCCESS_MARKER = ("braille", "⠤⠤")
CI_MARKER = ("·", "··")
GAP_MARKER = ("•", "••")
FLAG_MARKER = "▼"
SUCCESS_COLOR, CI_COLOR, GAP_COLOR, FLAG_COLOR = 12, 8, 11, 9


def trend_plot(trend: Trend, width: int, height: int, *, color: bool = False) -> str:
    """Success % (with its CI band) and gap pp against the run number (1 = oldest); a
    flagged run gets ``FLAG_MARKER`` above its success."""
    runs = [(i, r) for i, r in enumerate(trend.runs, start=1) if r.success_rate is not None]
    if not runs:
        return "no run with a judged attempt: nothing to plot\n"
    xs = [i for i, _ in runs]
    title = (
        f"success % {SUCCESS_MARKER[1]}  95% CI {CI_MARKER[1]}  gap pp {GAP_MARKER[1]}  "
        f"flagged {FLAG_MARKER}"
    )
    with _LOCK:
        fig = _figure(width, height, color)

        def line(ys: list[float], marker: tuple[str, str], colour: int, dots: bool) -> None:
            signal = fig.signal(xs, ys, marker=_marker(marker[0], colour if color else None))
            fig.draw(signal if dots else signal.lines())

        band = [r.success_ci95 or [r.success_rate or 0.0] * 2 for _, r in runs]
        single = len(xs) < 2  # one point: no line to draw through it
        line([b[0] * 100 for b in band], CI_MARKER, CI_COLOR, single)
        line([b[1] * 100 for b in band], CI_MARKER, CI_COLOR, single)
        gaps = [r.consistency_gap_pp or 0.0 for _, r in runs]
        line(gaps, GAP_MARKER, GAP_COLOR, single)
        line(
            [(r.success_rate or 0.0) * 100 for _, r in runs], SUCCESS_MARKER, SUCCESS_COLOR, single
        )
        flagged = [(i, r) for i, r in runs if r.flags]
        if flagged:
            fig.draw(
                fig.signal(
                    [i for i, _ in flagged],
                    [min(100.0, (r.success_rate or 0.0) * 100 + 8) for _, r in flagged],
                    marker=_marker(FLAG_MARKER, FLAG_COLOR if color else None),
                )
            )
        fig.title(title if len(title) <= width else "success ⠤ CI · gap • flagged ▼")
        fig.ruler("y").lim(0, 100)
        step = max(1, len(xs) // 10)
        fig.ruler("x").ticks(xs[::step], [str(x) for x in xs[::step]])
        return str(fig.build().string(colorless=not color))
