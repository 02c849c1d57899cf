"""Add or edit a provider profile; the key is typed masked and goes to the keyring only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, Select

from providers.profiles import PROTOCOLS, Profile, ProfileError


@dataclass
class ProfileFormResult:
    profile: Profile
    key: str | None  # None: leave the stored key as it is


class ProfileFormScreen(ModalScreen[ProfileFormResult | None]):
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
        with Vertical(id="dialog", classes="form"):
            yield Label(f"Edit profile {p.name}" if p else "Add a profile", id="dialog-title")
            yield Label("Name")
            yield Input(p.name if p else "", id="name", disabled=editing, placeholder="my-provider")
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
            yield Label("Model")
            yield Input(p.model if p else "", id="model", placeholder="model-id")
            yield Label("API key (stored in the OS keyring; leave empty to keep the current one)")
            yield Input("", id="key", password=True, placeholder="sk-…")
            yield Label("", id="form-error")
            with Horizontal(id="dialog-buttons"):
                yield Button("Save (ctrl+s)", variant="primary", id="save")
                yield Button("Cancel (esc)", id="cancel")

    @on(Button.Pressed, "#save")
    def action_save(self) -> None:
        protocol = self.query_one("#protocol", Select).value
        base = self._profile
        profile = Profile(
            name=self.query_one("#name", Input).value.strip(),
            protocol=str(protocol),
            base_url=self.query_one("#base_url", Input).value.strip(),
            model=self.query_one("#model", Input).value.strip(),
            haiku_model=base.haiku_model if base else None,
            sonnet_model=base.sonnet_model if base else None,
            opus_model=base.opus_model if base else None,
            headers=dict(base.headers) if base else {},
            notes=base.notes if base else "",
        )
        try:
            profile.validate()
        except ProfileError as exc:
            self.query_one("#form-error", Label).update(Text(str(exc), style="bold red"))
            return
        key = self.query_one("#key", Input).value.strip() or None
        self.dismiss(ProfileFormResult(profile, key))

    @on(Button.Pressed, "#cancel")
    def action_cancel(self) -> None:
        self.dismiss(None)
