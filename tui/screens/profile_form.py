"""Add or edit a provider profile; the key is typed masked and goes to the keyring only.

Extra headers are edited as ``Name: value`` lines. They are stored in the config file in plain
text, so a header that would carry the key (Authorization, x-api-key…) is refused: the key
belongs in the keyring field.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.screen import ModalScreen
from textual.widgets import Button, Checkbox, Input, Label, Select, TextArea

from driftdesk.providers.profiles import (
    AUTH_HEADERS,
    PROTOCOLS,
    Profile,
    ProfileError,
    is_credential_header,
)
from driftdesk.tui.errors import plain_error
from driftdesk.tui.screens.base import ForwardsWorkerFailures

# RFC 9110 token characters.
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
TIERS = (("haiku_model", "Haiku"), ("sonnet_model", "Sonnet"), ("opus_model", "Opus"))
# The auth header choice: the protocol's default (stored as no choice) or one of AUTH_HEADERS.
DEFAULT_AUTH = "default"
AUTH_CHOICES = [("protocol's default", DEFAULT_AUTH)] + [
    ("bearer (Authorization)" if h == "bearer" else h, h) for h in AUTH_HEADERS
]
# Lines of the dialog around its fields: border, title, error line, buttons and their margins.
FORM_CHROME_LINES = 10


@dataclass
class ProfileFormResult:
    profile: Profile
    key: str | None  # None: leave the stored key as it is


@dataclass
class SaveFailed(Message):
    text: str


@dataclass
class Saved(Message):
    result: ProfileFormResult


def parse_headers(text: str) -> dict[str, str]:
    """``Name: value`` lines (blank lines skipped) as a dict; ProfileError names the bad line."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, colon, value = line.partition(":")
        name, value = name.strip(), value.strip()
        if not colon or not _HEADER_NAME_RE.match(name):
            raise ProfileError(f"header line {number}: expected 'Name: value', got {line!r}")
        if is_credential_header(name):  # its value would land in config.toml in plain text
            raise ProfileError(
                f"header line {number}: {name} would carry the key in the config file; "
                "type the key in the API key field (it goes to the OS keyring)"
            )
        headers[name] = value
    return headers


def format_headers(headers: dict[str, str]) -> str:
    return "".join(f"{name}: {value}\n" for name, value in headers.items())


