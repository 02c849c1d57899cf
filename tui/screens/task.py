"""Drill-down into one task of a run: why it wobbles (the explanation of its pass and fail
attempts), every attempt (outcome, error, tokens, latency) and the selected attempt's
trajectory, or its transcript or log, check output, workspace diff and proxied calls."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Header, Label, RichLog, Static

from driftdesk.analysis.attempt_detail import AttemptDetail, attempt_detail, call_line
from driftdesk.terminal import printable
from driftdesk.tui.screens.base import (
    HEADER_ICON,
    Loaded,
    PaletteCommand,
    WorkbenchScreen,
    task_title,
)
from driftdesk.tui.widgets.footer import BindingsFooter
from driftdesk.tui.widgets.tables import fill_table
from driftdesk.tui.widgets.trajectory import TrajectoryView

ATTEMPT_COLUMNS = [
    (label, label)
    for label in (
        "#",
        "outcome",
        "error",
        "retries",
        "calls",
        "tokens",
        "client tokens",
        "latency ms",
        "model ms",  # the provider's own time (the proxy's, summed over the calls)
        "ended",
    )
]
OUTCOME_STYLES = {
    "pass": "bold green",
    "fail": "bold red",
    "link_error": "bold magenta",
    "harness_error": "bold bright_red",
}


@dataclass
class AttemptsLoaded(Loaded):
    rows: list[dict[str, Any]]


@dataclass
class AttemptTextLoaded(Loaded):
    title: str
    lines: list[str | Text]
    attempt: int


@dataclass
class AttemptTrajectoryLoaded(Loaded):
    trajectory: Any  # analysis.steps.Trajectory, or None when none was kept
    attempt: int


@dataclass
class ExplanationLoaded(Loaded):
    sentences: list[str]
    groups: dict[str, list[int]]  # pass / fail -> attempts with a trajectory
    problem: str | None = None  # why there is no explanation
    events: list[str] = field(default_factory=list)  # the link events, as explain says them
    note: str | None = None  # explain's note on recordings that predate tries


class TaskScreen(WorkbenchScreen):
    SCREEN_NAME = "Task"
    HELP_INTRO = (
        "Every attempt of one task, under why it wobbles: where its passing and failing attempts "
        "first part and what link events each group met. Move to an attempt to read its "
        "transcript (built-in agent) or log (command agent, Claude Code, Codex), then its check "
        "output, workspace diff and the provider calls the metering proxy saw (with the model "
        "that answered, when recorded). t shows its trajectory instead (a step a line, Enter "
        "unfolds one, / searches); v puts it beside an attempt of the other outcome, step by "
        "step. Superseded rows (an attempt redone by a resume) are dimmed."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="task.back"),
        Binding("c", "copy_task", "Copy id", id="task.copy_task"),
        Binding("y", "copy_error", "Copy error", id="task.copy_error"),
        Binding("t", "toggle_trajectory", "Trajectory/log", id="task.trajectory"),
        Binding("v", "side_by_side", "Side by side", id="task.side_by_side"),
        Binding(
            "e", "export", "Export page", id="task.export", tooltip="The run's page, at this task"
        ),
    ]

    def __init__(self, run_dir: Path, task_id: str) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.task_id = task_id
        self.rows: list[dict[str, Any]] = []
        self.groups: dict[str, list[int]] = {}
        # Only the pane on screen (log or trajectory) is loaded for the selected attempt; the
        # other catches up when shown. The attempt each pane shows now (None: none yet).
        self._selected: dict[str, Any] | None = None
        self._log_shows: int | None = None
        self._trajectory_shows: int | None = None
        self._log_title: str | None = None  # the heading of the log pane's attempt

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Vertical(id="task-body"):
            yield Label(task_title(self.task_id, self.run_dir), id="task-title")
            yield Static(Text("explaining…", style="dim"), id="task-explain")
            table: DataTable[Any] = DataTable(id="attempts", cursor_type="row")
            fill_table(table, ATTEMPT_COLUMNS, [])
            yield table
            yield Label("transcript / log / check / diff / calls", id="attempt-log-title")
            yield RichLog(id="attempt-log", wrap=True, markup=False, max_lines=5000)
            trajectory = TrajectoryView(id="trajectory")
            trajectory.display = False
            yield trajectory
        yield BindingsFooter()

    def on_mount(self) -> None:
        self.load_attempts()
        self.load_explanation()

    @work(thread=True, exclusive=True, group="task-explain", exit_on_error=False, name="explaining")
    def load_explanation(self) -> None:
        from driftdesk.analysis.explain import explain_task

        try:
            explanation = explain_task(self.run_dir, self.task_id)
        except (LookupError, OSError, ValueError) as exc:
            self.post_message(ExplanationLoaded([], {}, str(exc)))
            return
        events = [e.sentence for e in explanation.events]
        findings = [s for s in explanation.sentences() if s not in events]
        note = getattr(explanation, "tries_note", None)  # old recordings: read as one try
        self.post_message(ExplanationLoaded(findings, explanation.groups, events=events, note=note))

    @on(ExplanationLoaded)
    def _explained(self, message: ExplanationLoaded) -> None:
        if message.stale:
            return
        self.groups = message.groups
        passes, fails = len(message.groups.get("pass", [])), len(message.groups.get("fail", []))
        text = Text()
        if message.problem is not None:
            text.append(printable(message.problem, keep_newlines=False), style="dim")
        else:
            text.append(f"why it wobbles ({passes} pass, {fails} fail", style="bold")
            text.append("; v: side by side)" if passes and fails else ")", style="bold")
            if not passes or not fails:
                steady = "passed" if passes else "failed"
                fallback = f"every attempt with a trajectory {steady}: nothing to tell apart"
            else:
                fallback = "the passing and failing attempts took the same actions"
            # The link events always (explain prints them too), the findings in the room left.
            events = message.events[:EVENT_LINES]
            room = EXPLANATION_LINES - len(events) - (1 if message.note else 0)
            findings = message.sentences[: max(room, 1)] or [fallback]
            for sentence in findings:
                text.append("\n  " + printable(sentence, keep_newlines=False))
            for sentence in events:
                text.append("\n  ⚡ " + printable(sentence, keep_newlines=False), style="magenta")
            hidden = len(message.sentences) - len(findings) + len(message.events) - len(events)
            if hidden > 0:
                text.append(f"\n  (+{hidden} more: driftdesk explain)", style="dim")
            if message.note:
                text.append("\n  " + printable(message.note, keep_newlines=False), style="dim")
        self.query_one("#task-explain", Static).update(text)

    @work(
        thread=True,
        exclusive=True,
        group="task-attempts",
        exit_on_error=False,
        name="loading attempts",
    )
    def load_attempts(self) -> None:
        from driftdesk.analysis.attempts import task_attempts

        self.post_message(AttemptsLoaded(task_attempts(self.run_dir, self.task_id)))

    @work(
        thread=True, exclusive=True, group="task-log", exit_on_error=False, name="reading the log"
    )
    def load_text(self, row: dict[str, Any]) -> None:
        attempt = int(row.get("attempt") or 0)
        title = f"attempt {attempt}"
        transcript = row.get("transcript_path")
        log = row.get("log_path")
        lines: list[str | Text] = []
        if transcript:
            title += f" — transcript {Path(transcript).name}"
            lines.extend(_transcript_lines(Path(transcript)))
        if log:
            if lines:
                lines.append("")
            title += f" — log {Path(log).name}"
            lines.extend(
                Path(log).read_text(encoding="utf-8", errors="replace").splitlines()[-2000:]
            )
        if not lines:
            lines = ["(no transcript or log was kept for this attempt)"]
        detail = attempt_detail(self.run_dir, self.task_id, attempt)
        lines.extend(_detail_lines(detail))
        if row.get("error_message"):
            lines = [f"error {row.get('error_code')}: {row.get('error_message')}", "", *lines]
        self.post_message(AttemptTextLoaded(title, lines, attempt))

    @work(
        thread=True,
        exclusive=True,
        group="task-trajectory",
        exit_on_error=False,
        name="reading the trajectory",
    )
    def load_trajectory(self, row: dict[str, Any]) -> None:
        attempt = int(row.get("attempt") or 0)
        self.post_message(AttemptTrajectoryLoaded(_trajectory(self.run_dir, row), attempt))

    def _load_shown_pane(self) -> None:
        """Load the selected attempt into whichever pane is on screen, unless it is there."""
        row = self._selected
        if row is None:
            return
        attempt = int(row.get("attempt") or 0)
        if self.query_one("#trajectory", TrajectoryView).display:
            if self._trajectory_shows != attempt:
                self.load_trajectory(row)
        elif self._log_shows != attempt:
            self.load_text(row)

    @on(AttemptsLoaded)
    def _attempts(self, message: AttemptsLoaded) -> None:
        if message.stale:
            return
        self.rows = message.rows
        table = self.query_one("#attempts", DataTable)
        rows: list[tuple[str, tuple[Any, ...]]] = []
        for index, row in enumerate(message.rows):
            outcome = str(row.get("outcome"))
            dim = "dim " if row.get("superseded") else ""
            error = row.get("error_code") or ""
            if row.get("error_message"):
                error = f"{error} {row['error_message']}".strip()
            error = _with_injected(row, error)
            cells = (
                str(row.get("attempt")),
                Text(
                    outcome + (" (superseded)" if row.get("superseded") else ""),
                    style=dim + OUTCOME_STYLES.get(outcome, ""),
                ),
                Text(error[:60], style=dim),
                # whole tries rerun; faults the proxy absorbed (--link-faults absorb) beside them
                str(row.get("retries") or 0)
                + (f" +{row['absorbed_faults']} absorbed" if row.get("absorbed_faults") else ""),
                str(row.get("calls") or 0),
                str(row.get("total_tokens") if row.get("total_tokens") is not None else "-"),
                _client_tokens(row),
                f"{float(row.get('latency_ms') or 0):.0f}",
                "-" if row.get("model_latency_ms") is None else f"{row['model_latency_ms']:.0f}",
                str(row.get("ended_at") or "")[:19],
            )
            rows.append((str(index), cells))
        fill_table(table, ATTEMPT_COLUMNS, rows)
        if message.rows:
            self._selected = message.rows[0]
            self._load_shown_pane()
        else:
            self._show_text("no attempts", ["this task has no attempts in this run"])

    @on(DataTable.RowHighlighted, "#attempts")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.row_key.value is not None and self.rows:
            self._selected = self.rows[int(event.row_key.value)]
            self._load_shown_pane()

    @on(AttemptTextLoaded)
    def _text(self, message: AttemptTextLoaded) -> None:
        if message.stale:  # the cursor moved on: a newer attempt's text is coming
            return
        self._show_text(message.title, message.lines)
        self._log_shows = message.attempt
        self._log_title = message.title

    @on(AttemptTrajectoryLoaded)
    def _trajectory_loaded(self, message: AttemptTrajectoryLoaded) -> None:
        if message.stale:
            return
        self.query_one("#trajectory", TrajectoryView).show(
            message.trajectory,
            f"attempt {message.attempt}: no trajectory was kept (no recording, transcript or "
            "imported conversation)",
        )
        self._trajectory_shows = message.attempt
        # The pane's heading names the attempt on screen (it named the log's until now).
        source = getattr(message.trajectory, "source", None)
        self.query_one("#attempt-log-title", Label).update(
            f"attempt {message.attempt} — trajectory" + (f" ({source})" if source else "")
        )

    def action_toggle_trajectory(self) -> None:
        log = self.query_one("#attempt-log", RichLog)
        trajectory = self.query_one("#trajectory", TrajectoryView)
        showing = not trajectory.display
        trajectory.display, log.display = showing, not showing
        self._load_shown_pane()
        # The heading follows the pane shown: back to the log's when that one is already read.
        if not showing and self._log_shows is not None and self._log_title is not None:
            self.query_one("#attempt-log-title", Label).update(self._log_title)
        elif showing and self._trajectory_shows is not None:
            self.query_one("#attempt-log-title", Label).update(
                f"attempt {self._trajectory_shows} — trajectory"
            )
        if showing:
            trajectory.options.focus()

    def action_side_by_side(self) -> None:
        """The selected attempt beside one of the other outcome (a pass and a fail)."""
        from driftdesk.tui.screens.attempt_pair import AttemptPairScreen

        passes, fails = self.groups.get("pass", []), self.groups.get("fail", [])
        if not passes or not fails:
            self.notify(
                "side by side needs a pass and a fail with trajectories", severity="warning"
            )
            return
        row = self._selected_row()
        chosen = int(row.get("attempt") or 0) if row else None
        if chosen in passes:
            pair = (chosen, fails[0])
        elif chosen in fails:
            pair = (passes[0], chosen)
        else:
            pair = (passes[0], fails[0])
        self.app.push_screen(AttemptPairScreen(self.run_dir, self.task_id, *pair))

    def _show_text(self, title: str, lines: list[str | Text]) -> None:
        self.query_one("#attempt-log-title", Label).update(title)
        log = self.query_one("#attempt-log", RichLog)
        log.clear()
        for line in lines:
            log.write(line if isinstance(line, Text) else Text(line))
        log.scroll_home(animate=False)

    def _selected_row(self) -> dict[str, Any] | None:
        table = self.query_one("#attempts", DataTable)
        if not self.rows or table.row_count == 0:
            return None
        return self.rows[table.cursor_row]

    def action_export(self) -> None:
        self.export_page()

    @work(thread=True, exclusive=True, group="task-export", exit_on_error=False, name="export")
    def export_page(self) -> None:
        """The run's page (``report --format html``), and its link that opens this task."""
        from driftdesk.tui.page_export import run_page, task_link

        path = run_page(self.run_dir, self.workbench.export_dir)
        self.app.call_from_thread(
            self.notify, f"exported the page: {task_link(path, self.task_id)}", markup=False
        )

    def action_copy_task(self) -> None:
        self.app.copy_to_clipboard(self.task_id)
        self.notify(f"copied {self.task_id}")

    def action_copy_error(self) -> None:
        row = self._selected_row()
        if row and row.get("error_message"):
            self.app.copy_to_clipboard(str(row["error_message"]))
            self.notify("copied the error message")
        else:
            self.notify("this attempt has no error", severity="warning")

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand("task: copy id", "Copy this task id", self.action_copy_task),
            PaletteCommand(
                "task: export page", "Write the run's page, opened at this task", self.action_export
            ),
            PaletteCommand(
                "task: copy error", "Copy the attempt's error message", self.action_copy_error
            ),
            PaletteCommand(
                "task: trajectory or log",
                "Show the attempt's steps, or its log",
                self.action_toggle_trajectory,
            ),
            PaletteCommand(
                "task: side by side",
                "A pass and a fail attempt, step by step",
                self.action_side_by_side,
            ),
        ]


