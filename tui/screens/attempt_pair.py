"""Two attempts of one task side by side, aligned by step of their action sequences (tool
calls, then the final answer), the first divergence marked and unfolded with each side's tool
result, link events where they hit. Below 100 columns the two sides stack.

A command reads as the client ran it: decoded once from the call's JSON (``action_text``),
then escaped once (``terminal.printable``) into ``Text`` (never read as markup); wrapped, six
lines at most until Enter unfolds the step."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.geometry import Size
from textual.widget import Widget
from textual.widgets import Header, Label, Static

from driftdesk.terminal import printable
from driftdesk.tui.action_text import action_text, diff_summary
from driftdesk.tui.screens.base import (
    HEADER_ICON,
    Loaded,
    PaletteCommand,
    WorkbenchScreen,
    task_title,
)
from driftdesk.tui.screens.modals import PickScreen
from driftdesk.tui.widgets.footer import BindingsFooter

DIVERGENCE_MARK = "◆"
OUTCOME_STYLES = {"pass": "green", "fail": "red", "link_error": "magenta"}
STACK_BELOW = 100  # columns: narrower, the two sides stack
COMMAND_LINES = 6  # an action's lines shown until Enter unfolds its step
RESULT_LINES = 3  # a tool result's lines shown at the divergence until Enter
# Lines Codex puts around a command's output; the preview leaves them out (Enter shows all).
BOOKKEEPING = ("Chunk ID: ", "Wall time: ", "Original token count: ")
FILE_LINES = 12  # check output and diff lines shown per side with o
NUMBER_WIDTH = 5  # "◆ 12 "
SIDE_LABEL_WIDTH = 11  # "A #12 fail "


@dataclass
class Side:
    """One attempt as the screen shows it: its explain view and what its steps said."""

    view: Any  # analysis.explain.AttemptView
    texts: list[str] = field(default_factory=list)  # each action as it reads, raw
    results: list[str | None] = field(default_factory=list)  # each call's tool result, raw
    check: list[str] | None = None  # the check's output, None: no check ran
    diff: list[str] | None = None  # the workspace diff, None: no workspace

    @property
    def name(self) -> str:
        return f"attempt {self.view.attempt} ({self.view.outcome})"


@dataclass
class PairLoaded(Loaded):
    explanation: Any  # analysis.explain.TaskExplanation of exactly these two attempts
    sides: tuple[Side, Side] | None = None
    outcomes: dict[int, str] = field(default_factory=dict)  # every attempt of the task
    error: str | None = None


def load_side(run_dir: Path, task_id: str, view: Any) -> Side:
    """The texts and tool results of ``view`` 's actions, from its trajectory, and its check
    output and workspace diff."""
    from driftdesk.analysis.attempt_detail import attempt_detail
    from driftdesk.analysis.trajectory import load_trajectory

    side = Side(view)
    steps = getattr(view, "steps", None)  # the final try's steps, as explain read them
    if steps is None:
        trajectory = load_trajectory(run_dir, task_id, view.attempt) if view.source else None
        steps = trajectory.steps if trajectory is not None else []
    calls_seen: dict[int, int] = {}  # model step -> its calls so far
    for action in view.actions:
        turn = steps[action.step] if action.step < len(steps) else None
        said = turn.text if turn is not None and action.kind != "call" else None
        side.texts.append(action_text(action, said))
        result = None
        if action.kind == "call":
            position = calls_seen.get(action.step, 0)
            calls_seen[action.step] = position + 1
            result = _result_of(steps, action.step, position)
        side.results.append(result)
    detail = attempt_detail(run_dir, task_id, view.attempt)
    side.check, side.diff = detail.check_output, detail.diff
    return side


def _result_of(steps: list[Any], model_step: int, position: int) -> str | None:
    """The tool result answering the ``position`` -th call of the model turn at
    ``model_step``: the results after that turn come back in the order of its calls."""
    found = 0
    for step in steps[model_step + 1 :]:
        if step.kind == "model":
            break
        if step.kind == "tool_result":
            if found == position:
                return str(step.text)
            found += 1
    return None


def _lines(text: str, width: int, style: str = "") -> list[Text]:
    """``text`` (raw) escaped once and wrapped at ``width``, its own newlines kept."""
    out: list[Text] = []
    for line in printable(text, keep_newlines=True).expandtabs(4).split("\n"):
        piece = Text(line, style=style)
        out.extend(piece.wrap(_CONSOLE, max(width, 8), overflow="fold") or [Text("")])
    return out


def _capped(lines: list[Text], limit: int | None) -> list[Text]:
    if limit is None or len(lines) <= limit:
        return lines
    rest = len(lines) - limit
    more = Text(f"… {rest} more line{'s' if rest != 1 else ''} (Enter)", style="dim italic")
    return [*lines[:limit], more]


def _side_lines(
    side: Side | None, step: int, width: int, *, result: bool, whole: bool
) -> list[Text]:
    if side is None:
        return []
    lines: list[Text] = []
    for event in side.view.events:
        if event.before == step:
            lines.append(Text(f"⚡ {event.phrase}", style="bold magenta"))
    if step >= len(side.texts):
        if step == len(side.texts):
            lines.append(Text("(ended)", style="dim"))
        return lines
    limit = None if whole else COMMAND_LINES
    lines += _capped(_lines(side.texts[step], width), limit)
    shown = side.results[step] if step < len(side.results) else None
    if (result or whole) and shown is not None:
        if not whole:  # the preview: what the command said, not the client's bookkeeping
            shown = "\n".join(
                line for line in shown.split("\n") if not line.startswith(BOOKKEEPING)
            )
        body = _lines(shown.strip("\n") or "(no output)", width - 2, style="green")
        for n, line in enumerate(_capped(body, None if whole else RESULT_LINES)):
            lines.append(Text("→ " if n == 0 else "  ", style="green") + line)
    return lines


class _Measure:
    """A console for wrapping text before it is drawn (the app's own is not thread-bound,
    but a step is laid out from a handler; any console wraps the same)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(width=400, color_system=None, legacy_windows=False)


