"""The task × attempt grid of a live run, drawn line by line (Textual's Line API).

A DataTable re-renders every cell through Rich on each change, which is far too slow for a grid
that changes dozens of times a second; here a line is a handful of pre-styled segments.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import groupby
from typing import ClassVar

from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from driftdesk.terminal import printable

AttemptKey = tuple[str, int]

SYMBOLS: dict[str, tuple[str, Style]] = {
    "pending": ("·", Style(dim=True)),
    "running": ("▶", Style(color="cyan", bold=True)),
    "retrying": ("↻", Style(color="yellow", bold=True)),
    "pass": ("✔", Style(color="green", bold=True)),
    "fail": ("✘", Style(color="red", bold=True)),
    "link_error": ("⚡", Style(color="magenta", bold=True)),
    "harness_error": ("!", Style(color="bright_red", bold=True)),
}
UNKNOWN = ("?", Style())
CELL_WIDTH = 2  # symbol + gap
# What follows each symbol to fill its cell: ⚡ is two cells wide on a terminal already, and
# a gap after it would push every later attempt of its row one column right.
GAPS = {symbol: " " * (CELL_WIDTH - cell_len(symbol)) for symbol, _ in [*SYMBOLS.values(), UNKNOWN]}
HEADER_STYLE = Style(bold=True, dim=True)
CURSOR_STYLE = Style(reverse=True)


class AttemptGrid(ScrollView, can_focus=True):
    """One row per task, one cell per attempt; a cursor picks the attempt whose log to follow."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "move(0, -1)", "Up", show=False, id="grid.up"),
        Binding("down", "move(0, 1)", "Down", show=False, id="grid.down"),
        Binding("left", "move(-1, 0)", "Left", show=False, id="grid.left"),
        Binding("right", "move(1, 0)", "Right", show=False, id="grid.right"),
        Binding("pageup", "move(0, -10)", "Page up", show=False, id="grid.page_up"),
        Binding("pagedown", "move(0, 10)", "Page down", show=False, id="grid.page_down"),
    ]

    @dataclass
    class Picked(Message):
        """The user moved the cursor to an attempt."""

        grid: AttemptGrid
        key: AttemptKey

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.task_ids: tuple[str, ...] = ()
        self.repeat = 0
        self.cells: dict[AttemptKey, str] = {}
        self.cursor: tuple[int, int] = (0, 0)  # (row, attempt)
        self.show_cursor = False
        self._label_width = 4
        self._rows: dict[str, int] = {}  # task id -> its row

    # -- data -----------------------------------------------------------------------------------
    def set_run(self, task_ids: tuple[str, ...], repeat: int) -> None:
        self.task_ids = task_ids
        self.repeat = repeat
        self.cells = {}
        self.cursor = (0, 0)
        self._rows = {task: row for row, task in enumerate(task_ids)}
        self._label_width = (
            max((len(printable(t, keep_newlines=False)) for t in task_ids), default=4) + 1
        )
        self.virtual_size = Size(self._label_width + CELL_WIDTH * repeat, len(task_ids) + 1)
        self.refresh()

    def update_cells(self, cells: dict[AttemptKey, str]) -> None:
        """Take a snapshot of the cell states; repaint only the rows that changed."""
        index = self._rows
        changed_rows = {
            index[key[0]]
            for key, state in cells.items()
            if self.cells.get(key) != state and key[0] in index
        }
        self.cells = cells
        for row in changed_rows:
            self.refresh_row(row)

    def refresh_row(self, row: int) -> None:
        y = row + 1 - self.scroll_offset.y
        if 0 <= y < self.size.height:
            self.refresh(Region(0, y, self.size.width, 1))

    # -- rendering ------------------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        if y == 0:
            return self._header().crop(scroll_x, scroll_x + width)
        row = y - 1 + scroll_y
        if row >= len(self.task_ids):
            return Strip.blank(width)
        task = self.task_ids[row]
        # Only the attempts in view: a row of a 10k-attempt run is hundreds of cells wide.
        label = self._label_width
        first = max(0, (scroll_x - label) // CELL_WIDTH)
        last = max(first, min(self.repeat, (scroll_x + width - label) // CELL_WIDTH + 1))
        segments = (
            [Segment(printable(task, keep_newlines=False).ljust(label))] if first == 0 else []
        )
        start = 0 if first == 0 else label + CELL_WIDTH * first
        # One segment per run of equal cells (a finished row is mostly one or two runs).
        cursor = self.cursor[1] if self.show_cursor and row == self.cursor[0] else -1
        cells = self.cells
        looks = [
            (cells.get((task, attempt), "pending"), attempt == cursor)
            for attempt in range(first, last)
        ]
        for (state, is_cursor), same in groupby(looks):
            symbol, style = SYMBOLS.get(state, UNKNOWN)
            if is_cursor:
                segments.append(Segment(symbol, style + CURSOR_STYLE))
                if gap := GAPS[symbol]:
                    segments.append(Segment(gap))
            else:
                segments.append(Segment((symbol + GAPS[symbol]) * len(list(same)), style))
        strip = Strip(segments, label + CELL_WIDTH * last - start)
        return strip.crop(scroll_x - start, scroll_x - start + width).extend_cell_length(width)

    def _header(self) -> Strip:
        text = "task".ljust(self._label_width) + "".join(
            str(a % 10).ljust(CELL_WIDTH) for a in range(self.repeat)
        )
        return Strip([Segment(text, HEADER_STYLE)], len(text))

    # -- cursor ---------------------------------------------------------------------------------
    def on_focus(self) -> None:
        self.show_cursor = True
        self.refresh()

    def on_blur(self) -> None:
        self.show_cursor = False
        self.refresh()

    def action_move(self, dx: int, dy: int) -> None:
        if not self.task_ids or not self.repeat:
            return
        row, col = self.cursor
        self._set_cursor(
            max(0, min(row + dy, len(self.task_ids) - 1)), max(0, min(col + dx, self.repeat - 1))
        )

    def on_click(self, event: events.Click) -> None:
        row = event.y - 1 + self.scroll_offset.y
        col = (event.x + self.scroll_offset.x - self._label_width) // CELL_WIDTH
        if 0 <= row < len(self.task_ids) and 0 <= col < self.repeat:
            self.focus()
            self._set_cursor(row, col)

    def _set_cursor(self, row: int, col: int) -> None:
        old_row = self.cursor[0]
        self.cursor = (row, col)
        self.refresh_row(old_row)
        self.refresh_row(row)
        # keep the cursor row visible
        if row + 1 < self.scroll_offset.y + 1:
            self.scroll_to(y=row, animate=False)
        elif row + 1 >= self.scroll_offset.y + self.size.height:
            self.scroll_to(y=row + 2 - self.size.height, animate=False)
        self.post_message(self.Picked(self, (self.task_ids[row], col)))
