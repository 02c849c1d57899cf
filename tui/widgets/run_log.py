"""The Run screen's log pane: Textual's ``Log``, whose writes repaint the pane alone."""

from __future__ import annotations

from textual.geometry import Size
from textual.reactive import Reactive
from textual.widgets import Log


class RunLog(Log):
    """A ``Log`` whose new lines do not lay out the whole screen again.

    Textual's ``virtual_size`` asks for a layout of the screen when it changes, and a ``Log``
    changes it on every write: during a big live run the Run screen was laid out again on each
    tick (~3 a second, up to 34 ms each, ``bench_tui_live.py``). The pane's size is its CSS's
    (``1fr``, never ``auto``), so its lines change only what it draws and its scrollbars:
    those are updated here, as a layout would (a scrollbar that appears or goes still asks
    for a layout, through Textual's own reactive for it; ``Log`` always shows both).
    """

    virtual_size: Reactive[Size] = Reactive(Size(0, 0), layout=False)

    def watch_virtual_size(self, size: Size) -> None:
        # What a layout does for a scrolling widget whose virtual size changed (Textual's
        # ``Widget._size_updated``): the scrollbars' sizes, the scroll offsets kept in range.
        self._scroll_update(size)
