"""Textual's Footer, rebuilt only when what it shows changes.

Textual's Footer recomposes on every bindings update: each focus move and each screen switch
mounts a fresh widget per shown key, and styling those widgets cost tens of milliseconds a time
on a 2-core machine, inside the key press that moved focus (bench_tui_live: tab, shift+tab and
the screen keys were the slowest presses). Most focus moves change nothing the footer shows (the
grid's and the log's own bindings are hidden), so this footer compares what it would show with
what it shows and skips the rebuild when they are the same.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer


class BindingsFooter(Footer):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._shown: tuple[Any, ...] | None = None

    @staticmethod
    def _what_to_show(screen: Screen[Any]) -> tuple[Any, ...]:
        """Everything of the active bindings that Footer.compose reads."""
        active = screen.active_bindings
        palette = active.get(screen.app.COMMAND_PALETTE_BINDING)
        return (
            tuple(
                (
                    binding.key,
                    binding.action,
                    binding.description,
                    screen.app.get_key_display(binding),
                    None if binding.group is None else binding.group.description,
                    None if binding.group is None else binding.group.compact,
                    enabled,
                    tooltip,
                )
                for _node, binding, enabled, tooltip in active.values()
                if binding.show
            ),
            None if palette is None else (palette[1].key, palette[1].description, palette[2]),
        )

    def bindings_changed(self, screen: Screen[Any]) -> None:
        if screen.app.app_focus and self.is_attached and screen is self.screen:
            shown = self._what_to_show(screen)
            if shown == self._shown:
                return
            self._shown = shown
        super().bindings_changed(screen)
