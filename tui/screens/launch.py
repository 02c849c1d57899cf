"""The launch form: profile, suite, agent (driftdesk's own, a command template, or the real
Claude Code / Codex CLI), repeat, concurrency, timeout, sample, and only-failed /
only-volatile from an earlier run. Returns a ``reruns.engine.RunSpec``."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from driftdesk.tui.screens.base import ForwardsWorkerFailures

AGENT_CHOICES = [
    ("built-in agent (driftdesk answers through the API)", "builtin"),
    ("command template (your harness)", "command"),
    ("Claude Code (claude -p, headless, fresh workspace)", "claude-code"),
    ("Codex CLI (codex exec, headless, fresh workspace)", "codex"),
]


@dataclass
class LaunchChoices(Message):
    profiles: list[str]
    suites: list[str]


class LaunchScreen(ForwardsWorkerFailures, ModalScreen[Any]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="launch.cancel"),
        Binding("ctrl+s", "launch", "Launch", id="launch.go"),
    ]

    def __init__(self, out_dir: Path, earlier_runs: list[tuple[str, Path]]) -> None:
        super().__init__()
        self._out_dir = out_dir
        self._earlier_runs = earlier_runs

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="form"):
            yield Label("Launch a run", id="dialog-title")
            with VerticalScroll():
                yield Label("Profile")
                yield Select[str]([], id="profile", prompt="(loading profiles)")
                yield Label("Suite: a built-in name or a suite JSONL path")
                yield Input("basic", id="suite")
                yield Label("Agent")
                yield Select(AGENT_CHOICES, value="builtin", allow_blank=False, id="agent")
                yield Label("Command template (for the command agent)")
                yield Input("", id="command", placeholder="my-agent --task {task_id} …")
                with Horizontal(classes="row"):
                    with Vertical():
                        yield Label("Repeat")
                        yield Input("5", id="repeat", type="integer")
                    with Vertical():
                        yield Label("Concurrency")
                        yield Input("4", id="concurrency", type="integer")
                    with Vertical():
                        yield Label("Timeout (s)")
                        yield Input("120", id="timeout", type="number")
                    with Vertical():
                        yield Label("Sample (tasks)")
                        yield Input("", id="sample", type="integer", placeholder="all")
                yield Label("Only tasks from an earlier run")
                with Horizontal(classes="row"):
                    yield Select(
                        [
                            ("all tasks", "all"),
                            ("only failed", "failed"),
                            ("only volatile", "volatile"),
                        ],
                        value="all",
                        allow_blank=False,
                        id="only",
                    )
                    yield Select(
                        [(run_id, str(path)) for run_id, path in self._earlier_runs],
                        id="earlier",
                        prompt="earlier run",
                    )
            yield Label("", id="form-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Launch (ctrl+s)", variant="primary", id="launch")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.load_choices()

    @work(
        thread=True,
        exclusive=True,
        group="launch-choices",
        exit_on_error=False,
        name="loading profiles and suites",
    )
    def load_choices(self) -> None:
        from driftdesk.providers.profiles import ProfileStore

        suites: list[str] = []
        try:
            from driftdesk.reruns.suites import builtin_suites

            suites = list(builtin_suites())
        except ImportError:
            pass
        self.post_message(LaunchChoices(ProfileStore().names(), suites))

    @on(LaunchChoices)
    def _choices(self, message: LaunchChoices) -> None:
        select = self.query_one("#profile", Select)
        select.set_options([(name, name) for name in message.profiles])
        if message.profiles:
            select.value = "sandbox" if "sandbox" in message.profiles else message.profiles[0]
        else:
            select.prompt = "(no profiles: add one on the Profiles screen)"

    def _error(self, text: str) -> None:
        self.query_one("#form-error", Label).update(Text(text, style="bold red"))

    @on(Button.Pressed, "#launch")
    def action_launch(self) -> None:
        from driftdesk.reruns.engine import RunSpec

        profile = self.query_one("#profile", Select).value
        if not isinstance(profile, str):
            self._error("choose a profile")
            return
        values: dict[str, int | float | None] = {}
        for field_id, kind in (
            ("repeat", int),
            ("concurrency", int),
            ("timeout", float),
            ("sample", int),
        ):
            raw = self.query_one(f"#{field_id}", Input).value.strip()
            if not raw:
                values[field_id] = None
                continue
            try:
                number = kind(raw)
            except ValueError:
                self._error(f"{field_id} must be a number")
                return
            if number <= 0:
                self._error(f"{field_id} must be positive")
                return
            values[field_id] = number
        only = self.query_one("#only", Select).value
        earlier = self.query_one("#earlier", Select).value
        if only in ("failed", "volatile") and not isinstance(earlier, str):
            self._error(f"only {only}: choose the earlier run to take tasks from")
            return
        command = self.query_one("#command", Input).value.strip() or None
        agent = str(self.query_one("#agent", Select).value)
        if agent == "builtin" and command:
            agent = "command"  # a template typed in means the command agent
        if agent == "command" and not command:
            self._error("the command agent needs a command template")
            return
        from driftdesk.reruns.presets import PRESETS, PresetUnavailable

        if agent in PRESETS:
            try:
                PRESETS[agent].locate()
            except PresetUnavailable as exc:
                self._error(str(exc))
                return
            command = None
        spec = RunSpec(
            profile=profile,
            suite=self.query_one("#suite", Input).value.strip() or "basic",
            repeat=int(values["repeat"] or 5),
            concurrency=int(values["concurrency"] or 4),
            timeout_s=float(values["timeout"] or 120.0),
            sample=int(values["sample"]) if values["sample"] else None,
            only_failed=Path(str(earlier)) if only == "failed" else None,
            only_volatile=Path(str(earlier)) if only == "volatile" else None,
            out_dir=self._out_dir,
            agent=agent,  # type: ignore[arg-type]
            command=command,
        )
        self.dismiss(spec)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
