"""The Trend view: the runs of the selected run's suite over time (``analysis.trend``).

A chart of success (with its 95 % CI band) and gap per run, flagged runs marked; the flags'
evidence; then the task × run flip matrix, one coloured cell per task and run. Enter on a cell
opens that task in that run (the task drill-down). A worker reads the runs (their aggregates,
cached beside each run) and draws the chart; only the handler touches the widgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import DataTable, Header, Label, Static

from driftdesk.terminal import printable
from driftdesk.text import plural
from driftdesk.tui.screens.base import HEADER_ICON, Loaded, PaletteCommand, WorkbenchScreen
from driftdesk.tui.widgets.footer import BindingsFooter

CHART_HEIGHT = 9
CHART_HEIGHT_SHORT = 7  # at 24 rows: the matrix keeps room for a few tasks
SHORT_BELOW_HEIGHT = 30
MAX_TASK_ROWS = 500  # the matrix lists the most flipped tasks first


@dataclass
class TrendReady(Loaded):
    trend: Any  # analysis.trend.Trend, or None with ``error``
    chart: str
    error: str | None = None


def success_cell(success: float | None) -> Text:
    """One run of a task: its success as a coloured block (and as a number's first digit for
    a screen without colour: █ all passed … · none)."""
    from driftdesk.analysis.trend import strip_cell

    if success is None:
        return Text(" ")
    style = "green" if success >= 1.0 else "red" if success <= 0.0 else "yellow"
    return Text(strip_cell(success) * 2, style=style)


def _series_agent(trend: Any) -> str:
    """The agent of the series shown: its newest run's agent and client version, or "all
    (mixed)" when the trend mixes agent kinds."""
    from driftdesk.analysis.trend import ALL_AGENTS, run_identity

    if trend.agent == ALL_AGENTS:
        return "all (mixed)"
    if not trend.runs:
        return trend.agent or "?"
    return str(run_identity(trend.runs[-1].run).label)


