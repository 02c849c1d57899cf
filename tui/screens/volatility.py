"""Volatility: the runs, one run's summary and pass^k curve, its per-task table (sortable,
filterable), drill-down, rerun of chosen or volatile tasks, compare, copy and export.

The screen composes three widgets: the runs list (``widgets.runs_list``, fed by the runs
catalog ``driftdesk.rundir.catalog``), the run's summary (``widgets.run_summary``) and the task
table with its filter (``widgets.task_table``). Reports are built by ``analysis`` (DuckDB) in
thread workers; a run that is still being written is followed with
``analysis.live.LiveVolatility`` on a timer. Above 600 lines: what stays here is the screen's
own state (the open run, marks, sort, filter), its workers and its 15 bindings' actions, which
all share that state.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Header, Input, Label, OptionList, Static
from textual.worker import Worker

from driftdesk.analysis.run_success import (
    known_success,
    measure_success,
    remember_success,
    rows_key,
    success_to_measure,
)
from driftdesk.reruns.run_facts import run_facts
from driftdesk.rundir.catalog import RunInfo, discover_runs
from driftdesk.tui.screens.base import HEADER_ICON, Loaded, PaletteCommand, WorkbenchScreen
from driftdesk.tui.screens.modals import ConfirmScreen, PickScreen
from driftdesk.tui.widgets.footer import BindingsFooter
from driftdesk.tui.widgets.run_summary import histogram_text, pass_k_plot_text, summary_text
from driftdesk.tui.widgets.runs_list import RunsList
from driftdesk.tui.widgets.task_table import (
    SORT_KEYS,
    SORT_LABELS,
    FilterBox,
    TaskTable,
    task_orders,
    tasks_tsv,
)

LIVE_REFRESH_SECONDS = 1.0
RUNS_RESCAN_SECONDS = 2.0
SUCCESS_REDRAW_SECONDS = 0.3  # measured successes reach the runs list at most this often


@dataclass
class RunsFound(Loaded):
    runs: list[RunInfo]
    unmeasured: list[Path] = field(default_factory=list)  # whose success to measure now


class SuccessKnown(Message):
    """A run's success was measured (or read by its report): the runs list shows it."""


@dataclass
class ReportReady(Message):
    run_dir: Path
    report: Any
    plot: str
    histogram: str
    live: bool = False
    # sort key -> the report's tasks in that order: sorted by the worker, so a sort or filter
    # key on a run of 20,000 tasks does not sort them on the UI thread
    orders: dict[str, list[Any]] = field(default_factory=dict)


