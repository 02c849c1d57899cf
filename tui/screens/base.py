"""What every workbench screen shares: header, footer, help text and palette commands."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from textual.screen import Screen
from textual.worker import Worker

if TYPE_CHECKING:
    from driftdesk.tui.app import DriftdeskApp


# Textual's default "⭘" is missing from common monospace fonts (a tofu box in screenshots and
# many terminals); "≡" is in all of them and reads as "menu" (a click opens the palette).
HEADER_ICON = "≡"


@dataclass(frozen=True)
class PaletteCommand:
    title: str  # "group: action"
    help: str
    callback: Callable[[], Any]


class ForwardsWorkerFailures:
    """Worker state messages do not bubble: screens hand them to the app's one handler."""

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        handler = getattr(self.app, "on_worker_state_changed", None)  # type: ignore[attr-defined]
        if handler is not None and self is not self.app:  # type: ignore[attr-defined]
            handler(event)


class WorkbenchScreen(ForwardsWorkerFailures, Screen[None]):
    HELP_INTRO = ""
    SCREEN_NAME = ""

    def on_mount(self) -> None:
        # (Textual also calls the subclasses' on_mount.) The demo says on every screen that its model is simulated.
        demo = getattr(self.app, "demo", False)
        self.sub_title = (
            f"{self.SCREEN_NAME} — SIMULATED model (demo)" if demo else self.SCREEN_NAME
        )

    @property
    def workbench(self) -> DriftdeskApp:
        return cast("DriftdeskApp", self.app)

    def palette_commands(self) -> list[PaletteCommand]:
        """Commands this screen offers in the command palette (besides the app's own)."""
        return []
