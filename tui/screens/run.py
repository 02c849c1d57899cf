"""Run: launch a rerun and watch it live — progress with ETA, a task × attempt grid filling in
by outcome, counters, and the selected attempt's output and proxy calls.

The engine's listener (``tui.state.LiveRun``) only writes to memory; this screen redraws from it
on a timer, touching only the cells and log lines that changed since the last tick.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import Header, Label, ProgressBar, Static

from driftdesk.reruns.events import AdaptiveProgress
from driftdesk.rundir import ATTEMPTS_FILE, read_manifest
from driftdesk.terminal import printable
from driftdesk.tui.action_text import call_text
from driftdesk.tui.screens.base import HEADER_ICON, PaletteCommand, WorkbenchScreen
from driftdesk.tui.screens.launch import LaunchScreen
from driftdesk.tui.screens.modals import ConfirmScreen
from driftdesk.tui.state import LOG_LINES_PER_ATTEMPT, AttemptKey, LiveRun
from driftdesk.tui.widgets.attempt_grid import AttemptGrid
from driftdesk.tui.widgets.footer import BindingsFooter
from driftdesk.tui.widgets.run_log import RunLog

REDRAW_SECONDS = 0.3
COST_SECONDS = 2.0


@dataclass
class CommandsRead(Message):
    live: LiveRun
    key: AttemptKey
    commands: list[str]  # every tool call of the attempt so far, as it reads (raw)


@dataclass
class CostUpdated(Message):
    live: LiveRun
    text: str
    final: bool  # computed after the run had finished


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return "--:--"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    return (
        f"{hours}:{rest // 60:02d}:{rest % 60:02d}"
        if hours
        else f"{rest // 60:02d}:{rest % 60:02d}"
    )


class RunScreen(WorkbenchScreen):
    SCREEN_NAME = "Run"
    HELP_INTRO = (
        "Launch a run (n), watch it fill in, and follow one attempt's output and proxy calls "
        "(move in the grid, or f to follow the newest attempt: it stays on one until it ends). Cells: · pending  ▶ running  "
        "↻ retrying  ✔ pass  ✘ fail  ⚡ link error  ! harness error. x cancels the shown run (it "
        "is marked interrupted and can be resumed: Volatility, u); [ and ] switch between runs. "
        "A live run's concurrency (attempts at once, model calls in flight) shows as it moves and "
        "can be set: + and - move it one from where it is now, a gives it back to the controller "
        "(auto); p pauses starting new attempts (those in flight finish), p again unpauses. "
        "This works for runs followed from another terminal too. Each change is recorded with "
        "its time and shown in the run's report, and the last setting holds when the run is "
        "resumed (unless resume --concurrency says otherwise)."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("n", "launch", "New run", id="run.launch", tooltip="Open the launch form"),
        Binding(
            "x", "cancel_run", "Cancel run", id="run.cancel", tooltip="Interrupt the shown run"
        ),
        Binding(
            "f", "follow", "Follow newest", id="run.follow", tooltip="Follow the newest attempt"
        ),
        Binding("left_square_bracket", "cycle(-1)", "Prev run", id="run.prev", show=False),
        Binding("right_square_bracket", "cycle(1)", "Next run", id="run.next", show=False),
        Binding(
            "v", "volatility", "Volatility", id="run.volatility", tooltip="This run's volatility"
        ),
        Binding(
            "p", "pause", "Pause/unpause", id="run.pause", tooltip="Start no new attempts / again"
        ),
        Binding(
            "plus,equals_sign",
            "concurrency(1)",
            "Concurrency +1",
            id="run.concurrency_up",
            show=False,
        ),
        Binding(
            "minus", "concurrency(-1)", "Concurrency -1", id="run.concurrency_down", show=False
        ),
        Binding(
            "a",
            "concurrency_auto",
            "Auto concurrency",
            id="run.concurrency_auto",
            show=False,
            tooltip="Give the concurrency back to the controller",
        ),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.live: LiveRun | None = None
        self.follow = True
        self.selected: AttemptKey | None = None
        self._drawn_version = -1
        self._grid_run: str | None = None
        self._log_key: AttemptKey | None = None
        self._log_seen = 0
        self._live_reports: dict[Path, Any] = {}  # LiveVolatility per run dir (for the cost)
        self._agents: dict[Path, str] = {}  # run dir -> its agent and client, as shown
        # The commands the followed attempt's client ran (from its recording), written into
        # the log after its own lines: how many calls they were read at, how many are shown.
        self._commands_calls = 0
        self._commands_shown = 0
        # A replaced (cancelled) cost worker's thread may still be refreshing: one at a time.
        self._cost_lock = threading.Lock()

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Vertical(id="run-body"):
            demo = "" if self.workbench.demo else " (or run `driftdesk demo`)"
            yield Label(f"No run yet — press n to launch one{demo}.", id="run-title")
            with Horizontal(id="run-progress-row"):
                # total=100 until a run starts: an indeterminate bar animates forever
                yield ProgressBar(total=100, show_eta=False, id="run-progress")
                yield Label("", id="run-eta")
            yield Static("", id="run-counters")
            with Horizontal(id="run-panes"):
                yield AttemptGrid(id="run-grid")
                with Vertical(id="run-log-pane"):
                    yield Label("log", id="run-log-title")
                    # Plain lines, rendered when shown: a chatty attempt's lines scroll past
                    # faster than they are read (a RichLog rendered each one as it came).
                    yield RunLog(id="run-log", max_lines=LOG_LINES_PER_ATTEMPT)
        yield BindingsFooter()

    def on_mount(self) -> None:
        # Nothing to draw into until a run is shown.
        for selector in ("#run-panes", "#run-progress-row", "#run-counters"):
            self.query_one(selector).display = self.live is not None
        self.set_interval(REDRAW_SECONDS, self.redraw)
        self.set_interval(COST_SECONDS, self._cost_tick)

    def _cost_tick(self) -> None:
        live = self.live
        if live is None or live.run_dir is None or not self.is_current:
            return
        if live.finished and live.cost_text is not None and live.cost_final:
            return
        if (live.run_dir / ATTEMPTS_FILE).exists():
            self.refresh_cost(live)

    @work(thread=True, exclusive=True, group="run-cost", exit_on_error=False, name="the cost")
    def refresh_cost(self, live: LiveRun) -> None:
        """Cost so far from the analysis core (its price table × tokens), read incrementally."""
        from driftdesk.analysis.live import LiveVolatility

        assert live.run_dir is not None
        finished = live.finished
        with self._cost_lock:
            tracker = self._live_reports.get(live.run_dir)
            if tracker is None:
                tracker = self._live_reports[live.run_dir] = LiveVolatility(live.run_dir)
            report = tracker.refresh()
            if finished:  # the final cost: free its DuckDB table (a resume makes a new one)
                self._live_reports.pop(live.run_dir, None)
                tracker.close()
        if report.cost_usd is not None:
            text = f"${report.cost_usd:.4f}"
        elif report.unpriced_models:
            text = "n/a (unpriced model)"
        else:
            text = "n/a"
        self.post_message(CostUpdated(live, text, finished))

    @on(CostUpdated)
    def _cost_updated(self, message: CostUpdated) -> None:
        message.live.cost_text = message.text
        message.live.cost_final = message.final
        message.live.version += 1

    # -- what the app calls ---------------------------------------------------------------------
    def show_run(self, live: LiveRun) -> None:
        self.live = live
        if self.is_mounted:
            for selector in ("#run-panes", "#run-progress-row", "#run-counters"):
                self.query_one(selector).display = True
        self.follow = True
        self.selected = None
        self._drawn_version = -1
        self._grid_run = None
        self._log_key = None
        self.redraw()

    def run_ended(self, live: LiveRun) -> None:
        if live is self.live:
            self.redraw()

    # -- drawing --------------------------------------------------------------------------------
    def redraw(self) -> None:
        live = self.live
        if live is None or live.version == self._drawn_version or not self.is_mounted:
            return
        self._drawn_version = live.version
        runs = self.workbench.live_runs
        position = f"{runs.index(live) + 1}/{len(runs)}" if live in runs else ""
        title = Text()
        title.append(f"{live.label} {position}  ", style="bold")
        title.append(live.run_id or "(starting)")
        title.append(f"  [{live.status}]", style=_status_style(live.status))
        if live.spec:
            design = live.spec.get("adaptive")
            repeats = (
                f"adaptive {design.get('min_repeats')}..{design.get('max_repeats')}×"
                if isinstance(design, dict)
                else f"{live.repeat}×"
            )
            title.append(
                f"  {live.spec.get('profile', '')} · {live.spec.get('model', '')} · "
                f"{repeats} · concurrency "
                f"{live.spec.get('concurrency_setting') or live.spec.get('concurrency', '?')}",
                style="dim",
            )
        agent = self._agent_of(live)
        if agent:
            title.append(f"  · {agent}", style="bold")
        if live.run_dir is not None:
            title.append(f"\n→ {live.run_dir}", style="dim")  # where the run is written
            if live.followed:
                title.append("  (followed from its files: stop it where it runs)", style="dim")
        show_text(self.query_one("#run-title", Label), title)
        bar = self.query_one("#run-progress", ProgressBar)
        if live.total and (bar.total, bar.progress) != (live.total, live.done):
            bar.update(total=live.total, progress=live.done)
        eta = live.eta_seconds()
        show_text(
            self.query_one("#run-eta", Label),
            Text(
                f" {live.done}/{live.total}  elapsed {format_seconds(live.elapsed_seconds)}"
                f"  ETA {format_seconds(eta) if not live.finished else 'done'}"
            ),
        )
        show_text(self.query_one("#run-counters", Static), _counters(live))
        self._draw_grid(live)
        self._draw_log(live)

    def _agent_of(self, live: LiveRun) -> str:
        """The run's agent and client version, from its manifest once it has one (read once
        per run: a few hundred bytes)."""
        if live.run_dir is None:
            return str(live.spec.get("agent") or "")
        known = self._agents.get(live.run_dir)
        if known is None:
            known = self._agents[live.run_dir] = agent_label(live.run_dir, live.spec)
        return known

    def _draw_grid(self, live: LiveRun) -> None:
        grid = self.query_one("#run-grid", AttemptGrid)
        if not live.task_ids:
            return
        width = live.grid_width
        if self._grid_run != live.run_id or grid.repeat < width:
            grid.set_run(live.task_ids, width)
            self._grid_run = live.run_id
        grid.update_cells(live.cells.copy())  # a snapshot: the engine thread may be inserting

    def _followed(self, live: LiveRun) -> AttemptKey | None:
        """Following: stay on the attempt shown while it runs, then move to the newest active
        one (hundreds run at once: switching on every event would be unreadable flicker)."""
        for key in (self._log_key, live.last_active, live.last_started):
            if key is not None and live.cells.get(key) in ("running", "retrying"):
                return key
        return live.last_active or live.last_started

    def _draw_log(self, live: LiveRun) -> None:
        key = self._followed(live) if self.follow else self.selected
        log = self.query_one("#run-log", RunLog)
        if key != self._log_key:
            log.clear()
            self._log_key = key
            self._log_seen = 0
            self._commands_calls = self._commands_shown = 0
            heading = "log — no attempt yet" if key is None else f"log — {key[0]} #{key[1]}"
            if self.follow and key is not None:
                heading += " (following newest; f)"
            show_text(self.query_one("#run-log-title", Label), Text(heading))
        if key is None:
            return
        lines, self._log_seen = live.new_log_lines(key, self._log_seen)
        if lines:
            log.write_lines(lines)
        calls = live.call_counts.get(key, 0)
        # The builtin agent's turn log says its tool calls already; a client's does not.
        client = live.spec.get("agent") not in (None, "builtin")
        if client and calls > self._commands_calls and live.run_dir is not None:
            self._commands_calls = calls
            self.read_commands(live, key)

    @work(thread=True, exclusive=True, group="run-commands", exit_on_error=False, name="commands")
    def read_commands(self, live: LiveRun, key: AttemptKey) -> None:
        """The tool calls the attempt's client made so far, from the proxy's recording
        (``analysis.trajectory``): its own log (stderr, a result at the end) does not say."""
        from driftdesk.analysis.trajectory import trajectory_from_run

        assert live.run_dir is not None
        try:
            trajectory = trajectory_from_run(live.run_dir, key[0], key[1], row={}, calls=[])
        except (OSError, ValueError):
            return
        if trajectory is None or trajectory.source != "recording":
            return
        # Every try in order (an earlier try's commands were shown while it ran), each ended
        # by a line saying what ended it: the list only grows as the attempt goes on.
        commands: list[str] = []
        for earlier in trajectory.earlier_tries:
            commands += _calls_of(earlier.steps)
            commands.append(
                f"— try {earlier.number} ended ({earlier.ended_by or 'ended'}): its workspace "
                "discarded, the next try starts afresh"
            )
        commands += _calls_of(trajectory.steps)
        self.post_message(CommandsRead(live, key, commands))

    @on(CommandsRead)
    def _commands_read(self, message: CommandsRead) -> None:
        if message.live is not self.live or message.key != self._log_key:
            return
        fresh = message.commands[self._commands_shown :]
        if not fresh:
            return
        self._commands_shown = len(message.commands)
        lines: list[str] = []
        for command in fresh:
            first, *rest = printable(command, keep_newlines=True).split("\n")
            lines.append(first if command.startswith(("$ ", "— ")) else f"→ {first}")
            lines.extend(f"  {line}" for line in rest)
        self.query_one("#run-log", RunLog).write_lines(lines)

    # -- events / actions ----------------------------------------------------------------------
    @on(AttemptGrid.Picked)
    def _picked(self, event: AttemptGrid.Picked) -> None:
        self.follow = False
        self.selected = event.key
        self._drawn_version = -1
        self.redraw()

    def action_follow(self) -> None:
        self.follow = True
        self._drawn_version = -1
        self.redraw()

    def action_launch(self) -> None:
        def launched(spec: Any) -> None:
            if spec is not None:
                self.show_run(self.workbench.start_run(spec))

        demo = self.workbench.demo_profile
        self.app.push_screen(
            LaunchScreen(self.workbench.out_dir, self.workbench.runs_dirs, [demo] if demo else []),
            launched,
        )

    def action_cancel_run(self) -> None:
        live = self.live
        if live is None or live.finished:
            self.notify("no running run to cancel", severity="warning")
            return
        if live.followed:
            self.notify(
                f"{live.run_id} was started elsewhere: stop it where it runs (Ctrl-C there)",
                severity="warning",
                markup=False,
            )
            return

        def answered(yes: bool | None) -> None:
            if yes and self.workbench.cancel_run(live):
                self.notify(f"cancelling {live.run_id or live.label}…")

        self.app.push_screen(
            ConfirmScreen(
                f"Cancel {live.run_id or live.label}?",
                "Running attempts are stopped; finished ones are kept and the run is marked "
                "interrupted (resume it from the Volatility screen: u).",
                yes="Cancel run",
            ),
            answered,
        )

    def action_cycle(self, step: int) -> None:
        runs = self.workbench.live_runs
        if not runs:
            return
        index = runs.index(self.live) if self.live in runs else 0
        self.show_run(runs[(index + step) % len(runs)])

    def action_volatility(self) -> None:
        live = self.live
        if live is not None and live.run_dir is not None:
            self.workbench.show_volatility(live.run_dir)
        else:
            self.app.switch_mode("volatility")

    # -- live control (reruns/run_control.py: the run's channel, whichever process runs it) ----
    def _controllable(self) -> LiveRun | None:
        live = self.live
        if live is None or live.finished or live.run_dir is None:
            self.notify("no live run to control", severity="warning")
            return None
        return live

    def action_pause(self) -> None:
        live = self._controllable()
        if live is not None:
            self.send_control(live, None, not live.stats.paused)

    def action_concurrency(self, step: int) -> None:
        live = self._controllable()
        if live is not None:
            now = live.stats.concurrency or int(live.spec.get("concurrency") or 1)
            self.send_control(live, max(1, now + step), None)

    def action_concurrency_auto(self) -> None:
        live = self._controllable()
        if live is not None:
            self.send_control(live, "auto", None)

    @work(thread=True, group="run-control", exit_on_error=False, name="run control")
    def send_control(
        self, live: LiveRun, concurrency: int | str | None, pause: bool | None
    ) -> None:
        """Hand the change to the run (it may run in another process) and say what it did."""
        from driftdesk.reruns.concurrency import parse_concurrency
        from driftdesk.reruns.run_control import ControlRefused, ControlRequest, send_request

        assert live.run_dir is not None
        setting = parse_concurrency(concurrency) if concurrency is not None else None
        try:
            row = send_request(live.run_dir, ControlRequest(setting, pause, by="workbench"))
        except ControlRefused as exc:
            self.app.call_from_thread(self.notify, str(exc), severity="warning", markup=False)
            return
        said = f"{row.get('change')}: concurrency {row.get('setting')}, limit {row.get('limit')}"
        self.app.call_from_thread(self.notify, said, markup=False)

    def palette_commands(self) -> list[PaletteCommand]:
        commands = [
            PaletteCommand("run: launch", "Open the launch form", self.action_launch),
            PaletteCommand(
                "run: pause or unpause new attempts",
                "Start no new attempts (those in flight finish), or start them again",
                self.action_pause,
            ),
            PaletteCommand(
                "run: concurrency +1",
                "One more attempt and model call at once",
                lambda: self.action_concurrency(1),
            ),
            PaletteCommand(
                "run: concurrency -1",
                "One attempt and model call fewer at once",
                lambda: self.action_concurrency(-1),
            ),
            PaletteCommand(
                "run: concurrency auto",
                "Give the concurrency back to the controller (it follows the provider's limit)",
                self.action_concurrency_auto,
            ),
            PaletteCommand("run: cancel", "Interrupt the shown run", self.action_cancel_run),
            PaletteCommand(
                "run: follow newest", "Follow the newest attempt's log", self.action_follow
            ),
        ]
        for live in self.workbench.live_runs:
            commands.append(
                PaletteCommand(
                    f"run: show {live.run_id or live.label}",
                    f"{live.status}, {live.done}/{live.total}",
                    lambda live=live: self.show_run(live),  # type: ignore[misc]
                )
            )
        return commands


def show_text(widget: Static, text: Text) -> None:
    """Show ``text`` in ``widget`` at the cost of a repaint of that widget alone: nothing when
    it is unchanged, and a layout of the screen only when its height changes or its width
    follows its text (a layout arranges every widget of the screen again: on each tick of a
    big live run that took the app's time from key presses). Give live widgets a fixed width."""
    if widget.content == text:
        return
    height = widget.content_size.height
    widget.update(text, layout=False)
    widget.clear_cached_dimensions()
    width = widget.content_size.width
    auto_width = widget.styles.width is not None and widget.styles.width.is_auto  # fits its text
    if (
        auto_width
        or not width
        or widget.get_content_height(widget.size, widget.app.size, width) != height
    ):
        widget.refresh(layout=True)


def _calls_of(steps: list[Any]) -> list[str]:
    """The tool calls of ``steps`` (model turns), each as it reads (``action_text``)."""
    return [
        call_text(name, arguments)
        for step in steps
        if step.kind == "model"
        for name, arguments in step.tool_calls
    ]


def agent_label(run_dir: Path, spec: dict[str, Any]) -> str:
    """``codex 0.171.0``, ``builtin (driftdesk 0.1.0)``…: the run's agent and client, from its
    manifest (``analysis.agent_identity``), or the agent kind alone."""
    try:
        manifest = read_manifest(Path(run_dir))
    except (OSError, ValueError):
        manifest = None
    if not isinstance(manifest, dict):
        return str(spec.get("agent") or "")
    try:
        from driftdesk.analysis.agent_identity import agent_identity
    except ImportError:  # before the identity core: the kind the manifest has
        return str(manifest.get("agent") or spec.get("agent") or "")
    return printable(str(agent_identity(manifest).label), keep_newlines=False)


def _status_style(status: str) -> str:
    return {
        "running": "bold cyan",
        "completed": "bold green",
        "interrupted": "bold yellow",
        "failed": "bold red",
    }.get(status, "dim")


def _counters(live: LiveRun) -> Text:
    text = Text()
    parts: list[tuple[str, str]] = [
        (f"running {live.running}", "cyan"),
        (f"passed {live.by_outcome.get('pass', 0)}", "green"),
        (f"failed {live.by_outcome.get('fail', 0)}", "red"),
    ]
    link = live.by_outcome.get("link_error", 0)
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(live.link_errors.copy().items()))
    parts.append((f"link errors {link}" + (f" ({kinds})" if kinds else ""), "magenta"))
    harness = live.by_outcome.get("harness_error", 0)
    if harness:
        parts.append((f"harness errors {harness}", "bright_red"))
    parts.append((f"retries {live.retries}", "yellow"))
    stats = live.stats
    started_as = str(live.spec.get("concurrency_setting") or live.spec.get("concurrency") or "")
    moving = stats.concurrency_setting.startswith("auto") or (
        stats.concurrency_setting and stats.concurrency_setting != started_as
    )
    if stats.concurrency and (moving or stats.rate_limit_episodes):
        # (a fixed run's concurrency is in the title: here only when it moves)
        # The limit now, as the controller (auto) or a retune set it; whether new attempts
        # are held; the provider's rate-limit episodes so far.
        setting = stats.concurrency_setting or str(live.spec.get("concurrency_setting") or "")
        auto = " auto" if setting.startswith("auto") else ""
        episodes = (
            f", {stats.rate_limit_episodes} rate-limit episodes"
            if stats.rate_limit_episodes
            else ""
        )
        parts.append((f"concurrency {stats.concurrency}{auto}{episodes}", "bold"))
    if stats.paused:
        parts.append(("PAUSED: no new attempts (p)", "bold yellow"))
    if live.stats.model_mismatches:
        # answers from another model than the one asked for (a gateway routing elsewhere)
        parts.append((f"model mismatches {live.stats.model_mismatches}", "bold magenta"))
    parts.append((f"calls {live.calls}", ""))
    parts.append((f"tokens {live.tokens:,}", ""))
    parts.append((f"cost {live.cost_text or '…'}", ""))
    for i, (part, style) in enumerate(parts):
        if i:
            text.append("  │  ", style="dim")
        text.append(part, style=style)
    if live.spec.get("executor") == "ray":
        # One line for the cluster: attempts running per node, and where its dashboard is.
        per_node = sorted(live.running_per_node.copy().items())
        text.append("\nray nodes: ", style="dim")
        text.append("  ".join(f"{node} {count}" for node, count in per_node) or "none busy")
        text.append(f"  │  dashboard {live.spec.get('ray_dashboard') or '(none)'}", style="dim")
    if live.adaptive is not None:
        text.append("\n")
        text.append_text(adaptive_lines(live.adaptive))
    if live.error:
        text.append(f"\n{live.error}", style="bold red")
    return text


OPEN_TASKS_SHOWN = 6


def adaptive_lines(progress: AdaptiveProgress) -> Text:
    """The target's progress (CI width now vs target, attempts vs budget), then which tasks
    are still open and why (the first few; the count of the rest)."""
    from driftdesk.reruns.progress import adaptive_headline

    text = Text()
    text.append("adaptive: ", style="bold")
    text.append(adaptive_headline(progress))
    if progress.open_tasks:
        items = list(progress.open_tasks.items())
        shown = ", ".join(f"{printable(task)} ({why})" for task, why in items[:OPEN_TASKS_SHOWN])
        more = f" … +{len(items) - OPEN_TASKS_SHOWN}" if len(items) > OPEN_TASKS_SHOWN else ""
        text.append("\nopen: ", style="dim")
        text.append(shown + more)
    return text
