"""The command palette provider: the app's and the current screen's actions as `group: action`."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, cast

from textual.command import DiscoveryHit, Hit, Hits, Provider

from driftdesk.tui.screens.base import PaletteCommand, WorkbenchScreen

if TYPE_CHECKING:
    from driftdesk.tui.app import DriftdeskApp


class WorkbenchCommands(Provider):
    def _commands(self) -> list[PaletteCommand]:
        app = cast("DriftdeskApp", self.app)
        commands = list(app.palette_commands())
        # The palette is itself a screen; the screen it was opened over is the one below it.
        for screen in reversed(app.screen_stack):
            if isinstance(screen, WorkbenchScreen):
                commands.extend(screen.palette_commands())
                break
        return commands

    async def discover(self) -> Hits:
        for command in self._commands():
            yield DiscoveryHit(command.title, partial(command.callback), help=command.help)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for command in self._commands():
            score = matcher.match(command.title)
            if score > 0:
                yield Hit(
                    score,
                    matcher.highlight(command.title),
                    partial(command.callback),
                    help=command.help,
                )
