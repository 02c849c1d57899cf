"""The launch form: profile, suite, agent (driftdesk's own, a command template, or the real
Claude Code / Codex CLI), repeat, concurrency, timeout, sample, where attempts run (here or on
a Ray cluster), and only-failed / only-volatile from an earlier run. Returns a
``reruns.run_spec.RunSpec``."""

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
from textual.widgets import Button, Input, Label, Select, Static

from driftdesk.tui.screens.base import ForwardsWorkerFailures

AGENT_CHOICES = [
    ("built-in agent (driftdesk answers through the API)", "builtin"),
    ("command template (your harness)", "command"),
    ("Claude Code (claude -p, headless, fresh workspace)", "claude-code"),
    ("Codex CLI (codex exec, headless, fresh workspace)", "codex"),
]

# Lines of the dialog around its fields: border, title and its margin, the output folder (one
# line; more when it wraps), the error line, the buttons and their margin.
LAUNCH_CHROME_LINES = 11

REPEAT_CHOICES = [
    ("fixed: Repeat per task", "fixed"),
    ("adaptive (target →)", "adaptive"),
]

EXECUTOR_CHOICES = [
    ("here (this machine)", "local"),
    ("on a Ray cluster (address →)", "ray"),
]


@dataclass
class LaunchChoices(Message):
    profiles: list[tuple[str, str, bool]]  # (name, label, its endpoint answers)
    suites: list[str]
    earlier_runs: list[tuple[str, Path]]  # (run id, run dir), newest first


def endpoint_answers(base_url: str, timeout: float = 1.0) -> bool:
    """Whether something accepts a connection at the base URL's host and port (no request is
    sent, no key): enough to tell a live endpoint from one that is gone."""
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(base_url)
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "", port), timeout=timeout):
            return True
    except (OSError, ValueError):
        return False


