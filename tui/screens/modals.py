"""Small modal dialogs: confirm (with a diff or text body), pick one of several, help."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import ClassVar

from rich.syntax import Syntax
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from driftdesk.tui.widgets.tables import fill_table


class ConfirmScreen(ModalScreen[bool]):
    """Ask yes/no about an action, showing what it will do (e.g. a unified diff)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, title: str, body: str = "", *, diff: bool = False, yes: str = "Yes") -> None:
        super().__init__()
        self._heading = title
        self._body = body
        self._diff = diff
        self._yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self._heading, id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                if self._diff:
                    yield Static(
                        Syntax(self._body or "(no changes)", "diff", theme="ansi_dark"),
                        id="dialog-text",
                    )
                else:
                    yield Static(Text(self._body), id="dialog-text")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self._yes} (y)", variant="primary", id="yes")
                yield Button("Cancel (n)", id="no")

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class PickScreen(ModalScreen[str | None]):
    """Pick one option (Enter) or cancel (Escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="pick.cancel")
    ]

    def __init__(self, title: str, options: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self._heading = title
        self._options = options

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self._heading, id="dialog-title")
            yield OptionList(*[Option(label, id=value) for value, label in self._options])

    @on(OptionList.OptionSelected)
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_cancel(self) -> None:
        self.dismiss(None)


HELP_CHROME_LINES = 6  # the dialog's border and padding (4), its title and the title's margin


class HelpScreen(ModalScreen[None]):
    """Every key of the current screen and of the app, with its id and what it does."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,f1,q", "dismiss", "Close", id="help.close")
    ]

    def __init__(self, intro: str, bindings: Iterable[tuple[str, str, str]]) -> None:
        super().__init__()
        self._intro = intro
        self._key_rows = list(bindings)

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="wide"):
            yield Label("Help — keys (ctrl+p opens the command palette)", id="dialog-title")
            # Intro and keys scroll together (Down, PageDown, End): on a short screen most of
            # the keys were below the dialog's edge, out of reach.
            with VerticalScroll(id="help-body"):
                yield Static(self._intro, id="help-intro", markup=False)  # intros quote keys
                table: DataTable[str] = DataTable(id="help-table", cursor_type="none")
                table.can_focus = False
                fill_table(
                    table,
                    [("key", "key"), ("does", "does"), ("binding id", "id")],
                    [(str(i), row) for i, row in enumerate(self._key_rows)],
                )
                # Every row (the stylesheet caps the table; the body scrolls instead).
                table.styles.max_height = len(self._key_rows) + 1
                yield table

    def on_mount(self) -> None:
        self.query_one("#help-body", VerticalScroll).focus()
        self.on_resize()

    def on_resize(self) -> None:
        body = self.query_one("#help-body", VerticalScroll)
        body.styles.height = "auto"  # as tall as intro and keys, up to what the screen has
        # The dialog may take 90 % of the screen; its border, padding and title take the rest.
        body.styles.max_height = max(int(self.app.size.height * 0.9) - HELP_CHROME_LINES, 3)

    async def action_dismiss(self, result: None = None) -> None:
        self.dismiss(None)


class NameScreen(ModalScreen[str | None]):
    """Show what an action will do and ask for a name (Enter accepts, Escape cancels)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="name.cancel")
    ]

    def __init__(self, title: str, body: str, default: str = "", yes: str = "OK") -> None:
        super().__init__()
        self._heading = title
        self._body = body
        self._default = default
        self._yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Label(self._heading, id="dialog-title")
            with VerticalScroll(id="dialog-body"):
                yield Static(Text(self._body), id="dialog-text")
            yield Label("Name")
            yield Input(self._default, id="name")
            yield Label("", id="form-error")
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self._yes} (enter)", variant="primary", id="yes")
                yield Button("Cancel (esc)", id="no")

    def on_mount(self) -> None:
        self.query_one("#name", Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#yes")
    def _accept(self) -> None:
        name = self.query_one("#name", Input).value.strip()
        if not name:
            self.query_one("#form-error", Label).update(Text("type a name", style="bold red"))
            return
        self.dismiss(name)

    @on(Button.Pressed, "#no")
    def action_cancel(self) -> None:
        self.dismiss(None)