class TrendScreen(WorkbenchScreen):
    DEFAULT_CSS = """
    #trend-title { padding: 0 1; height: 1; }
    #trend-chart { height: auto; }
    #trend-flags-scroll { height: auto; max-height: 6; }
    #trend-flags { height: auto; padding: 0 1; text-wrap: nowrap; text-overflow: ellipsis; }
    #trend-matrix { height: 1fr; }
    """
    SCREEN_NAME = "Trend"
    HELP_INTRO = (
        "The runs of this suite over time, oldest first: success with its 95% CI band and the "
        "consistency gap per run, flagged runs marked ▼ (regression / improvement by the paired "
        "test of check --baseline, served model or fingerprint changed, link errors up, tokens "
        "changed). Below, each task's success in each run, the most flipped first: Enter opens "
        "that task in that run. One series per agent kind (the run's own): a shows every "
        "agent's runs together, a change of agent flagged agent_changed."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="trend.back"),
        Binding(
            "enter",
            "open_cell",
            "Open task",
            id="trend.open_cell",
            show=False,
            tooltip="Open the task under the cursor in that run",
        ),
        Binding("r", "reload", "Reload", id="trend.reload", show=False),
        Binding("e", "export", "Export page", id="trend.export", tooltip="The page to send"),
        Binding(
            "a",
            "toggle_agents",
            "All agents",
            id="trend.all_agents",
            tooltip="This run's agent only, or every agent's runs in one series",
        ),
    ]

    def __init__(self, run_dir: Path, run_dirs: list[Path]) -> None:
        super().__init__()
        self.run_dir = Path(run_dir).resolve()
        self.run_dirs = list(dict.fromkeys(Path(d).resolve() for d in [*run_dirs, self.run_dir]))
        self.trend: Any = None
        self.all_agents = False  # one series per agent kind unless asked (a)

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Vertical(id="trend-body"):
            yield Label(f"reading the runs of {self.run_dir.name}'s suite…", id="trend-title")
            yield Static("", id="trend-chart")
            with VerticalScroll(id="trend-flags-scroll", can_focus=False):
                yield Static("", id="trend-flags")
            matrix: DataTable[Any] = DataTable(id="trend-matrix", cursor_type="cell")
            yield matrix
        yield BindingsFooter()

    def on_mount(self) -> None:
        self.load()

    def chart_size(self) -> tuple[int, int]:
        width, height = self.app.size
        return max(40, width - 2), (
            CHART_HEIGHT_SHORT if height < SHORT_BELOW_HEIGHT else CHART_HEIGHT
        )

    def action_reload(self) -> None:
        self.load()

    def action_toggle_agents(self) -> None:
        self.all_agents = not self.all_agents
        self.notify(
            "every agent's runs in one series (flagged agent_changed)"
            if self.all_agents
            else "this run's agent only",
            markup=False,
        )
        self.load()

    @work(thread=True, exclusive=True, group="trend", exit_on_error=False, name="reading runs")
    def load(self) -> None:
        from driftdesk.analysis.sources import manifest_or_empty
        from driftdesk.analysis.trend import ALL_AGENTS, TrendError, build_trend
        from driftdesk.analysis.trend_plot import trend_plot

        width, height = self.chart_size()
        try:
            from driftdesk.analysis.agent_identity import UNKNOWN_KIND, agent_identity

            manifest = manifest_or_empty(self.run_dir)
            suite = (manifest.get("suite") or {}).get("name")
            same_suite = [
                d
                for d in self.run_dirs
                if (manifest_or_empty(d).get("suite") or {}).get("name") == suite
            ]
            # The series of the run it was opened from (one per agent kind), or every kind.
            kind = agent_identity(manifest).kind
            agent = ALL_AGENTS if self.all_agents else (None if kind == UNKNOWN_KIND else kind)
            trend = build_trend(same_suite, agent=agent)
        except (TrendError, OSError, ValueError) as exc:
            self.post_message(TrendReady(None, "", str(exc)))
            return
        self.post_message(TrendReady(trend, trend_plot(trend, width, height, color=True)))

    @on(TrendReady)
    def _ready(self, message: TrendReady) -> None:
        if message.stale:
            return
        title = self.query_one("#trend-title", Label)
        if message.trend is None:
            title.update(Text(f"no trend: {printable(message.error or '')}", style="red"))
            return
        self.trend = trend = message.trend
        flagged = [(i, r) for i, r in enumerate(trend.runs, start=1) if r.flags]
        title.update(
            Text.assemble(
                ("suite ", "dim"),
                (printable(trend.suite or "?", keep_newlines=False), "bold"),
                ("  agent ", "dim"),
                (printable(_series_agent(trend), keep_newlines=False), "bold"),
                f"  {plural(len(trend.runs), 'run')}, oldest first  ",
                (
                    f"{len(flagged)} flagged" if flagged else "none flagged",
                    "bold red" if flagged else "green",
                ),
            )
        )
        self.query_one("#trend-chart", Static).update(Text.from_ansi(message.chart))
        # One line per flagged run, cut at the edge: the count above is of runs, and each
        # run names all its flags first, then what the first one found (the CLI's trend
        # prints every flag's evidence).
        lines = Text()
        for i, run in flagged:
            if lines:
                lines.append("\n")
            lines.append(f"▼ {i} ", style="bold red")
            lines.append(" · ".join(flag.name for flag in run.flags), style="bold")
            lines.append(" — " + printable(run.flags[0].evidence, keep_newlines=False))
        flags = self.query_one("#trend-flags", Static)
        flags.update(lines)
        flags.display = bool(flagged)
        self._fill_matrix(trend)

    def _fill_matrix(self, trend: Any) -> None:
        table = self.query_one("#trend-matrix", DataTable)
        table.clear(columns=True)
        table.add_column("task", key="task")
        for i, run in enumerate(trend.runs, start=1):
            label = Text(f"{i}▼" if run.flags else str(i), style="bold red" if run.flags else "")
            table.add_column(label, key=run.run.run_dir)
        for strip in trend.tasks[:MAX_TASK_ROWS]:
            table.add_row(
                printable(strip.task_id, keep_newlines=False),
                *(success_cell(s) for s in strip.success),
                key=strip.task_id,
            )
        if trend.runs:  # the newest run of the most flipped task: where drift shows first
            table.move_cursor(row=0, column=len(trend.runs))

    def selected_cell(self) -> tuple[Path, str] | None:
        """(run dir, task id) under the matrix's cursor; None on the task column or a task
        that run did not judge."""
        table = self.query_one("#trend-matrix", DataTable)
        if self.trend is None or table.row_count == 0:
            return None
        row_key, column_key = table.coordinate_to_cell_key(table.cursor_coordinate)
        if row_key.value is None or column_key.value in (None, "task"):
            return None
        return Path(str(column_key.value)), str(row_key.value)

    @on(DataTable.CellSelected, "#trend-matrix")
    def _cell_selected(self, event: DataTable.CellSelected) -> None:
        self.action_open_cell()

    def action_open_cell(self) -> None:
        cell = self.selected_cell()
        if cell is None:
            return
        from driftdesk.tui.screens.task import TaskScreen

        self.app.push_screen(TaskScreen(*cell))

    def action_export(self) -> None:
        if self.trend is not None:
            self.export_page(self.trend)

    @work(thread=True, exclusive=True, group="trend-export", exit_on_error=False, name="export")
    def export_page(self, trend: Any) -> None:
        """The trend as the page to send (``trend --format html``)."""
        from driftdesk.tui.page_export import trend_page

        path = trend_page(trend, self.workbench.export_dir)
        self.app.call_from_thread(self.notify, f"exported the page {path}", markup=False)

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "trend: export page", "Write the trend as one HTML file", self.action_export
            ),
            PaletteCommand(
                "trend: open task",
                "Open the task under the cursor in that run",
                self.action_open_cell,
            ),
            PaletteCommand("trend: reload", "Read the runs again", self.action_reload),
            PaletteCommand(
                "trend: all agents or this one",
                "Every agent's runs in one series, or this run's agent only",
                self.action_toggle_agents,
            ),
        ]