_CONSOLE = _Measure().console


class PairStep(Widget, can_focus=True):
    """One step of the two attempts: their actions beside (or above) each other."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "unfold", "Unfold", id="pair.unfold"),
        Binding("up", "move(-1)", "Previous step", id="pair.previous", show=False),
        Binding("down", "move(1)", "Next step", id="pair.next", show=False),
    ]

    def __init__(self, step: int, sides: tuple[Side, Side], divergence: bool) -> None:
        super().__init__(
            id=f"step-{step}", classes="pair-step -divergence" if divergence else "pair-step"
        )
        self.step = step
        self.sides = sides
        self.divergence = divergence
        self.whole = False
        self.stacked = False

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        return len(self.build(width).plain.split("\n"))

    def render(self) -> Text:
        return self.build(self.content_size.width)

    def build(self, width: int) -> Text:
        """The step's lines at ``width`` columns (each one already wrapped to fit)."""
        width = max(width, 20)
        a, b = self.sides
        mark = DIVERGENCE_MARK if self.divergence else " "
        style = "bold yellow" if self.divergence else "dim"
        result = self.divergence
        if self.stacked:
            text = Text(f"{mark} step {self.step + 1}", style=style)
            if self.divergence:
                text.append("  first divergence", style="bold yellow")
            inner = width - SIDE_LABEL_WIDTH
            for letter, side in (("A", a), ("B", b)):
                lines = _side_lines(side, self.step, inner, result=result, whole=self.whole)
                label = f"{letter} #{side.view.attempt} {side.view.outcome}"[: SIDE_LABEL_WIDTH - 1]
                for n, line in enumerate(lines or [Text("")]):
                    text.append("\n")
                    text.append(
                        (label if n == 0 else "").ljust(SIDE_LABEL_WIDTH),
                        style=OUTCOME_STYLES.get(str(side.view.outcome), "") if n == 0 else "",
                    )
                    text.append_text(line)
            return text
        left_width = (width - NUMBER_WIDTH - 3) // 2
        right_width = width - NUMBER_WIDTH - 3 - left_width
        left = _side_lines(a, self.step, left_width, result=result, whole=self.whole)
        right = _side_lines(b, self.step, right_width, result=result, whole=self.whole)
        text = Text()
        for n in range(max(len(left), len(right), 1)):
            if n:
                text.append("\n")
            number = f"{mark} {self.step + 1}" if n == 0 else ""
            text.append(number.ljust(NUMBER_WIDTH), style=style)
            piece = left[n].copy() if n < len(left) else Text("")
            piece.truncate(left_width, pad=True)
            text.append_text(piece)
            text.append(" │ ", style="dim")
            if n < len(right):
                text.append_text(right[n])
        return text

    def action_unfold(self) -> None:
        self.whole = not self.whole
        self.refresh(layout=True)

    def action_move(self, by: int) -> None:
        rows = list(self.screen.query(PairStep))
        index = rows.index(self) + by
        if 0 <= index < len(rows):
            rows[index].focus()


