"""Text plots of a real report: colourless unless asked, curves told apart by marker and named in
the title, no legend box drawn over the data."""

from __future__ import annotations

from pathlib import Path

from analysis_fixtures import write_handmade_run

from driftdesk.analysis.plots import (
    PASS_AT_K_MARKER,
    PASS_HAT_K_MARKER,
    histogram_counts,
    pass_hat_k_plot,
    success_histogram,
)
from driftdesk.analysis.volatility import build_report


def test_pass_hat_k_plot_colourless_by_default_and_coloured_on_request(tmp_path: Path) -> None:
    (report,) = build_report([write_handmade_run(tmp_path)])
    plain = pass_hat_k_plot(report, 60, 12)
    assert "\x1b[" not in plain
    lines = plain.splitlines()
    assert len(lines) == 12
    title, body = lines[0], "\n".join(lines[1:])
    assert "pass^k" in title and "pass@k" in title
    assert "pass^k" not in body and "pass@k" not in body  # no legend box inside the frame
    assert "•" in body  # pass@k's dots
    assert any("\u2800" <= ch <= "\u28ff" for ch in body)  # pass^k's braille line
    assert PASS_HAT_K_MARKER[1] in title and PASS_AT_K_MARKER[1] in title

    coloured = pass_hat_k_plot(report, 60, 12, color=True)
    assert "\x1b[38;5;" in coloured


def test_histogram_colour_option(tmp_path: Path) -> None:
    (report,) = build_report([write_handmade_run(tmp_path)])
    assert "\x1b[" not in success_histogram(report, 40, 12)
    assert "\x1b[38;5;" in success_histogram(report, 40, 12, color=True)
    assert "tasks by success rate" in success_histogram(report, 40, 12)


def test_histogram_bins_close_the_last_one() -> None:
    assert histogram_counts([0.0, 0.1, 0.95, 1.0]) == [1, 1, 0, 0, 0, 0, 0, 0, 0, 2]