EXPLANATION_LINES = 5  # sentences shown above the attempts (the CLI's explain has them all)
EVENT_LINES = 3  # of which link events at most


def _trajectory(run_dir: Path, row: dict[str, Any]) -> Any:
    from driftdesk.analysis.trajectory import load_trajectory

    try:
        return load_trajectory(run_dir, str(row.get("task_id")), int(row.get("attempt") or 0))
    except (OSError, ValueError) as exc:
        return _unreadable(row, exc)


def _unreadable(row: dict[str, Any], exc: Exception) -> Any:
    from driftdesk.analysis.steps import Trajectory

    return Trajectory(
        str(row.get("task_id")), int(row.get("attempt") or 0), row.get("outcome"), [], "?",
        problems=[f"unreadable: {exc}"],
    )  # fmt: skip


def _transcript_lines(path: Path) -> list[str]:
    """A transcript (JSON list of messages, or an object with ``messages``) as readable lines."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        return [f"(cannot read {path.name}: {exc})"]
    messages = data.get("messages", data) if isinstance(data, dict) else data
    if not isinstance(messages, list):
        return json.dumps(data, indent=2).splitlines()
    lines: list[str] = []
    for message in messages:
        if not isinstance(message, dict):
            lines.append(str(message))
            continue
        role = str(message.get("role", "?"))
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        lines.append(f"── {role} ──")
        lines.extend(content.splitlines() or [""])
    return lines


def _with_injected(row: dict[str, Any], error: str) -> str:
    """An attempt of a ``run --inject`` run: its faults first (what became of them), so a
    link error the proxy put in is never read as the provider's."""
    faults = row.get("injected_faults")
    if not isinstance(faults, int) or isinstance(faults, bool) or faults <= 0:
        return error
    parts = [
        f"{row.get(f'injected_{what}')} {what}"
        for what in ("recovered", "surfaced", "misattributed")
        if row.get(f"injected_{what}")
    ]
    shown = f"injected {faults}" + (f" ({', '.join(parts)})" if parts else "")
    return f"{shown}; {error}" if error else shown


def _client_tokens(row: dict[str, Any]) -> str:
    """What a client (Claude Code, Codex) itself counted, prompt+completion; '-' if nothing."""
    prompt, completion = row.get("client_prompt_tokens"), row.get("client_completion_tokens")
    if prompt is None and completion is None:
        return "-"
    return f"{prompt or 0}+{completion or 0}"


def _heading(text: str) -> Text:
    return Text(f"── {text} ──", style="bold")


_DIFF_STYLES = (("+++", "bold"), ("---", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def _detail_lines(detail: AttemptDetail) -> list[str | Text]:
    """The check output, the workspace diff (coloured) and the proxied calls, under headings."""
    lines: list[str | Text] = []
    if detail.check_output is not None:
        lines += ["", _heading("check output"), *detail.check_output]
    if detail.diff is not None:
        lines += ["", _heading("workspace diff")]
        if not detail.diff:
            lines.append("(no change to the workspace)")
        for line in detail.diff:
            style = next((s for prefix, s in _DIFF_STYLES if line.startswith(prefix)), "")
            lines.append(Text(line, style=style))
    lines += ["", _heading(f"proxied calls ({len(detail.calls)})")]
    lines += [call_line(call) for call in detail.calls] or ["(no provider call was recorded)"]
    return lines