class AttemptPickScreen(PickScreen):
    """Pick the attempt for one side."""


class AttemptPairScreen(WorkbenchScreen):
    SCREEN_NAME = "Attempts side by side"
    HELP_INTRO = (
        "Two attempts of one task, step by step: each row is one action (a command as the "
        "client ran it, another tool call with its arguments, then the final answer), six "
        "lines at most until Enter unfolds it with its tool result. ◆ marks the first step "
        "where they differ, unfolded with both tool results; ⚡ lines are link events (a 429 "
        "and its retry, a 5xx, a timeout, a cut stream, another model) at the step they held "
        "up. Below 100 columns the sides stack. d goes to the divergence, o shows each side's "
        "check output and diff, a / b pick another attempt for a side, x swaps them."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back", id="pair.back"),
        Binding("d", "jump_to_divergence", "Divergence", id="pair.divergence"),
        Binding("o", "toggle_files", "Check & diff", id="pair.files"),
        Binding("a", "pick(0)", "Pick A", id="pair.pick_a"),
        Binding("b", "pick(1)", "Pick B", id="pair.pick_b"),
        Binding("x", "swap", "Swap sides", id="pair.swap"),
    ]

    def __init__(self, run_dir: Path, task_id: str, a: int, b: int) -> None:
        super().__init__()
        self.run_dir = run_dir
        self.task_id = task_id
        self.attempts = (a, b)
        self.divergence_step: int | None = None
        self.sides: tuple[Side, Side] | None = None
        self.outcomes: dict[int, str] = {}

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Vertical(id="pair-body"):
            yield Label(self._title(), id="pair-title")
            yield Static("comparing…", id="pair-summary")
            yield VerticalScroll(id="pair-steps")
            with VerticalScroll(id="pair-files-scroll") as scroll:
                scroll.display = False
                files = Static("", id="pair-files")
                files.display = False
                yield files
        yield BindingsFooter()

    def on_mount(self) -> None:
        self._set_stacked()
        self.load_pair()

    def on_resize(self) -> None:
        self._set_stacked()

    @property
    def stacked(self) -> bool:
        return self.app.size.width < STACK_BELOW

    def _set_stacked(self) -> None:
        for row in self.query(PairStep):
            if row.stacked != self.stacked:
                row.stacked = self.stacked
                row.refresh(layout=True)

    def _title(self) -> Text:
        a, b = self.attempts
        title = Text()
        for letter, attempt in (("A", a), ("B", b)):
            outcome = self.outcomes.get(attempt, "")
            if letter == "B":
                title.append("  ·  ", style="dim")
            title.append(f"{letter}: ", style="bold")
            title.append(
                f"attempt {attempt}" + (f" ({outcome})" if outcome else ""),
                style="bold " + OUTCOME_STYLES.get(outcome, ""),
            )
        title.append("  —  ", style="dim")
        title.append_text(task_title(self.task_id, self.run_dir))
        return title

    @work(thread=True, exclusive=True, group="pair", exit_on_error=False, name="comparing attempts")
    def load_pair(self) -> None:
        from driftdesk.analysis.attempts import task_attempts
        from driftdesk.analysis.explain import explain_task

        try:
            outcomes = {
                int(r["attempt"]): str(r.get("outcome"))
                for r in task_attempts(self.run_dir, self.task_id)
                if not r.get("superseded")
            }
            explanation = explain_task(self.run_dir, self.task_id, attempts=list(self.attempts))
            two = explanation.two
            sides = None
            if two is not None:
                sides = (
                    load_side(self.run_dir, self.task_id, two[0]),
                    load_side(self.run_dir, self.task_id, two[1]),
                )
        except (LookupError, OSError, ValueError) as exc:
            self.post_message(PairLoaded(None, error=str(exc)))
            return
        self.post_message(PairLoaded(explanation, sides, outcomes))

    @on(PairLoaded)
    async def _loaded(self, message: PairLoaded) -> None:
        if message.stale:
            return
        self.outcomes = message.outcomes or self.outcomes
        self.query_one("#pair-title", Label).update(self._title())
        summary = self.query_one("#pair-summary", Static)
        steps = self.query_one("#pair-steps", VerticalScroll)
        await steps.remove_children()
        if message.error is not None or message.sides is None:
            summary.update(Text(printable(message.error or "nothing to compare"), style="red"))
            self.sides = None
            return
        self.sides = a, b = message.sides
        divergence = message.explanation.two_divergence
        self.divergence_step = divergence.step if divergence is not None else None
        summary.update(self._summary())
        length = max(len(a.texts), len(b.texts))
        # One more row where a sequence ends after the other, or a link event hit the end.
        ends = any(e.before >= length for side in (a, b) for e in side.view.events)
        rows = [
            PairStep(i, (a, b), i == self.divergence_step)
            for i in range(length + (1 if ends else 0))
        ]
        for row in rows:
            row.stacked = self.stacked
        await steps.mount_all(rows)
        self._fill_files()
        self.call_after_refresh(self._show_divergence, False)

    def _summary(self) -> Text:
        assert self.sides is not None
        a, b = self.sides
        text = Text()
        if self.divergence_step is None:
            text.append(
                f"attempts {a.view.attempt} and {b.view.attempt} took the same actions",
                style="bold",
            )
        else:
            text.append(
                f"attempts {a.view.attempt} and {b.view.attempt} first diverge at step "
                f"{self.divergence_step + 1} ({DIVERGENCE_MARK}, d)",
                style="bold yellow",
            )
        text.append("\n")
        for letter, side in (("A", a), ("B", b)):
            view = side.view
            if letter == "B":
                text.append("   ")
            figures = [f"{len(view.actions)} actions", f"{view.turns} turns"]
            earlier = len(getattr(view, "earlier_tries", None) or [])
            if earlier:  # thrown away: never in these steps (the trajectory view shows them)
                figures.append(f"final try {view.try_number}, {earlier} earlier discarded")
            if view.tokens is not None:
                figures.append(f"{view.tokens} tok")
            if view.latency_ms:
                figures.append(f"{view.latency_ms / 1000:.1f} s")
            text.append(
                f"{letter} #{view.attempt} {view.outcome}",
                style="bold " + OUTCOME_STYLES.get(str(view.outcome), ""),
            )
            text.append(": " + ", ".join(figures), style="dim")
        return text

    def _fill_files(self) -> None:
        assert self.sides is not None
        text = Text()
        for n, side in enumerate(self.sides):
            if n:
                text.append("\n\n")
            letter = "AB"[n]
            text.append(
                f"{letter}: {side.name}",
                style="bold " + OUTCOME_STYLES.get(str(side.view.outcome), ""),
            )
            text.append("\n── check output ──\n", style="bold")
            if side.check is None:
                text.append("(no check ran)", style="dim")
            else:
                text.append(printable("\n".join(side.check[-FILE_LINES:]) or "(empty)"))
            text.append("\n── workspace diff ──\n", style="bold")
            if side.diff is None:
                text.append("(no workspace)", style="dim")
            elif not side.diff:
                text.append("(no change to the workspace)", style="dim")
            else:
                text.append(printable("  ".join(diff_summary(side.diff))), style="bold")
                changed = [
                    line
                    for line in side.diff
                    if line.startswith(("+", "-")) and not line.startswith(("+++", "---"))
                ]
                for line in changed[:FILE_LINES]:
                    text.append(
                        "\n" + printable(line, keep_newlines=False),
                        style="green" if line.startswith("+") else "red",
                    )
        self.query_one("#pair-files", Static).update(text)

    def _show_divergence(self, say: bool) -> None:
        steps = self.query_one("#pair-steps", VerticalScroll)
        rows = list(self.query(PairStep))
        if self.divergence_step is None or self.divergence_step >= len(rows):
            if rows:
                rows[0].focus(scroll_visible=False)
                steps.scroll_home(animate=False)
            if say and self.sides is not None:
                self.notify("these attempts took the same actions", markup=False)
            return
        row = rows[self.divergence_step]
        row.focus(scroll_visible=False)
        # The row's place in the list (its margin-less top), not a region the last layout
        # may not have settled yet.
        steps.scroll_to(y=row.virtual_region.y, animate=False, immediate=True)
        if say:
            self.notify(
                f"first divergence: step {self.divergence_step + 1}, at the top",
                markup=False,
            )

    def focused_step(self) -> int | None:
        focused = self.focused
        return focused.step if isinstance(focused, PairStep) else None

    def action_jump_to_divergence(self) -> None:
        steps = self.query_one("#pair-steps", VerticalScroll)
        if not steps.display:
            self.action_toggle_files()
        self._show_divergence(True)

    def action_toggle_files(self) -> None:
        files = self.query_one("#pair-files", Static)
        steps = self.query_one("#pair-steps", VerticalScroll)
        files.display = not files.display
        self.query_one("#pair-files-scroll").display = files.display
        steps.display = not files.display

    def action_pick(self, side: int) -> None:
        if not self.outcomes:
            self.notify("the attempts are still being read", severity="warning")
            return
        others = self.attempts[1 - side]
        options = [
            (
                str(attempt),
                f"attempt {attempt} ({outcome})"
                + ("  ← the other side" if attempt == others else ""),
            )
            for attempt, outcome in sorted(self.outcomes.items())
        ]

        def picked(value: str | None) -> None:
            if value is None:
                return
            chosen = list(self.attempts)
            chosen[side] = int(value)
            self.attempts = (chosen[0], chosen[1])
            self.load_pair()

        self.app.push_screen(AttemptPickScreen(f"Attempt for side {'AB'[side]}", options), picked)

    def action_swap(self) -> None:
        self.attempts = (self.attempts[1], self.attempts[0])
        self.load_pair()

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand(
                "attempts: jump to the divergence",
                "Scroll to the first step where the two attempts differ",
                self.action_jump_to_divergence,
            ),
            PaletteCommand(
                "attempts: check output and diff",
                "Each side's check output and workspace diff",
                self.action_toggle_files,
            ),
            PaletteCommand(
                "attempts: pick side A", "Another attempt for side A", lambda: self.action_pick(0)
            ),
            PaletteCommand(
                "attempts: pick side B", "Another attempt for side B", lambda: self.action_pick(1)
            ),
            PaletteCommand("attempts: swap sides", "Swap the two attempts", self.action_swap),
        ]
