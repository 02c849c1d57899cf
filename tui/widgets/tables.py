"""Filling a DataTable with columns sized to their content.

A DataTable measures auto-width columns on its next idle, and a render that happens before then
is cached with header-wide columns (the row render cache is not keyed by width). Refilling with
explicit widths, measured here, makes every paint right from the first one.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.widgets import DataTable

MAX_COLUMN_WIDTH = 60
# A table of tasks lists at most this many rows (the first of its sorted list): DataTable
# measures every cell of every row it is given, so 20,000 rows took 5–9 s a fill, on the UI
# thread. A filter or a copy reaches the others.
MAX_LISTED_ROWS = 200


def _width(value: Any) -> int:
    if isinstance(value, Text):
        return value.cell_len
    return cell_len(str(value))


def fill_table(
    table: DataTable[Any],
    columns: Sequence[tuple[str, str]],
    rows: Sequence[tuple[str, Sequence[Any]]],
    fixed: dict[str, int] | None = None,
) -> None:
    """Replace the content of ``table``: ``columns`` are (label, key), ``rows`` (key, cells)."""
    fixed = fixed or {}
    table.clear(columns=True)
    for index, (label, key) in enumerate(columns):
        width = fixed.get(key)
        if width is None:
            width = max([_width(label), *(_width(cells[index]) for _, cells in rows)])
            width = min(width, MAX_COLUMN_WIDTH)
        table.add_column(label, key=key, width=width)
    for key, cells in rows:
        # Text, not str: DataTable reads a str cell as markup (a task id "[b]x" would lose its
        # brackets), and parsing it is a third of the cost of a fill.
        table.add_row(*(Text(c) if isinstance(c, str) else c for c in cells), key=key)
