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
from driftdesk.analysis.report import build_report


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


def _dot_height_at_first_k(plot: str) -> tuple[float, float]:
    """(the y of pass@k's leftmost dot, half a row in y) read off the drawn text."""
    lines = plot.splitlines()
    top = next(i for i, line in enumerate(lines) if line.startswith("1.00┤"))
    bottom = next(i for i, line in enumerate(lines) if line.startswith("0.00┤"))
    column = min(line.index("•") for line in lines[top : bottom + 1] if "•" in line)
    row = next(i for i in range(top, bottom + 1) if lines[i][column] == "•")
    per_row = 1.0 / (bottom - top)
    return 1.0 - (row - top) * per_row, per_row / 2


def test_pass_at_k_is_drawn_at_its_value_at_k_1(tmp_path: Path) -> None:
    # Seen: the pass@k line at k=1 drawn near 0.83 while the value was 0.741.
    (report,) = build_report([write_handmade_run(tmp_path)])
    for width, height in ((60, 12), (80, 18), (120, 24)):
        drawn, tolerance = _dot_height_at_first_k(pass_hat_k_plot(report, width, height))
        assert abs(drawn - report.pass_at_k[1]) <= tolerance + 1e-9, (width, height, drawn)


def test_the_histogram_axis_reads_to_100(tmp_path: Path) -> None:
    # Seen: the axis stopped at 90 (the last bin's lower edge), as if 100 % were not on it.
    (report,) = build_report([write_handmade_run(tmp_path)])
    axis = success_histogram(report, 80, 14).splitlines()[-1]
    assert axis.rstrip().endswith("90–100"), axis
