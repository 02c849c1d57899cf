"""What every workbench screen shares: header, footer, help text and palette commands."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.text import Text
from textual import events
from textual.binding import ActiveBinding
from textual.message import Message
from textual.reactive import Reactive
from textual.screen import Screen
from textual.types import NoActiveAppError
from textual.widget import Widget
from textual.worker import NoActiveWorker, Worker, get_current_worker

from driftdesk.terminal import printable

if TYPE_CHECKING:
    from driftdesk.tui.app import DriftdeskApp


# Textual's default "⭘" is missing from common monospace fonts (a tofu box in screenshots and
# many terminals); "≡" is in all of them and reads as "menu" (a click opens the palette).
HEADER_ICON = "≡"
FOOTER_FIRST = ("app.help", "app.quit")


def task_title(task_id: str, run_dir: Path) -> Text:
    """``task <id>  in  <run>``: the first line of a screen about one task of a run."""
    return Text.assemble(
        ("task ", "dim"),
        (printable(task_id, keep_newlines=False), "bold"),
        ("  in  ", "dim"),
        run_dir.name,
    )


@dataclass(frozen=True)
class PaletteCommand:
    title: str  # "group: action"
    help: str
    callback: Callable[[], Any]


@dataclass
class Loaded(Message):
    """What a loading worker found. A newer run of an exclusive worker cancels the older one,
    but a cancelled thread worker runs on to its end and still posts what it read, which may be
    older than what the newer run posted: handlers drop a ``stale`` one."""

    def __post_init__(self) -> None:
        super().__post_init__()
        try:
            self._worker: Worker[Any] | None = get_current_worker()
        except NoActiveWorker:  # posted outside a worker: nothing can replace it
            self._worker = None

    @property
    def stale(self) -> bool:
        """Its worker was cancelled (replaced, or its screen closed) before it arrived."""
        return self._worker is not None and self._worker.is_cancelled


class ForwardsWorkerFailures:
    """Worker state messages do not bubble: screens hand them to the app's one handler."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        handler = getattr(self.app, "on_worker_state_changed", None)  # type: ignore[attr-defined]
        if handler is not None and self is not self.app:  # type: ignore[attr-defined]
            handler(event)


class WorkbenchScreen(ForwardsWorkerFailures, Screen[None]):
    # Textual repaints the whole screen when its focus moves; the widgets whose focus style
    # changes repaint themselves. On the Run screen of a big run the whole-screen repaint made
    # tab one of the slowest keys (bench_tui_live).
    focused: Reactive[Widget | None] = Reactive(None, repaint=False)
    HELP_INTRO = ""
    SCREEN_NAME = ""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Textual re-parses the whole stylesheet and restyles every widget of the app when a
        # screen whose CSS generation is older than the app's is shown, and a new screen starts
        # at -1: so the first visit to each screen paid for it (see
        # ``DriftdeskApp._build_screens``). A new screen is styled by the current stylesheet as
        # it mounts, so it starts at the app's generation; a theme change later still
        # restyles it.
        with contextlib.suppress(NoActiveAppError):
            self._css_update_count = self.app._css_update_count
        self._app_style_state: tuple[Any, ...] | None = None  # as the screen last left

    def on_mount(self) -> None:
        # (Textual also calls the subclasses' on_mount.) The demo says on every screen that its model is simulated.
        demo = getattr(self.app, "demo", False)
        self.sub_title = (
            f"{self.SCREEN_NAME} — SIMULATED model (demo)" if demo else self.SCREEN_NAME
        )

    def on_screen_suspend(self) -> None:
        self._app_style_state = self._app_wide_style_state()

    def on_screen_resume(self, event: events.ScreenResume) -> None:
        # Textual restyles every widget of a resumed screen (then ~40 ms for the Run screen of
        # a big run, bench_tui_live) to catch up with what changed app-wide while it was away:
        # app focus and the theme restyle only the screen in front. A widget's own class
        # change restyles it as it happens. So when nothing app-wide changed, it is skipped.
        # (This handler runs before Textual's, which is the screen base class's.)
        if self._app_style_state == self._app_wide_style_state():
            event.refresh_styles = False
        # ScreenResume follows the first mount too, and the app builds its screens before they
        # are shown (``DriftdeskApp._build_screens``): a screen reads what it shows (keys from
        # the keyring, run dirs) only when it comes to the front.
        if self.is_current:
            self.came_to_front()

    def _app_wide_style_state(self) -> tuple[Any, ...]:
        """What app-wide a screen's styles depend on: the stylesheet's generation, the theme,
        the app's classes and pseudo-classes (focus, dark, ansi…)."""
        app = self.app
        return (app._css_update_count, app.theme, app.classes, app.pseudo_classes)

    @property
    def active_bindings(self) -> dict[str, ActiveBinding]:
        """Textual's, with Help and Quit first: the footer cuts what does not fit at the
        right, and at 80 columns a screen's own keys left no room for the two a newcomer
        needs (Help lists every key)."""
        bindings = super().active_bindings
        first = {k: v for k, v in bindings.items() if v.binding.id in FOOTER_FIRST}
        return {**first, **{k: v for k, v in bindings.items() if k not in first}}

    def came_to_front(self) -> None:
        """Read what the screen shows; called each time it comes to the front."""

    @property
    def workbench(self) -> DriftdeskApp:
        return cast("DriftdeskApp", self.app)

    def palette_commands(self) -> list[PaletteCommand]:
        """Commands this screen offers in the command palette (besides the app's own)."""
        return []
