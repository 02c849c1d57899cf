"""Two attempts of one task side by side, aligned by step of their action sequences (tool
calls, then the final answer), the first divergence marked, link events where they hit."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import DataTable, Header, Label, Static

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

DIVERGENCE_MARK = "◆"
ACTION_WIDTH = 70
OUTCOME_STYLES = {"pass": "green", "fail": "red", "link_error": "magenta"}


@dataclass
class PairLoaded(Loaded):
    explanation: Any  # analysis.explain.TaskExplanation of exactly these two attempts
    error: str | None = None


def pair_rows(
    a: Any, b: Any, divergence: Any
) -> tuple[list[tuple[str, tuple[Any, ...]]], str | None]:
    """Table rows for two ``AttemptView`` s: one row per action index, a link event's row
    before the action it came before; and the key of the first divergence's row."""
    rows: list[tuple[str, tuple[Any, ...]]] = []
    split = divergence.step if divergence is not None else None
    marked: str | None = None
    length = max(len(a.actions), len(b.actions))
    for index in range(length + 1):
        for side, view in ((0, a), (1, b)):
            for n, event in enumerate(e for e in view.events if e.before == index):
                cells: list[Any] = ["", "", ""]
                cells[side + 1] = Text(f"⚡ {event.phrase}", style="bold magenta")
                rows.append((f"event-{side}-{index}-{n}", tuple(cells)))
        if index == length:
            break
        here = index == split
        style = "bold yellow" if here else ""
        number = Text(f"{DIVERGENCE_MARK if here else ' '} {index + 1}", style=style)
        rows.append(
            (
                f"step-{index}",
                (number, _action(a.actions, index, style), _action(b.actions, index, style)),
            )
        )
        if here:
            marked = f"step-{index}"
    return rows, marked


def _action(actions: list[Any], index: int, style: str) -> Text:
    if index >= len(actions):
        return Text("(ended)", style="dim")
    return Text(printable(actions[index].shown(ACTION_WIDTH), keep_newlines=False), style=style)


class AttemptPairScreen(WorkbenchScreen):
    SCREEN_NAME = "Attempts side by side"
    HELP_INTRO = (
        "Two attempts of one task, step by step: each row is one action (a tool call with its "
        "arguments, then the final answer). ◆ marks the first step where they differ; ⚡ rows are "
        "link events (a 429 and its retry, a 5xx, a timeout, a cut stream, another model) at "
        "the step they held up."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="pair.back"),
        Binding("d", "jump_to_divergence", "Divergence", id="pair.divergence"),
        Binding("x", "swap", "Swap sides", id="pair.swap"),
    ]

    def __init__(self, run_dir: Path, task_id: str, a: int, b: int) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.task_id = task_id
        self.attempts = (a, b)
        self.divergence_key: str | None = None

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Vertical(id="pair-body"):
            yield Label(task_title(self.task_id, self.run_dir), id="pair-title")
            yield Static("comparing…", id="pair-summary")
            table: DataTable[Any] = DataTable(id="pair-steps", cursor_type="row")
            yield table
        yield BindingsFooter()

    def on_mount(self) -> None:
        self.load_pair()

    @work(thread=True, exclusive=True, group="pair", exit_on_error=False, name="comparing attempts")
    def load_pair(self) -> None:
        from driftdesk.analysis.explain import explain_task

        try:
            explanation = explain_task(self.run_dir, self.task_id, attempts=list(self.attempts))
        except (LookupError, OSError, ValueError) as exc:
            self.post_message(PairLoaded(None, str(exc)))
            return
        self.post_message(PairLoaded(explanation))

    @on(PairLoaded)
    def _loaded(self, message: PairLoaded) -> None:
        if message.stale:
            return
        summary = self.query_one("#pair-summary", Static)
        table = self.query_one("#pair-steps", DataTable)
        if message.error is not None or message.explanation.two is None:
            summary.update(Text(message.error or "nothing to compare", style="red"))
            return
        explanation = message.explanation
        a, b = explanation.two
        columns = [("step", "step")] + [
            (f"attempt {v.attempt} ({v.outcome})", side) for side, v in (("a", a), ("b", b))
        ]
        rows, self.divergence_key = pair_rows(a, b, explanation.two_divergence)
        fill_table(table, columns, rows)
        lines = Text(printable(explanation.two_sentence(), keep_newlines=False), style="bold")
        for view in (a, b):
            lines.append(
                f"\nattempt {view.attempt}: {view.outcome}, {len(view.actions)} actions, "
                f"{view.turns} model turns"
                + (f", {view.tokens} tokens" if view.tokens is not None else "")
                + (f", {view.latency_ms / 1000:.1f} s" if view.latency_ms else ""),
                style=OUTCOME_STYLES.get(str(view.outcome), ""),
            )
        summary.update(lines)
        self.action_jump_to_divergence()
        table.focus()

    def action_jump_to_divergence(self) -> None:
        table = self.query_one("#pair-steps", DataTable)
        if self.divergence_key is None:
            if table.row_count:
                self.notify("these attempts took the same actions")
            return
        table.move_cursor(row=table.get_row_index(self.divergence_key))

    def action_swap(self) -> None:
        self.attempts = (self.attempts[1], self.attempts[0])
        self.load_pair()

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "attempts: jump to the divergence",
                "Move to the first step where the two attempts differ",
                self.action_jump_to_divergence,
            ),
            PaletteCommand("attempts: swap sides", "Swap the two attempts", self.action_swap),
        ]