class LaunchScreen(ForwardsWorkerFailures, ModalScreen[Any]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="launch.cancel"),
        Binding("ctrl+s", "launch", "Launch", id="launch.go"),
    ]

    def __init__(self, out_dir: Path, runs_dirs: list[Path], extra_profiles: Any = ()) -> None:
        super().__init__()
        self._out_dir = out_dir
        self._runs_dirs = list(runs_dirs)  # where the earlier runs are listed from
        self._extra_profiles = list(extra_profiles)  # the demo's in-memory profile

    def compose(self) -> ComposeResult:
        from driftdesk.reruns.run_spec import DEFAULT_CONCURRENCY

        with Vertical(id="dialog", classes="form"):
            yield Label("Launch a run", id="dialog-title")
            with VerticalScroll(id="launch-fields"):
                yield Label("Profile")
                # The Select replaces this once the profiles (and which answer) are known.
                yield Label("(loading profiles…)", id="profile-loading")
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
                        # a number, auto or auto:MIN-START-MAX (reruns/concurrency.py)
                        yield Input(
                            str(DEFAULT_CONCURRENCY),
                            id="concurrency",
                            placeholder="N or auto",
                            tooltip="attempts at once; auto: follow the provider's limit",
                        )
                    with Vertical():
                        yield Label("Timeout (s)")
                        yield Input("120", id="timeout", type="number")
                    with Vertical():
                        yield Label("Sample (tasks)")
                        yield Input("", id="sample", type="integer", placeholder="all")
                yield Label(
                    "Repeats: fixed, or adaptive — a first round of min, then each attempt where "
                    "it tells most, until the target (ci=5pp or volatile) holds or the budget ends"
                )
                with Horizontal(classes="row"):
                    yield Select(REPEAT_CHOICES, value="fixed", allow_blank=False, id="repeats")
                    yield Input("ci=5pp", id="target", placeholder="ci=5pp or volatile")
                    yield Input("2", id="min-repeats", type="integer", placeholder="min")
                    yield Input("20", id="max-repeats", type="integer", placeholder="max")
                    yield Input("", id="budget", type="integer", placeholder="budget (attempts)")
                yield Label("Where attempts run")
                with Horizontal(classes="row"):
                    yield Select(EXECUTOR_CHOICES, value="local", allow_blank=False, id="executor")
                    yield Input(
                        "auto", id="ray-address", placeholder="auto, HOST:PORT or ray://HOST:PORT"
                    )
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
                    # Filled once the runs are listed (their manifests read off the UI thread).
                    yield Select([], id="earlier", prompt="earlier run")
            # Static, not Label: a long folder wraps inside the dialog instead of running off it.
            yield Static(f"The run goes to {self._out_dir}", id="launch-where", markup=False)
            yield Label("", id="form-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Launch (ctrl+s)", variant="primary", id="launch")
                yield Button("Cancel (esc)", id="cancel")

    def on_mount(self) -> None:
        self.load_choices()
        self.on_resize()

    def on_resize(self) -> None:
        # The fields get what the screen has left after the title, the output folder, the
        # error line and the buttons, and scroll (Tab scrolls to the focused one); grown to
        # their own height they pushed the buttons and the last fields off an 80×24 screen.
        self.call_after_refresh(self._fit_fields)

    def _fit_fields(self) -> None:
        fields = self.query_one("#launch-fields", VerticalScroll)
        where = self.query_one("#launch-where", Static).outer_size.height  # a long folder wraps
        chrome = LAUNCH_CHROME_LINES + max(where - 1, 0)
        fields.styles.max_height = max(self.app.size.height - chrome, 4)

    @work(
        thread=True,
        exclusive=True,
        group="launch-choices",
        exit_on_error=False,
        name="loading profiles and suites",
    )
    def load_choices(self) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from driftdesk.providers.profiles import ProfileStore
        from driftdesk.reruns.run_facts import run_facts
        from driftdesk.reruns.suites import builtin_suites
        from driftdesk.rundir.catalog import discover_runs

        profiles = [*self._extra_profiles, *ProfileStore().all()]
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(endpoint_answers, [p.base_url for p in profiles]))
        choices = [
            (p.name, f"{p.name} · {p.model}" + ("" if alive else " · not answering"), alive)
            for p, alive in zip(profiles, answers, strict=True)
        ]
        earlier = [(run.run_id, run.path) for run in discover_runs(self._runs_dirs, run_facts())]
        self.post_message(LaunchChoices(choices, list(builtin_suites()), earlier))

    @on(LaunchChoices)
    async def _choices(self, message: LaunchChoices) -> None:
        # Preselect only a profile whose endpoint answers: never one that is gone.
        alive = [name for name, _, answers in message.profiles if answers]
        if not message.profiles:
            prompt = "no profiles: add one on the Profiles screen (1, then a)"
        elif not alive:
            prompt = "choose a profile (none answers right now)"
        else:
            prompt = "choose a profile"
        self.query_one("#earlier", Select).set_options(
            [(run_id, str(path)) for run_id, path in message.earlier_runs]
        )
        select: Select[str] = Select(
            [(label, name) for name, label, _ in message.profiles],
            prompt=prompt,
            id="profile",
            value=alive[0] if alive else Select.NULL,
        )
        loading = self.query_one("#profile-loading", Label)
        await loading.parent.mount(select, after=loading)  # type: ignore[union-attr]
        await loading.remove()
        select.focus()

    def _error(self, text: str) -> None:
        self.query_one("#form-error", Label).update(Text(text, style="bold red"))

    @on(Button.Pressed, "#launch")
    def action_launch(self) -> None:
        from driftdesk.reruns.run_spec import DEFAULT_CONCURRENCY, RunSpec

        loaded = self.query("#profile")  # absent while the profiles are still loading
        profile = loaded.first(Select).value if loaded else None
        if not isinstance(profile, str):
            self._error("choose a profile")
            return
        values: dict[str, int | float | None] = {}
        from driftdesk.reruns.concurrency import ConcurrencyError, parse_concurrency

        raw_concurrency = self.query_one("#concurrency", Input).value.strip()
        try:
            concurrency = parse_concurrency(raw_concurrency or str(DEFAULT_CONCURRENCY))
        except ConcurrencyError as exc:
            self._error(str(exc).replace("--concurrency", "concurrency"))
            return
        for field_id, kind in (
            ("repeat", int),
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
        from driftdesk.reruns.ray_executor import RaySettings, check_address

        executor = str(self.query_one("#executor", Select).value)
        address = self.query_one("#ray-address", Input).value.strip() or "auto"
        if executor == "ray":
            try:
                check_address(address)
            except ValueError as exc:
                self._error(str(exc).replace("--ray-address", "Ray address"))
                return
        if agent in PRESETS:
            if executor == "local":  # on Ray the nodes run the client: the run asks them
                try:
                    PRESETS[agent].locate()
                except PresetUnavailable as exc:
                    self._error(str(exc))
                    return
            command = None
        adaptive = None
        if self.query_one("#repeats", Select).value == "adaptive":
            adaptive = self._adaptive_design()
            if adaptive is None:
                return
        spec = RunSpec(
            adaptive=adaptive,
            profile=profile,
            suite=self.query_one("#suite", Input).value.strip() or "basic",
            repeat=int(values["repeat"] or 5),
            concurrency=concurrency,
            timeout_s=float(values["timeout"] or 120.0),
            sample=int(values["sample"]) if values["sample"] else None,
            only_failed=Path(str(earlier)) if only == "failed" else None,
            only_volatile=Path(str(earlier)) if only == "volatile" else None,
            out_dir=self._out_dir,
            agent=agent,  # type: ignore[arg-type]
            command=command,
            probe=True,
            executor="ray" if executor == "ray" else "local",
            ray=RaySettings(address=address),
        )
        self.dismiss(spec)

    def _adaptive_design(self) -> Any:
        """The form's adaptive design (an ``AdaptiveDesign``), or None after saying what is
        wrong, in the CLI's words."""
        from driftdesk.reruns.adaptive import AdaptiveDesign, DesignError

        numbers: dict[str, int | None] = {}
        for field_id in ("min-repeats", "max-repeats", "budget"):
            raw = self.query_one(f"#{field_id}", Input).value.strip()
            try:
                numbers[field_id] = int(raw) if raw else None
            except ValueError:
                self._error(f"{field_id} must be a whole number")
                return None
        try:
            return AdaptiveDesign.parse(
                self.query_one("#target", Input).value.strip() or "ci=5pp",
                min_repeats=numbers["min-repeats"] or 2,
                max_repeats=numbers["max-repeats"] or 20,
                budget_attempts=numbers["budget"],
            )
        except DesignError as exc:
            self._error(str(exc))
            return None

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
