"""One attempt's trajectory: a step a line (model turn, tool result, user turn, link event),
unfolded on Enter, searched with ``/``. Built from ``analysis.steps.Trajectory``; the widget
only draws what a worker loaded."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.widgets import Input, OptionList
from textual.widgets.option_list import Option

from driftdesk.terminal import printable

if TYPE_CHECKING:
    from driftdesk.analysis.steps import Step, Trajectory

FOLDED_WIDTH = 100  # characters of a step's text on its one line
KIND_LABELS = {"model": "model", "tool_result": "tool ", "user": "user ", "link_event": "link "}
KIND_STYLES = {"model": "bold cyan", "tool_result": "green", "user": "yellow", "link_event": ""}


def _one_line(text: str, width: int = FOLDED_WIDTH) -> str:
    flat = printable(" ".join(text.split()), keep_newlines=False)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def step_line(step: Step) -> Text:
    """The folded form: kind, what the step did, and its figures."""
    line = Text(f"{step.index:>3} ", style="dim")
    if step.kind == "link_event":
        kind = step.detail.get("kind") or "error"
        if step.detail.get("absorbed"):  # held at the proxy and sent again: the agent never saw it
            wait = step.detail.get("wait_s") or 0.0
            line.append(f"⚡ {kind} absorbed, waited {wait:.1f} s", style="magenta")
            return line
        retried = "retried" if step.detail.get("retried") else "not retried"
        line.append(f"⚡ {kind} ({retried})", style="bold magenta")
        return line
    line.append(KIND_LABELS.get(step.kind, step.kind) + " ", style=KIND_STYLES.get(step.kind, ""))
    parts = [f"{name}({_one_line(args, 40)})" for name, args in step.tool_calls]
    said = _one_line(step.text) if step.text.strip() else ""
    if said:
        parts.insert(0, repr(said) if step.kind == "model" else said)
    line.append(" · ".join(parts) or "(empty)")
    figures = []
    if step.tokens is not None:
        figures.append(f"{step.tokens} tok")
    if step.latency_ms is not None:
        figures.append(f"{step.latency_ms:.0f} ms")
    if figures:
        line.append("  " + " · ".join(figures), style="dim")
    return line


def step_unfolded(step: Step) -> Text:
    """The unfolded form: every line of the text, each tool call whole, and the details."""
    text = step_line(step)
    if step.text.strip():
        text.append("\n" + printable(step.text, keep_newlines=True))
    for name, args in step.tool_calls:
        text.append(f"\n→ {name}({printable(args, keep_newlines=False)})", style="cyan")
    for key, value in step.detail.items():
        if value not in (None, "", [], {}):
            text.append(f"\n  {key}: {printable(str(value), keep_newlines=False)}", style="dim")
    if step.served_model:
        text.append(f"\n  served by {step.served_model}", style="dim")
    return text


def try_line(earlier: Any) -> Text:
    """An earlier try folded: "▸ try 1 — 429 at call 3, discarded (4 steps)"."""
    line = Text("  ▸ ", style="dim")
    line.append(printable(str(earlier.summary), keep_newlines=False), style="yellow")
    return line


def try_unfolded(earlier: Any) -> Text:
    """An earlier try unfolded: its steps, a line each."""
    text = Text("  ▾ ", style="dim")
    text.append(printable(str(earlier.summary), keep_newlines=False), style="yellow")
    for step in earlier.steps:
        text.append("\n    ")
        text.append_text(step_line(step))
    return text


class TrajectoryView(Vertical):
    """A trajectory's steps with a search box (hidden until ``/``)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "toggle_step", "Unfold", id="trajectory.toggle"),
        Binding("slash", "search", "Search steps", id="trajectory.search"),
        Binding("n", "next_match", "Next match", id="trajectory.next_match"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.steps: list[Step] = []
        self.unfolded: set[int] = set()
        self.tries: dict[int, Any] = {}  # earlier tries by number (analysis.steps.Try)
        self.unfolded_tries: set[str] = set()
        self.query_text = ""

    def compose(self) -> ComposeResult:
        search = Input(
            placeholder="search the steps (Enter: next match, Esc: close)", id="trajectory-search"
        )
        search.display = False
        yield search
        yield OptionList(id="trajectory-steps")

    @property
    def options(self) -> OptionList:
        return self.query_one("#trajectory-steps", OptionList)

    def show(self, trajectory: Trajectory | None, empty: str) -> None:
        self.steps = list(trajectory.steps) if trajectory is not None else []
        self.unfolded.clear()
        self.unfolded_tries.clear()
        self.tries = {}
        options = self.options
        options.clear_options()
        if not self.steps:
            options.add_option(Option(Text(empty, style="dim"), disabled=True))
            return
        assert trajectory is not None
        header = Text(
            f"{trajectory.source}: {len(self.steps)} steps, "
            f"{len(trajectory.model_turns)} model turns"
            + (f"  ({'; '.join(trajectory.problems)})" if trajectory.problems else ""),
            style="dim",
        )
        tries = list(getattr(trajectory, "earlier_tries", []) or [])
        number = getattr(trajectory, "try_number", None)
        if tries and number is not None:
            header.append(f"  — its final try, try {number}; earlier tries folded above it")
        if not getattr(trajectory, "tries_known", True):
            header.append("  (recorded before tries were kept: read as one try)")
        options.add_option(Option(header, disabled=True))
        self.tries = {t.number: t for t in tries}
        # Earlier tries first, each folded to one line (Enter unfolds): thrown away with
        # their workspace, they never enter the steps below nor the divergence.
        options.add_options(Option(try_line(t), id=f"try-{t.number}") for t in tries)
        options.add_options(Option(step_line(s), id=str(s.index)) for s in self.steps)
        options.highlighted = 1 + len(tries) if self.steps else 1

    def _selected_id(self) -> str | None:
        highlighted = self.options.highlighted
        if highlighted is None:
            return None
        return self.options.get_option_at_index(highlighted).id

    def _selected(self) -> Step | None:
        option_id = self._selected_id()
        if option_id is None or option_id.startswith("try-"):
            return None
        return self.steps[int(option_id)]

    def action_toggle_step(self) -> None:
        option_id = self._selected_id()
        if option_id is not None and option_id.startswith("try-"):
            number = int(option_id[len("try-") :])
            if option_id in self.unfolded_tries:
                self.unfolded_tries.discard(option_id)
                prompt = try_line(self.tries[number])
            else:
                self.unfolded_tries.add(option_id)
                prompt = try_unfolded(self.tries[number])
            self.options.replace_option_prompt(option_id, prompt)
            return
        step = self._selected()
        if step is None:
            return
        if step.index in self.unfolded:
            self.unfolded.discard(step.index)
            prompt = step_line(step)
        else:
            self.unfolded.add(step.index)
            prompt = step_unfolded(step)
        self.options.replace_option_prompt(str(step.index), prompt)

    @on(OptionList.OptionSelected, "#trajectory-steps")
    def _selected_by_enter(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_toggle_step()

    def action_search(self) -> None:
        search = self.query_one("#trajectory-search", Input)
        search.display = True
        search.focus()

    @on(Input.Submitted, "#trajectory-search")
    def _search(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_text = event.value.strip().lower()
        self.action_next_match()

    def on_key(self, event: Any) -> None:
        search = self.query_one("#trajectory-search", Input)
        if event.key == "escape" and search.has_focus:
            event.stop()
            search.display = False
            self.options.focus()

    def matches(self) -> list[int]:
        """The steps whose text, tool calls or details hold the search text."""
        if not self.query_text:
            return []
        return [s.index for s in self.steps if self.query_text in step_unfolded(s).plain.lower()]

    def action_next_match(self) -> None:
        found = self.matches()
        if not found:
            if self.query_text:
                self.notify(f"no step holds {self.query_text!r}", severity="warning")
            return
        current = self._selected()
        after = [i for i in found if current is None or i > current.index]
        target = after[0] if after else found[0]
        self.options.highlighted = self.options.get_option_index(str(target))
        self.options.focus()
