"""Two runs side by side (``analysis.compare``): over the tasks both judged, the paired deltas
with their CI and p-value in a plain sentence, the metrics, and the changed tasks."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import DataTable, Header, Label

from driftdesk.terminal import printable
from driftdesk.tui.screens.base import HEADER_ICON, PaletteCommand, WorkbenchScreen
from driftdesk.tui.widgets.footer import BindingsFooter
from driftdesk.tui.widgets.tables import MAX_LISTED_ROWS, fill_table

METRIC_COLUMNS = [(c, c) for c in ("metric", "A", "B", "B − A", "A 95% CI", "B 95% CI")]
PAIRED_COLUMNS = [(c, c) for c in ("paired B − A", "delta", "95% CI", "p", "test")]
# A is the older run (compare puts the newer as B), so "class A" → "class B" reads as a change.
CHANGED_COLUMNS = [(c, c) for c in ("task", "class A", "class B", "success A", "success B")]
CLASS_STYLES = {"pass": "green", "fail": "red", "volatile": "yellow", "absent": "dim"}


@dataclass
class ComparisonReady(Message):
    comparison: Any


def _fmt(value: float | None, metric: str = "") -> str:
    """Counts as integers, percentage points with one decimal, rates with three."""
    if value is None:
        return "-"
    if metric.endswith("_pp"):
        return f"{value:.1f}"
    if metric == "cost_usd":
        return f"${value:.4f}"
    if metric in ("tasks_judged", "attempts_judged", "link_errors") and float(value).is_integer():
        return str(int(value))
    return f"{value:.3f}"


class CompareScreen(WorkbenchScreen):
    SCREEN_NAME = "Compare"
    HELP_INTRO = (
        "Run A against run B in the order picked (the deltas are B − A; a warning says when A "
        "is the newer run), over the tasks both judged: the paired differences with a 95% CI "
        "and a p-value, the metrics, then every shared task whose class changed."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="compare.back"),
        Binding("c", "copy", "Copy changes", id="compare.copy"),
        Binding("e", "export", "Export page", id="compare.export", tooltip="The page to send"),
    ]

    def __init__(self, a: Path, b: Path) -> None:
        super().__init__()
        self.a = a
        self.b = b
        self.comparison: Any = None

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Vertical(id="compare-body"):
            yield Label(
                Text.assemble(("A ", "bold"), self.a.name, ("   →   B ", "bold"), self.b.name),
                id="compare-title",
            )
            yield Label("comparing…", id="compare-summary")
            paired: DataTable[Any] = DataTable(id="paired", cursor_type="row")
            paired.styles.height = "auto"
            fill_table(paired, PAIRED_COLUMNS, [])
            yield paired
            metrics: DataTable[Any] = DataTable(id="metrics", cursor_type="row")
            fill_table(metrics, METRIC_COLUMNS, [])
            yield metrics
            yield Label("tasks that changed", id="changed-title", classes="pane-title")
            changed: DataTable[Any] = DataTable(id="changed", cursor_type="row")
            fill_table(changed, CHANGED_COLUMNS, [])
            yield changed
        yield BindingsFooter()

    def on_mount(self) -> None:
        self.compare()

    @work(thread=True, exclusive=True, group="compare", exit_on_error=False, name="comparing runs")
    def compare(self) -> None:
        from driftdesk.analysis.compare import compare_runs

        self.post_message(ComparisonReady(compare_runs(self.a, self.b)))

    @on(ComparisonReady)
    def _ready(self, message: ComparisonReady) -> None:
        self.comparison = comparison = message.comparison
        self.query_one("#compare-title", Label).update(
            Text.assemble(
                ("A ", "bold"), comparison.a.run_id, ("   →   B ", "bold"), comparison.b.run_id
            )
        )
        summary = [
            f"shared tasks {comparison.shared_tasks}; left out: {comparison.only_in_a} only in "
            f"A, {comparison.only_in_b} only in B"
        ]
        summary += [f"⚠ {w}" for w in comparison.warnings]
        summary += [d.sentence for d in comparison.delta.values()]
        self.query_one("#compare-summary", Label).update("\n".join(summary))
        paired_rows: list[tuple[str, tuple[Any, ...]]] = []
        for name, d in comparison.delta.items():
            paired_rows.append((name, (name, *d.cells(), d.test)))
        fill_table(self.query_one("#paired", DataTable), PAIRED_COLUMNS, paired_rows)
        metrics = self.query_one("#metrics", DataTable)
        metric_rows: list[tuple[str, tuple[Any, ...]]] = []
        for m in comparison.metrics:
            style = "" if not m.delta else ("green" if m.delta > 0 else "red")
            if m.name in ("consistency_gap_pp", "link_error_rate") and m.delta:
                style = "red" if m.delta > 0 else "green"  # lower is better
            n = m.name
            metric_cells = (
                n,
                _fmt(m.a, n),
                _fmt(m.b, n),
                Text(("+" if (m.delta or 0) > 0 else "") + _fmt(m.delta, n), style=style),
                "-" if not m.ci_a else f"{_fmt(m.ci_a[0], n)}–{_fmt(m.ci_a[1], n)}",
                "-" if not m.ci_b else f"{_fmt(m.ci_b[0], n)}–{_fmt(m.ci_b[1], n)}",
            )
            metric_rows.append((n, metric_cells))
        fill_table(metrics, METRIC_COLUMNS, metric_rows)
        changed_rows: list[tuple[str, tuple[Any, ...]]] = []
        for c in comparison.changed[:MAX_LISTED_ROWS]:
            changed_cells = (
                printable(c.task_id, keep_newlines=False),
                Text(c.before, style=CLASS_STYLES.get(c.before, "")),
                Text(c.after, style=CLASS_STYLES.get(c.after, "")),
                _fmt(c.success_a),
                _fmt(c.success_b),
            )
            changed_rows.append((c.task_id, changed_cells))
        if not comparison.changed:
            changed_rows.append(("-", ("(no task changed class)", "", "", "", "")))
        fill_table(self.query_one("#changed", DataTable), CHANGED_COLUMNS, changed_rows)
        if len(comparison.changed) > MAX_LISTED_ROWS:
            self.query_one("#changed-title", Label).update(
                f"tasks that changed: the first {MAX_LISTED_ROWS} of "
                f"{len(comparison.changed)} (c copies them all)"
            )

    def action_copy(self) -> None:
        if self.comparison is None:
            return
        lines = ["task\tclass A\tclass B"] + [
            f"{c.task_id}\t{c.before}\t{c.after}" for c in self.comparison.changed
        ]
        self.app.copy_to_clipboard("\n".join(lines) + "\n")
        self.notify(f"copied {len(lines) - 1} changed task(s)")

    def action_export(self) -> None:
        if self.comparison is not None:
            self.export_page(self.comparison)

    @work(thread=True, exclusive=True, group="compare-export", exit_on_error=False, name="export")
    def export_page(self, comparison: Any) -> None:
        """The comparison as the page to send (``compare --format html``)."""
        from driftdesk.tui.page_export import compare_page

        path = compare_page(comparison, self.workbench.export_dir)
        self.app.call_from_thread(self.notify, f"exported the page {path}", markup=False)

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "compare: copy changes", "Copy the changed tasks (TSV)", self.action_copy
            ),
            PaletteCommand(
                "compare: export page", "Write the comparison as one HTML file", self.action_export
            ),
        ]