class ProfileFormScreen(ForwardsWorkerFailures, ModalScreen[ProfileFormResult | None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="profile_form.cancel"),
        Binding("ctrl+s", "save", "Save", id="profile_form.save"),
    ]

    def __init__(self, profile: Profile | None = None) -> None:
        super().__init__()
        self._profile = profile

    def compose(self) -> ComposeResult:
        p = self._profile
        editing = p is not None
        # The fields scroll; the error line and Save/Cancel stay below them, always on screen.
        with Vertical(id="dialog", classes="form"):
            yield Label(f"Edit profile {p.name}" if p else "Add a profile", id="dialog-title")
            with VerticalScroll(id="form-fields"):
                yield from self._fields(p, editing)
            yield Label("", id="form-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Save (ctrl+s)", variant="primary", id="save")
                yield Button("Cancel (esc)", id="cancel")

    def _fields(self, p: Profile | None, editing: bool) -> ComposeResult:
        if True:  # (one indentation level, as the fields were laid out before)
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("Name")
                    yield Input(
                        p.name if p else "", id="name", disabled=editing, placeholder="my-provider"
                    )
                with Vertical():
                    yield Label("Protocol")
                    yield Select(
                        [(name, name) for name in PROTOCOLS],
                        value=p.protocol if p else "openai",
                        allow_blank=False,
                        id="protocol",
                    )
            yield Label("Base URL")
            yield Input(
                p.base_url if p else "", id="base_url", placeholder="https://api.example.com/v1"
            )
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("Model")
                    yield Input(p.model if p else "", id="model", placeholder="model-id")
                with Vertical():
                    yield Label("API key (keyring; empty keeps it)")
                    # Never prefilled: the stored key is not shown, not even masked, here.
                    yield Input(
                        "",
                        id="key",
                        password=True,
                        placeholder="sk-…",
                        disabled=bool(p and p.no_key),
                    )
            with Horizontal(classes="row"):
                with Vertical():
                    yield Label("Key sent as")
                    yield Select(
                        AUTH_CHOICES,
                        value=(p.auth_header if p and p.auth_header else DEFAULT_AUTH),
                        allow_blank=False,
                        id="auth_header",
                    )
                with Vertical():
                    yield Label("Keyless (local vLLM, Ollama)")
                    yield Checkbox("no key stored or sent", bool(p and p.no_key), id="no_key")
            yield Label("Claude Code tier models (anthropic; empty: the main model)")
            with Horizontal(classes="row"):
                for field_name, tier in TIERS:
                    with Vertical():
                        yield Label(tier, classes="tier-label")
                        yield Input(
                            (getattr(p, field_name) or "") if p else "",
                            id=field_name,
                            placeholder=tier.lower() + " model",
                        )
            yield Label("Extra headers (one 'Name: value' per line; not for the key)")
            yield TextArea(
                format_headers(p.headers) if p else "",
                id="headers",
                soft_wrap=False,
                show_line_numbers=False,
            )
            yield Label("Notes")
            yield Input(p.notes if p else "", id="notes", placeholder="free text")

    def on_mount(self) -> None:
        # The scrolling dialog would take the focus first: start in the first field to type.
        self.query_one("#base_url" if self._profile else "#name", Input).focus()
        self.on_resize()

    def on_resize(self) -> None:
        # The fields get what the screen has left after the title, error line and buttons.
        fields = self.query_one("#form-fields", VerticalScroll)
        fields.styles.max_height = max(self.app.size.height - FORM_CHROME_LINES, 4)

    @on(Checkbox.Changed, "#no_key")
    def _keyless_changed(self, event: Checkbox.Changed) -> None:
        key = self.query_one("#key", Input)
        key.disabled = event.value
        if event.value:
            key.value = ""  # a keyless profile stores no key: a typed one is not kept around

    def _value(self, widget_id: str) -> str:
        return self.query_one(f"#{widget_id}", Input).value.strip()

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        protocol = self.query_one("#protocol", Select).value
        auth = self.query_one("#auth_header", Select).value
        no_key = self.query_one("#no_key", Checkbox).value
        error = self.query_one("#form-error", Label)
        try:
            headers = parse_headers(self.query_one("#headers", TextArea).text)
            profile = Profile(
                name=self._value("name"),
                protocol=str(protocol),
                base_url=self._value("base_url"),
                model=self._value("model"),
                haiku_model=self._value("haiku_model") or None,
                sonnet_model=self._value("sonnet_model") or None,
                opus_model=self._value("opus_model") or None,
                headers=headers,
                notes=self._value("notes"),
                auth_header=None if auth == DEFAULT_AUTH else str(auth),
                no_key=no_key,
            )
            profile.validate()
        except ProfileError as exc:
            error.update(Text(str(exc), style="bold red"))
            return
        key = None if no_key else (self._value("key") or None)
        error.update("saving…")
        self.save(ProfileFormResult(profile, key))

    @work(thread=True, exclusive=True, exit_on_error=False, name="saving the profile")
    def save(self, result: ProfileFormResult) -> None:
        """Save as ``driftdesk profile add`` does: a typed key needs a usable keyring first, and
        without one nothing is written and the form (with the typed key) stays open."""
        from driftdesk.providers.errors import EXPECTED
        from driftdesk.providers.keys import backend, set_key
        from driftdesk.providers.profiles import ProfileStore

        try:
            store = ProfileStore()
            if self._profile is None and store.exists(result.profile.name):
                raise ProfileError(f"a profile named {result.profile.name!r} exists already")
            if result.key:
                backend()  # refuse before anything is written
                set_key(result.profile.name, result.key)
            store.save(result.profile)
        except EXPECTED as exc:
            self.post_message(SaveFailed(plain_error(exc)))
            return
        self.post_message(Saved(result))

    @on(SaveFailed)
    def _save_failed(self, message: SaveFailed) -> None:
        text = Text(message.text, style="bold red")
        text.append("\nNothing was saved.", style="red")
        self.query_one("#form-error", Label).update(text)

    @on(Saved)
    def _saved(self, message: Saved) -> None:
        self.dismiss(message.result)

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