class VolatilityScreen(WorkbenchScreen):
    SCREEN_NAME = "Volatility"
    HELP_INTRO = (
        "Per-task volatility: how often each task passes over its repeats, and how much that "
        "varies. Link errors (429, timeouts…) are kept apart from model failures. Enter drills "
        "into a task; space marks tasks, a marks all volatile ones, R reruns the marked tasks "
        "as a new run; m compares this run with another; t shows the trend of its suite; / filters; o changes the sort. u "
        "resumes an interrupted run (killed or cancelled): its missing slots, optionally also "
        "its link errors."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("slash", "filter", "Filter", id="volatility.filter", tooltip="Filter tasks"),
        Binding(
            "o", "sort", "Sort", id="volatility.sort", tooltip="Sort by max−min, success or task id"
        ),
        Binding("space", "mark", "Mark", id="volatility.mark", tooltip="Mark the task for rerun"),
        Binding("a", "mark_volatile", "All volatile", id="volatility.mark_volatile"),
        Binding("R", "rerun", "Rerun marked", id="volatility.rerun", tooltip="Rerun marked tasks"),
        Binding("m", "compare", "Compare", id="volatility.compare", tooltip="Compare with a run"),
        Binding(
            "t",
            "trend",
            "Trend",
            id="volatility.trend",
            show=False,  # the footer is full at 80 columns; help and the palette list it
            tooltip="This suite's runs over time, flagged where they moved",
        ),
        Binding("c", "copy_task", "Copy id", id="volatility.copy_task", show=False),
        Binding("C", "copy_table", "Copy table", id="volatility.copy_table", show=False),
        Binding(
            "e", "export", "Export", id="volatility.export", tooltip="Export JSON, CSV and the page"
        ),
        Binding(
            "u",
            "resume",
            "Resume",  # short: the footer is full at 140 columns
            id="volatility.resume",
            tooltip="Resume an interrupted run (its missing slots)",
        ),
        # The task table's own Enter drills in (RowSelected); listed here so help names it.
        Binding(
            "enter",
            "open_task",
            "Open task",
            id="volatility.open_task",
            show=False,
            tooltip="Open the task: its attempts, logs and diffs",
        ),
        Binding("r", "rescan", "Refresh", id="volatility.refresh", show=False),
        Binding("escape", "leave_filter", "Leave filter", id="volatility.leave_filter", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.runs: list[RunInfo] = []
        self.run_dir: Path | None = None
        self.report: Any = None
        self._orders: dict[str, list[Any]] = {}  # sort key -> the report's tasks in that order
        self.sort_key = "spread"
        self.filter_text = ""
        self.marked: set[str] = set()
        self._wanted_run: Path | None = None
        self._live: Any = None  # LiveVolatility of the selected run while it is running
        self._live_lock = threading.Lock()  # a refresh and a close never overlap
        self._focus_tasks = False
        self._matching = 0  # tasks the filter matches (the table lists MAX_LISTED_ROWS at most)
        self._measuring: Worker[None] | None = None  # the worker measuring runs' success
        self._loading: set[Path] = set()  # runs whose report a worker is building
        self._shown_live = False  # the summary shown is of a live run
        self.success_redraw_pending = False  # a runs-list remake for measured successes is due
        self._success_shown_at = 0.0  # time.monotonic() of the last such remake

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Horizontal(id="vol-body"):
            with Vertical(id="runs-pane"):
                yield Label("Runs", classes="pane-title")
                yield RunsList(id="runs")
            with Vertical(id="report-pane"):
                with Horizontal(id="summary-row"):
                    yield Static("Select a run on the left.", id="summary")
                    yield Static("", id="plot")
                    yield Static("", id="histogram")
                with Horizontal(id="filter-row"):
                    yield FilterBox(placeholder="filter tasks (/)", id="filter")
                    yield Label("", id="table-state")
                table = TaskTable(id="tasks", cursor_type="row")
                table.clear_tasks()
                yield table
        yield BindingsFooter()

    def on_mount(self) -> None:
        self.on_resize()
        self.set_interval(LIVE_REFRESH_SECONDS, self._live_tick)
        self.set_interval(RUNS_RESCAN_SECONDS, self._rescan_tick)

    def came_to_front(self) -> None:
        self.rescan()

    def on_resize(self) -> None:
        width, height = self.app.size
        # Below STACK_BELOW_WIDTH the runs list goes above the report (a strip of a few lines)
        # instead of beside it: the summary keeps the whole width, so the headline never
        # shrinks to a column of letters. The plot shows only where it fits beside it.
        self.set_class(width < STACK_BELOW_WIDTH, "stacked")
        was_short = self.has_class("short")
        self.set_class(height < SHORT_BELOW_HEIGHT, "short")
        if self.report is not None and (was_short != self.has_class("short") or was_short):
            self.query_one("#summary", Static).update(self._summary(self.report, self._shown_live))
        self.query_one("#plot", Static).display = width >= PLOT_MIN_WIDTH and (
            height >= SHORT_BELOW_HEIGHT
        )
        wide = width >= HISTOGRAM_MIN_WIDTH
        self.query_one("#histogram", Static).display = wide

    # -- what the app calls ---------------------------------------------------------------------
    def select_run(self, run_dir: Path) -> None:
        self._wanted_run = Path(run_dir).resolve()
        self.rescan()

    def run_ended(self, live: Any) -> None:
        if live.run_dir is not None and self.run_dir == Path(live.run_dir).resolve():
            self.close_live()
            self.load_report(self.run_dir)
        self.rescan()

    # -- workers -------------------------------------------------------------------------------
    @work(thread=True, exclusive=True, group="vol-runs", exit_on_error=False, name="listing runs")
    def rescan(self) -> None:
        executing = frozenset(self.workbench.executing_dirs())
        runs = discover_runs(self.workbench.runs_dirs, run_facts(), executing)
        due = success_to_measure(((r.path, r.manifest) for r in runs), time.monotonic())
        self.post_message(RunsFound(runs, due))

    @work(thread=True, group="vol-success", exit_on_error=False, name="measuring runs")
    def measure_runs(self, run_dirs: list[Path]) -> None:
        """Each run's success, listed again as each is known; one of these at a time (a
        rescan every few seconds would otherwise read a big run several times at once)."""
        for run_dir in run_dirs:
            if run_dir.resolve() in self._loading:
                continue  # its report is being built, and says its success
            measure_success(run_dir)
            self.post_message(SuccessKnown())

    @work(
        thread=True,
        exclusive=True,
        group="vol-report",
        exit_on_error=False,
        name="the volatility report",
    )
    def load_report(self, run_dir: Path) -> None:
        from driftdesk.analysis.report import build_report

        try:
            started, key = time.monotonic(), rows_key(run_dir)
            reports = build_report([run_dir], sort="spread")
            if not reports:
                raise ValueError(f"{run_dir} has no attempts yet")
            report = reports[0]
            # passes / judged attempts, latest row per slot: what ``measure_success`` reads
            remember_success(run_dir, key, report.attempt_success_rate, started)
        finally:
            self._loading.discard(run_dir)
        self.post_message(SuccessKnown())
        self.post_message(
            ReportReady(
                run_dir,
                report,
                pass_k_plot_text(report),
                histogram_text(report),
                orders=task_orders(report),
            )
        )

    @work(
        thread=True, exclusive=True, group="vol-live", exit_on_error=False, name="the live report"
    )
    def live_refresh(self, run_dir: Path) -> None:
        from driftdesk.analysis.live import LiveVolatility

        with self._live_lock:
            live = self._live
            if live is None or Path(live.run_dir).resolve() != run_dir:
                self._drop_live()
                live = self._live = LiveVolatility(run_dir)
            report = live.refresh()
        self.post_message(
            ReportReady(
                run_dir,
                report,
                pass_k_plot_text(report),
                histogram_text(report),
                live=True,
                orders=task_orders(report),
            )
        )

    @work(thread=True, group="vol-close", exit_on_error=False, name="closing the live report")
    def close_live(self) -> None:
        """Free the live report's DuckDB table (its run finished, or the user left it)."""
        with self._live_lock:
            self._drop_live()

    def _drop_live(self) -> None:
        live, self._live = self._live, None
        if live is not None:
            live.close()

    @work(thread=True, exclusive=True, group="vol-export", exit_on_error=False, name="the export")
    def export_report(self, run_dir: Path) -> None:
        """The report as JSON, its task table as CSV, both from the analysis core (the
        same CSV as ``report --format csv``), and the page to send (``report --format html``)."""
        from driftdesk.analysis.export import tasks_csv
        from driftdesk.analysis.report import build_report
        from driftdesk.fileio import atomic_write_json, atomic_write_text

        reports = build_report([run_dir])
        report = reports[0]
        out = self.workbench.export_dir
        json_path = out / f"{report.run_id}.report.json"
        csv_path = out / f"{report.run_id}.tasks.csv"
        atomic_write_json(json_path, report.to_json())
        atomic_write_text(csv_path, tasks_csv(reports))
        from driftdesk.tui.page_export import run_page

        page = run_page(run_dir, out)
        self.app.call_from_thread(
            self.notify, f"exported {json_path}, {csv_path.name} and the page {page.name}"
        )

    # -- timers --------------------------------------------------------------------------------
    def _live_tick(self) -> None:
        if self.run_dir is None or not self.is_current:
            return
        info = self._info(self.run_dir)
        if info is not None and info.status == "running":
            self.live_refresh(self.run_dir)

    def _rescan_tick(self) -> None:
        if self.is_current:
            self.rescan()

    # -- message handlers ----------------------------------------------------------------------
    @on(RunsFound)
    def _runs_found(self, message: RunsFound) -> None:
        if message.stale:
            return
        previous = {r.path: r.status for r in self.runs}
        self._show_runs(message.runs)
        options = self.query_one("#runs", OptionList)
        target = self._wanted_run or self.run_dir
        if target is None and message.runs:
            target = message.runs[0].path
        if target is not None:
            for index, run in enumerate(message.runs):
                if run.path.resolve() == Path(target).resolve():
                    if options.highlighted != index:
                        options.highlighted = index
                    if self._wanted_run is not None or self.run_dir is None:
                        # a run chosen for the user (the demo, "v" on the Run screen): start
                        # in its task table
                        self._focus_tasks = self._wanted_run is not None
                        self._wanted_run = None
                        self._open_run(run.path)
                    # a run that just finished: take the final report
                    if previous.get(run.path) == "running" and run.status != "running":
                        self.close_live()
                        self.load_report(run.path)
                    break
        if not message.runs:
            self.query_one("#summary", Static).update(
                "No runs yet under "
                + ", ".join(str(d) for d in self.workbench.runs_dirs)
                + ".\nLaunch one on the Run screen (2, then n)"
                + ("." if self.workbench.demo else " or try `driftdesk demo`.")
            )
        # after the run to open is opened: its report, being built, says its success
        if message.unmeasured and (self._measuring is None or self._measuring.is_finished):
            self._measuring = self.measure_runs(message.unmeasured)

    @on(SuccessKnown)
    def _success_known(self) -> None:
        # A list of hundreds of runs is measured one run after another: the list is made
        # again at most every SUCCESS_REDRAW_SECONDS (each remake clears and refills it), a
        # lone measurement at once.
        if self.success_redraw_pending:
            return
        wait = self._success_shown_at + SUCCESS_REDRAW_SECONDS - time.monotonic()
        if wait <= 0:
            self._show_known_success()
        else:
            self.success_redraw_pending = True
            self.set_timer(wait, self._show_known_success)

    def _show_known_success(self) -> None:
        self.success_redraw_pending = False
        self._success_shown_at = time.monotonic()
        self._show_runs([replace(r, success=known_success(r.path)) for r in self.runs])

    def _show_runs(self, runs: list[RunInfo]) -> None:
        """``runs`` in the runs list; the open run stays highlighted."""
        shown, self.runs = self.runs, runs
        self.query_one("#runs", RunsList).show_runs(runs, shown, self.run_dir)

    @on(OptionList.OptionSelected, "#runs")
    @on(OptionList.OptionHighlighted, "#runs")
    def _run_chosen(self, event: OptionList.OptionHighlighted | OptionList.OptionSelected) -> None:
        # resolved, as ``run_dir`` is: a run listed through a symlink is the run already open
        if event.option.id and Path(event.option.id).resolve() != self.run_dir:
            self._open_run(Path(event.option.id))

    def _open_run(self, run_dir: Path) -> None:
        self.run_dir = run_dir.resolve()
        self.marked.clear()
        self.close_live()
        info = self._info(self.run_dir)
        if info is not None and info.status == "running":
            self.live_refresh(self.run_dir)
        else:
            self._loading.add(self.run_dir)
            self.load_report(self.run_dir)

    @on(ReportReady)
    def _report_ready(self, message: ReportReady) -> None:
        if message.run_dir != self.run_dir:
            return  # an answer for a run the user already left
        self.report, self._orders = message.report, message.orders
        self._shown_live = message.live
        self.query_one("#summary", Static).update(self._summary(message.report, message.live))
        self.query_one("#plot", Static).update(Text.from_ansi(message.plot))
        self.query_one("#histogram", Static).update(Text.from_ansi(message.histogram))
        self._fill_table()
        if self._focus_tasks:
            self._focus_tasks = False
            self.query_one("#tasks", DataTable).focus()

    def _summary(self, report: Any, live: bool) -> Text:
        info = self._info(self.run_dir) if self.run_dir is not None and not live else None
        stopped = info.stopped_because if info is not None else None
        return summary_text(report, live, stopped, self.has_class("short"), self.app.size.width)

    def _visible_tasks(self) -> list[Any]:
        """The report's tasks in the chosen order (sorted by the report's worker), filtered."""
        if self.report is None:
            return []
        tasks = self._orders.get(self.sort_key, [])
        needle = self.filter_text.lower()
        return [t for t in tasks if needle in t.task_id.lower()] if needle else list(tasks)

    def _fill_table(self) -> None:
        table = self.query_one("#tasks", TaskTable)
        tasks = self._visible_tasks()
        table.show_tasks(tasks, self.marked)
        self._matching = len(tasks)
        self._show_table_state()

    def _show_table_state(self) -> None:
        listed = self.query_one("#tasks", DataTable).row_count
        first = f"first {listed} of " if listed < self._matching else ""
        state = Text(f"{first}{self._matching} tasks · sorted by {SORT_LABELS[self.sort_key]} (o)")
        if self.marked:
            state.append(f" · {len(self.marked)} marked (R reruns)", style="bold cyan")
        self.query_one("#table-state", Label).update(state)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self._fill_table()

    @on(Input.Submitted, "#filter")
    def _filter_submitted(self) -> None:
        self.query_one("#tasks", DataTable).focus()

    @on(DataTable.RowSelected, "#tasks")
    def _drill(self, event: DataTable.RowSelected) -> None:
        if self.run_dir is None or event.row_key.value is None:
            return
        from driftdesk.tui.screens.task import TaskScreen

        self.app.push_screen(TaskScreen(self.run_dir, str(event.row_key.value)))

    def action_open_task(self) -> None:
        """Enter where the task table does not have focus: drill into its cursor's task."""
        table = self.query_one("#tasks", DataTable)
        if self.run_dir is None or table.row_count == 0:
            return
        from driftdesk.tui.screens.task import TaskScreen

        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        if row_key.value is not None:
            self.app.push_screen(TaskScreen(self.run_dir, str(row_key.value)))

    # -- actions -------------------------------------------------------------------------------
    def _info(self, run_dir: Path) -> RunInfo | None:
        return next((r for r in self.runs if r.path.resolve() == run_dir), None)

    def selected_task(self) -> str | None:
        return self.query_one("#tasks", TaskTable).selected_task()

    def action_filter(self) -> None:
        self.query_one("#filter", FilterBox).open()

    def action_leave_filter(self) -> None:
        self.query_one("#tasks", DataTable).focus()

    def action_sort(self) -> None:
        self.sort_key = SORT_KEYS[(SORT_KEYS.index(self.sort_key) + 1) % len(SORT_KEYS)]
        self._fill_table()

    def action_mark(self) -> None:
        task = self.selected_task()
        if task is None:
            return
        self.marked.symmetric_difference_update({task})
        self.query_one("#tasks", TaskTable).show_mark(task, self.marked)
        self._show_table_state()

    def action_mark_volatile(self) -> None:
        if self.report is None:
            return
        volatile = {t.task_id for t in self.report.tasks if t.volatile}
        if not volatile:
            self.notify("no volatile tasks in this run")
            return
        self.marked = volatile if self.marked != volatile else set()
        self._fill_table()

    def action_rerun(self) -> None:
        if self.run_dir is None or self.report is None:
            return
        tasks = [t.task_id for t in self.report.tasks if t.task_id in self.marked]
        if not tasks:
            self.notify("mark tasks first (space, or a for all volatile)", severity="warning")
            return
        info = self._info(self.run_dir)
        if info is None:
            return

        def start(profile: str | None) -> None:
            live = self.workbench.rerun_tasks(info.manifest, tasks, info.path, profile)
            self.notify(f"rerunning {len(tasks)} task(s) as a new run")
            self.workbench.show_live_run(live)

        def answered(yes: bool | None) -> None:
            if not yes:
                return
            from driftdesk.providers.profiles import ProfileStore

            names = ProfileStore().names()
            own = info.manifest.get("profile")
            if own in names or self.workbench._is_demo_profile(own):
                start(None)
            elif not names:
                self.notify(
                    "this run's profile does not exist here (an imported run?): add a profile "
                    "on the Profiles screen first",
                    severity="warning",
                )
            else:  # e.g. an imported run: its "profile" is not one of ours
                self.app.push_screen(
                    PickScreen(
                        f"Rerun with which profile? ({own or 'the run has none'} is not one here)",
                        [(name, name) for name in names],
                    ),
                    lambda name: start(name) if name else None,
                )

        repeat = info.manifest.get("repeat", "?")
        self.app.push_screen(
            ConfirmScreen(
                f"Rerun {len(tasks)} task(s) × {repeat} as a new run?",
                "\n".join(tasks),
                yes="Rerun",
            ),
            answered,
        )

    def action_compare(self) -> None:
        if self.run_dir is None:
            return
        a = self.run_dir
        others = [
            (str(r.path), f"{r.run_id}  ({r.status})") for r in self.runs if r.path.resolve() != a
        ]
        if not others:
            self.notify("there is no other run to compare with", severity="warning")
            return

        def picked(b: str | None) -> None:
            if b:
                from driftdesk.tui.screens.compare import CompareScreen

                self.app.push_screen(CompareScreen(a, Path(b)))

        # The order picked is kept (deltas are B − A), whichever run is the newer.
        heading = f"Compare with {a.name} as A: pick B (deltas are B − A)"
        self.app.push_screen(PickScreen(heading, others), picked)

    def action_trend(self) -> None:
        if self.run_dir is None:
            return
        from driftdesk.tui.screens.trend import TrendScreen

        self.app.push_screen(TrendScreen(self.run_dir, [r.path for r in self.runs]))

    def action_copy_task(self) -> None:
        task = self.selected_task()
        if task:
            self.app.copy_to_clipboard(task)
            self.notify(f"copied {task}")

    def action_copy_table(self) -> None:
        tsv, count = tasks_tsv(self._visible_tasks())
        self.app.copy_to_clipboard(tsv)
        self.notify(f"copied {count} task rows (tab-separated)")

    def action_export(self) -> None:
        if self.run_dir is not None:
            self.export_report(self.run_dir)

    def action_rescan(self) -> None:
        self.rescan()
        if self.run_dir is not None:
            self._open_run(self.run_dir)

    def action_resume(self) -> None:
        info = None if self.run_dir is None else self._info(self.run_dir)
        if info is None or not info.resumable:
            self.notify("only an interrupted run can be resumed", severity="warning")
            return
        run_dir = info.path

        def picked(choice: str | None) -> None:
            if choice is None:
                return
            live = self.workbench.resume_run(run_dir, retry_link_errors=choice == "link-errors")
            self.notify(f"resuming {info.run_id}")
            self.workbench.show_live_run(live)

        self.app.push_screen(
            PickScreen(
                f"Resume {info.run_id}: run which slots?",
                [
                    ("missing", "the missing slots only"),
                    (
                        "link-errors",
                        "the missing slots and the link_error ones (retry link errors)",
                    ),
                ],
            ),
            picked,
        )

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "volatility: resume run",
                "Run the missing slots of the interrupted run (optionally retry link errors)",
                self.action_resume,
            ),
            PaletteCommand("volatility: filter tasks", "Focus the filter box", self.action_filter),
            PaletteCommand("volatility: sort", "Sort by spread / success / task", self.action_sort),
            PaletteCommand(
                "volatility: mark all volatile",
                "Mark every volatile task",
                self.action_mark_volatile,
            ),
            PaletteCommand(
                "volatility: rerun marked", "Rerun the marked tasks as a new run", self.action_rerun
            ),
            PaletteCommand(
                "volatility: compare runs", "Compare this run with another", self.action_compare
            ),
            PaletteCommand(
                "volatility: trend of this suite",
                "The runs of this run's suite over time, with their flags",
                self.action_trend,
            ),
            PaletteCommand(
                "volatility: copy task id", "Copy the selected task id", self.action_copy_task
            ),
            PaletteCommand(
                "volatility: copy table", "Copy the task table (TSV)", self.action_copy_table
            ),
            PaletteCommand(
                "volatility: export",
                "Write the report as JSON and CSV, and the page to send (HTML)",
                self.action_export,
            ),
        ]


# The histogram sits beside the pass^k plot only when the screen is this wide (app.tcss
# hides it below: the summary needs its ~44 columns first).
HISTOGRAM_MIN_WIDTH = 180
STACK_BELOW_WIDTH = 130  # runs list above the report, not beside it
PLOT_MIN_WIDTH = 96  # summary (44) + plot (50)
SHORT_BELOW_HEIGHT = 30  # one-line filter box, no plot
