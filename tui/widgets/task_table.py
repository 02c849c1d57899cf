"""The Volatility screen's task table: one row a task of a run's report (its repeats, passes,
fails, link errors, success, max − min, latency, tokens, error kinds), its sort orders, the
filter box above it, the rerun marks in its first column and its tab-separated copy."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from rich.text import Text
from textual.widgets import DataTable, Input

from driftdesk.terminal import printable
from driftdesk.tui.widgets.tables import MAX_LISTED_ROWS, fill_table

SORT_KEYS = ("spread", "success", "task")
# What each sort is called on screen: "spread" of pass/fail tasks is max − min success, in pp.
SORT_LABELS = {"spread": "max−min", "success": "success", "task": "task id"}

TASK_COLUMNS = (
    (" ", "mark"),
    ("task", "task"),
    ("n", "n"),
    ("pass", "pass"),
    ("fail", "fail"),
    ("link", "link"),
    ("success", "success"),
    # the report's ``spread``: max − min of the task's scores, so 0 or 100 on pass/fail tasks
    ("max−min pp", "spread"),
    ("latency ms", "latency"),
    ("tokens", "tokens"),
    ("error kinds", "errors"),
)


class FilterBox(Input):
    """The task filter: reached with / (or a click), never by Tab or Shift-Tab. Landed in by
    a Shift-Tab, a later q was typed into it as a filter instead of quitting."""

    can_focus = False

    def open(self) -> None:
        self.can_focus = True
        self.focus()

    def on_blur(self) -> None:
        self.can_focus = False

    def on_mouse_down(self) -> None:
        self.open()


def task_orders(report: Any) -> dict[str, list[Any]]:
    """The report's tasks in each order of ``SORT_KEYS``: by spread (most volatile first, then
    the lowest success), by success (lowest first), by task id; ties by task id."""

    def success(t: Any) -> float:
        return t.success_rate if t.success_rate is not None else 2.0

    by_id = sorted(report.tasks, key=lambda t: t.task_id)
    return {
        "spread": sorted(by_id, key=lambda t: (-(t.spread or 0), success(t))),
        "success": sorted(by_id, key=success),
        "task": by_id,
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def mark_cell(task_id: str, marked: Collection[str]) -> Text:
    return Text("●", style="bold cyan") if task_id in marked else Text()


class TaskTable(DataTable[Any]):
    """The tasks, one row each keyed by task id; at most ``MAX_LISTED_ROWS`` listed."""

    def clear_tasks(self) -> None:
        fill_table(self, TASK_COLUMNS, [], fixed={"mark": 1})

    def show_tasks(self, tasks: list[Any], marked: Collection[str]) -> None:
        """``tasks`` (already sorted and filtered) as rows; the cursor stays on its task."""
        current = self.selected_task()
        rows: list[tuple[str, tuple[Any, ...]]] = []
        for t in tasks[:MAX_LISTED_ROWS]:
            spread_style = "bold yellow" if t.volatile else ""
            success_style = (
                "green" if t.success_rate == 1 else ("red" if t.success_rate == 0 else "")
            )
            cells = (
                mark_cell(t.task_id, marked),
                printable(t.task_id, keep_newlines=False),
                str(t.n),
                str(t.passes),
                str(t.fails),
                Text(str(t.link_errors), style="magenta" if t.link_errors else ""),
                Text(_pct(t.success_rate), style=success_style),
                Text("-" if t.spread is None else f"{t.spread * 100:.0f}", style=spread_style),
                _num(t.latency_mean_ms),
                _num(t.tokens_mean),
                # a judged "fail" is model behaviour, not an error: list only error kinds
                ", ".join(k for k in t.last_error_kinds if k != "fail"),
            )
            rows.append((t.task_id, cells))
        fill_table(self, TASK_COLUMNS, rows, fixed={"mark": 1})
        if current is not None and current in self.rows:
            self.move_cursor(row=self.get_row_index(current))

    def show_mark(self, task_id: str, marked: Collection[str]) -> None:
        """One task's mark again (one cell, not the whole table)."""
        self.update_cell(task_id, "mark", mark_cell(task_id, marked))

    def selected_task(self) -> str | None:
        if self.row_count == 0:
            return None
        row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        return None if row_key.value is None else str(row_key.value)


def tasks_tsv(tasks: list[Any]) -> tuple[str, int]:
    """``tasks`` as tab-separated rows under a header line, and how many rows."""
    rows = ["task\tn\tpass\tfail\tlink\tsuccess\tspread"]
    for t in tasks:
        rows.append(
            f"{t.task_id}\t{t.n}\t{t.passes}\t{t.fails}\t{t.link_errors}\t"
            f"{_num(t.success_rate, '{:.3f}')}\t{_num(t.spread, '{:.2f}')}"
        )
    return "\n".join(rows) + "\n", len(rows) - 1
