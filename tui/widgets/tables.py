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
        table.add_row(*cells, key=key)
