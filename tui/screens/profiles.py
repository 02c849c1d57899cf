"""Profiles: what each provider profile points at, where it is active, and switching it in.

Everything that reads or writes configs or the keyring runs in thread workers that post a
message back; only the message handlers touch widgets.

It stays whole (past 600 lines): one screen with one state (the profile table, its selection,
the detail pane) that every worker's message handler updates; each worker and its handler are
a pair that reads best side by side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import DataTable, Header, Static

from driftdesk.tui.screens.base import HEADER_ICON, Loaded, PaletteCommand, WorkbenchScreen
from driftdesk.tui.screens.modals import ConfirmScreen, PickScreen
from driftdesk.tui.screens.profile_form import ProfileFormResult, ProfileFormScreen
from driftdesk.tui.widgets.footer import BindingsFooter
from driftdesk.tui.widgets.tables import fill_table

COLUMNS = ("profile", "protocol", "base URL", "model", "key", "active on", "drift")
NARROW_COLUMNS = ("profile", "model", "base URL", "active on", "drift")
NARROW_WIDTH = 120
NARROW_URL_WIDTH = 22
# Which targets can use a profile of each protocol: Claude Code speaks Anthropic's API; Codex
# and the .env variables (OPENAI_BASE_URL) speak OpenAI's.
TARGETS_BY_PROTOCOL = {
    "anthropic": (("claude", "user"), ("claude", "project"), ("claude", "local")),
    # Codex ignores a project's model_provider (see targets.plan_switch): user scope only.
    "openai": (("codex", "user"), ("env", "file")),
}
TARGETS: tuple[tuple[str, str], ...] = (
    ("claude", "Claude Code (~/.claude/settings.json)"),
    ("codex", "Codex (~/.codex/config.toml)"),
    ("env", "env file (./.env)"),
)


@dataclass
class ProfileRow:
    name: str
    protocol: str
    base_url: str
    model: str
    masked_key: str
    active_on: str
    drift: str
    active_files: tuple[str, ...] = ()  # "claude (user): /home/me/.claude/settings.json"
    extra: str = ""  # tier models, headers (names only), notes


@dataclass
class ProfilesLoaded(Loaded):
    rows: list[ProfileRow]
    note: str = ""


@dataclass
class DetailReady(Message):
    title: str
    body: str | Text


@dataclass
class HistoryLoaded(Loaded):
    target: str
    history: Any  # providers.restore.FileHistory


@dataclass
class RestorePlanned(Message):
    plan: Any  # providers.restore.RestorePlan


@dataclass
class ImportPreview(Message):
    source: str
    preview: str
    default: str


@dataclass
class SwitchPlanned(Message):
    profile: str
    target: str
    plan: Any
    diff: str


class ProfilesScreen(WorkbenchScreen):
    SCREEN_NAME = "Profiles"
    HELP_INTRO = (
        "Provider profiles live in driftdesk's config.toml; keys live only in the OS keyring and "
        "are shown masked. Switching a profile into Claude Code, Codex or a .env file edits that "
        "file in place (after showing the diff) and keeps everything else in it. History (h) "
        "lists every write driftdesk made to a file and restores it byte for byte."
    )
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("a", "add", "Add", id="profiles.add", tooltip="Add a profile (key typed masked)"),
        Binding("e", "edit", "Edit", id="profiles.edit", tooltip="Edit the selected profile"),
        Binding("s", "switch", "Switch", id="profiles.switch", tooltip="Switch a target to it"),
        Binding("t", "doctor", "Test", id="profiles.doctor", tooltip="Test connection + doctor"),
        Binding("i", "import", "Import", id="profiles.import", tooltip="Import a live config"),
        Binding(
            "h",
            "history",
            "History",
            id="profiles.history",
            tooltip="A config file's driftdesk writes, and restoring it byte for byte",
        ),
        Binding(
            "d", "delete", "Delete", id="profiles.delete", tooltip="Delete the profile and its key"
        ),
        Binding("c", "copy", "Copy name", id="profiles.copy", show=False),
        Binding("r", "refresh", "Refresh", id="profiles.refresh"),
    ]

    def compose(self) -> ComposeResult:
        yield Header(icon=HEADER_ICON)
        with Vertical():
            table: DataTable[Any] = DataTable(id="profiles-table", cursor_type="row")
            fill_table(table, [(label, label) for label in COLUMNS], [])
            yield table
            with VerticalScroll(id="profile-detail"):
                yield Static("", id="profile-detail-text")
        yield BindingsFooter()

    def on_mount(self) -> None:
        self._rows: dict[str, ProfileRow] = {}
        self._note = ""

    def came_to_front(self) -> None:
        self.load_profiles()

    # -- workers -------------------------------------------------------------------------------
    @work(
        thread=True,
        exclusive=True,
        group="profiles-load",
        exit_on_error=False,
        name="loading profiles",
    )
    def load_profiles(self) -> None:
        from driftdesk.providers.keys import KeyMissing, KeyringUnavailable, get_key
        from driftdesk.providers.profiles import ProfileStore
        from driftdesk.secrets import mask_key

        profiles = ProfileStore().all()
        active, drift, note, files = _target_status()
        rows: list[ProfileRow] = []
        keyring_note = ""
        for p in profiles:
            if p.no_key:
                masked = "(keyless)"  # as `profile list` says; the keyring is not asked
            else:
                try:
                    masked = mask_key(get_key(p.name))
                except KeyMissing:
                    masked = "(none)"
                except KeyringUnavailable as exc:
                    masked = "keyring unavailable"
                    keyring_note = str(exc)
            rows.append(
                ProfileRow(
                    name=p.name,
                    protocol=p.protocol,
                    base_url=p.base_url,
                    model=p.model,
                    masked_key=masked,
                    active_on=", ".join(active.get(p.name, [])) or "-",
                    active_files=tuple(files.get(p.name, [])),
                    drift="; ".join(drift.get(p.name, [])) or "-",
                    extra=_profile_extra(p),
                )
            )
        self.post_message(ProfilesLoaded(rows, note=" ".join(x for x in (note, keyring_note) if x)))

    @work(
        thread=True, exclusive=True, group="profiles-doctor", exit_on_error=False, name="the doctor"
    )
    def run_doctor(self, name: str) -> None:
        from driftdesk.providers.doctor import run_doctor

        self.post_message(DetailReady(f"doctor {name}", "running checks (with a live probe)…"))
        checks = run_doctor(name, probe=True)
        self.post_message(DetailReady(f"doctor {name}", _checks_text(checks)))

    @work(
        thread=True, exclusive=True, group="profiles-switch", exit_on_error=False, name="the switch"
    )
    def plan_switch(self, name: str, target: str, scope: str = "user") -> None:
        from driftdesk.providers.profiles import ProfileStore
        from driftdesk.providers.targets import plan_switch

        plan = plan_switch(ProfileStore().get(name), target, scope=scope)
        if not plan.changed:
            self.post_message(
                DetailReady(f"{target} already points at {name}", f"{plan.path} is unchanged")
            )
            return
        diff = plan.diff + "".join(f"\n# note: {note}" for note in plan.notes)
        self.post_message(SwitchPlanned(name, target, plan, diff))

    @work(
        thread=True, exclusive=True, group="profiles-switch", exit_on_error=False, name="the switch"
    )
    def apply_switch(self, plan: Any, name: str, target: str) -> None:
        from driftdesk.providers.targets import apply_switch

        apply_switch(plan)
        self.post_message(
            DetailReady(
                f"switched {target} to {name}",
                f"wrote {plan.path} (the previous version is backed up)",
            )
        )
        self.load_profiles()

    @work(
        thread=True, exclusive=True, group="profiles-import", exit_on_error=False, name="the import"
    )
    def inspect_import(self, source: str) -> None:
        """What importing ``source`` would create; refused when the file already points at one
        of our profiles (driftdesk wrote it: importing it would only duplicate that profile)."""
        from driftdesk.providers.importer import inspect_source
        from driftdesk.providers.profiles import ProfileStore
        from driftdesk.providers.status import collect_status
        from driftdesk.secrets import mask_key

        found = inspect_source(source, None)
        owner = next(
            (
                row.profile
                for row in collect_status()
                if row.profile
                and row.target == source
                and row.path.resolve() == found.path.resolve()
            ),
            None,
        )
        if owner is not None:
            said = (
                f"Nothing to import: {found.path} points at driftdesk's own profile {owner!r}, "
                "which is already here."
            )
            self.app.call_from_thread(self.notify, said, title="import", severity="warning")
            return
        fields = found.profile_fields
        key = (
            f"{mask_key(found.key)} from {found.key_where} (goes to the OS keyring)"
            if found.key
            else "none found (add one afterwards with e)"
        )
        preview = "\n".join(
            [
                f"from       {found.path}",
                f"protocol   {fields.get('protocol')}",
                f"base URL   {fields.get('base_url')}",
                f"model      {fields.get('model')}",
                f"key        {key}",
                *found.notes,
            ]
        )
        from driftdesk.providers.importer import _default_name

        default = _default_name(ProfileStore(), source, str(fields.get("base_url")))
        self.post_message(ImportPreview(source, preview, default))

    @on(ImportPreview)
    def _ask_import_name(self, message: ImportPreview) -> None:
        from driftdesk.tui.screens.modals import NameScreen

        def named(name: str | None) -> None:
            if name:
                self.import_current(message.source, name)

        self.app.push_screen(
            NameScreen(
                f"Import the {message.source} settings as a profile?",
                message.preview,
                message.default,
                yes="Import",
            ),
            named,
        )

    @work(
        thread=True, exclusive=True, group="profiles-import", exit_on_error=False, name="the import"
    )
    def import_current(self, source: str, name: str) -> None:
        from driftdesk.providers.importer import import_profile

        result = import_profile(source, name=name)
        lines = [
            f"profile {result.profile.name}: {result.profile.base_url} · {result.profile.model}",
            f"read from {result.source_path}",
            f"key: {result.key_masked} stored in the OS keyring"
            if result.key_stored
            else "key: none found",
            *result.notes,
        ]
        self.post_message(DetailReady(f"imported from {source}", "\n".join(lines)))
        self.load_profiles()

    @work(
        thread=True, exclusive=True, group="profiles-restore", exit_on_error=False, name="history"
    )
    def load_history(self, target: str) -> None:
        from driftdesk.providers.restore import file_history
        from driftdesk.providers.targets import target_path

        self.post_message(HistoryLoaded(target, file_history(target_path(target), target)))

    @work(
        thread=True, exclusive=True, group="profiles-restore", exit_on_error=False, name="restore"
    )
    def plan_restore(self, target: str, to: str) -> None:
        from driftdesk.providers.restore import plan_restore

        self.post_message(RestorePlanned(plan_restore(target, to=to)))

    @work(
        thread=True, exclusive=True, group="profiles-restore", exit_on_error=False, name="restore"
    )
    def apply_restore(self, plan: Any) -> None:
        from driftdesk.providers.restore import apply_restore

        apply_restore(plan)
        self.post_message(
            DetailReady(
                f"restored {plan.target}",
                f"{plan.path} is back as it was {plan.label} (the version it replaced is backed "
                "up: restore again to undo)",
            )
        )
        self.load_profiles()

    # -- message handlers ----------------------------------------------------------------------
    @on(HistoryLoaded)
    def _show_history(self, message: HistoryLoaded) -> None:
        if message.stale:
            return
        history = message.history
        lines = [
            f"{e['n']:>3}  {e.get('at', '?')}  {e.get('action', 'switch')}  "
            f"{e.get('profile') or '-'}  {e.get('summary', '')}"
            for e in history.writes
        ]
        self._detail(
            f"history of {history.path}",
            "\n".join(lines)
            or (
                "no writes recorded (a copy of the original is kept)"
                if history.has_original
                else "driftdesk has not written this file"
            ),
        )
        if not history.writes and not history.has_original:
            return
        options = [("last", "undo the latest driftdesk write")] if history.writes else []
        options.append(("original", "as it was before driftdesk first wrote it"))
        options += [
            (str(e["n"]), f"before write {e['n']}: {e.get('summary', '')}"[:90])
            for e in reversed(history.writes)
        ]

        def picked(to: str | None) -> None:
            if to:
                self.plan_restore(message.target, to)

        self.app.push_screen(PickScreen(f"Restore {history.path} to…", options), picked)

    @on(RestorePlanned)
    def _confirm_restore(self, message: RestorePlanned) -> None:
        plan = message.plan
        if not plan.changed:
            self._detail("nothing to restore", f"{plan.path} already is as it was {plan.label}")
            return

        def answered(yes: bool | None) -> None:
            if yes:
                self.apply_restore(plan)
            else:
                self.notify("restore cancelled: nothing was written")

        notes = "".join(f"\n# note: {note}" for note in plan.notes)
        self.app.push_screen(
            ConfirmScreen(
                f"Restore {plan.path} to {plan.label}? This diff will be written:",
                plan.diff + notes,
                diff=True,
                yes="Restore",
            ),
            answered,
        )

    @on(ProfilesLoaded)
    def _show_profiles(self, message: ProfilesLoaded) -> None:
        if message.stale:
            return
        self._rows = {row.name: row for row in message.rows}
        self._note = message.note
        self._fill_table()
        if not message.rows:
            if self.workbench.demo:  # the demo's profile is offered by the form, never saved
                self._detail(
                    "no saved profiles yet",
                    "The demo's profile demo-sandbox lives only while the demo runs (the launch "
                    "form offers it). Press a to add one, i to import Claude Code / Codex / .env "
                    "settings.",
                )
            else:
                self._detail(
                    "no profiles yet",
                    "Press a to add one, i to import Claude Code / Codex / .env settings, "
                    "or run `driftdesk demo` to try a simulated endpoint.",
                )
        elif message.note:
            self._detail("note", message.note)

    def on_resize(self) -> None:
        if getattr(self, "_rows", None):
            self._fill_table()

    def _fill_table(self) -> None:
        """The columns that fit: below NARROW_WIDTH the protocol and key move to the detail
        pane and long base URLs are shortened, so "active on" and "drift" stay visible."""
        table = self.query_one("#profiles-table", DataTable)
        selected = self.selected_profile()
        narrow = self.app.size.width < NARROW_WIDTH
        columns = NARROW_COLUMNS if narrow else COLUMNS
        url_width = NARROW_URL_WIDTH if narrow else None

        def cells(row: ProfileRow) -> tuple[Any, ...]:
            values: dict[str, Any] = {
                "profile": row.name,
                "protocol": row.protocol,
                "base URL": _shorten(row.base_url, url_width),
                "model": _shorten(row.model, url_width),
                "key": row.masked_key,
                "active on": row.active_on,
                "drift": Text(row.drift, style="yellow" if row.drift != "-" else ""),
            }
            return tuple(values[column] for column in columns)

        fill_table(
            table,
            [(label, label) for label in columns],
            [(row.name, cells(row)) for row in self._rows.values()],
        )
        if selected is not None and selected in self._rows:
            table.move_cursor(row=table.get_row_index(selected))

    @on(DataTable.RowHighlighted, "#profiles-table")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        row = self._rows.get(str(event.row_key.value))
        if row is None:
            return
        body = Text()
        body.append(f"{row.protocol} · {row.base_url} · {row.model} · key {row.masked_key}\n")
        if row.active_files:
            body.append("active on:\n" + "".join(f"  {f}\n" for f in row.active_files))
        else:
            body.append("active on: no target yet (s switches one to it)\n")
        if row.drift != "-":
            body.append(f"drift: {row.drift}\n", style="yellow")
        if row.extra:
            body.append(row.extra + "\n", style="dim")
        body.append("s switch a target to it · t test connection · e edit", style="dim")
        if self._note:
            body.append("\n" + self._note, style="yellow")
        self._detail(row.name, body)

    @on(DetailReady)
    def _show_detail(self, message: DetailReady) -> None:
        self._detail(message.title, message.body)

    @on(SwitchPlanned)
    def _confirm_switch(self, message: SwitchPlanned) -> None:
        from driftdesk.providers.targets import unsaved_keys_message

        plan = message.plan
        # A key only the user's file holds: say so (masked) in the dialog. It stays
        # recoverable from the backup (history / restore), so one yes is enough.
        warning = unsaved_keys_message(plan) if plan.unsaved_keys else ""

        def answered(yes: bool | None) -> None:
            if yes:
                self.apply_switch(plan, message.profile, message.target)
            else:
                self.notify("switch cancelled: nothing was written")

        title = f"Switch {message.target} to {message.profile}? This diff will be written:"
        if warning:
            title = f"Switch {message.target} to {message.profile}? It removes a key from the file:"
        self.app.push_screen(
            ConfirmScreen(
                title,
                message.diff + (f"\n# WARNING: {warning}" if warning else ""),
                diff=True,
                yes="Write",
            ),
            answered,
        )

    def _detail(self, title: str, body: str | Text) -> None:
        text = Text()
        text.append(title + "\n", style="bold")
        text.append(body)
        self.query_one("#profile-detail-text", Static).update(text)

    # -- actions -------------------------------------------------------------------------------
    def selected_profile(self) -> str | None:
        table = self.query_one("#profiles-table", DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return str(row_key.value) if row_key.value is not None else None

    def action_refresh(self) -> None:
        self.load_profiles()

    def action_add(self) -> None:
        self.app.push_screen(ProfileFormScreen(), self._form_done)

    def action_edit(self) -> None:
        name = self.selected_profile()
        if name is None:
            self.notify("no profile selected", severity="warning")
            return
        from driftdesk.providers.profiles import ProfileStore

        self.app.push_screen(ProfileFormScreen(ProfileStore().get(name)), self._form_done)

    def _form_done(self, result: ProfileFormResult | None) -> None:
        if result is not None:  # the form saved it (or refused and stayed open)
            self.notify(f"profile {result.profile.name} saved")
            self.load_profiles()

    def action_switch(self) -> None:
        name = self.selected_profile()
        if name is None:
            self.notify("no profile selected", severity="warning")
            return

        row = self._rows.get(name)
        choices = switch_choices(row.protocol if row else "openai")

        def picked(choice: str | None) -> None:
            if choice:
                target, _, scope = choice.partition(":")
                self.plan_switch(name, target, scope if target != "env" else "user")

        self.app.push_screen(PickScreen(f"Switch which target to {name}?", choices), picked)

    def action_doctor(self) -> None:
        name = self.selected_profile()
        if name is None:
            self.notify("no profile selected", severity="warning")
            return
        self.run_doctor(name)

    def action_import(self) -> None:
        def picked(source: str | None) -> None:
            if source:
                self.inspect_import(source)

        self.app.push_screen(PickScreen("Import the current config of…", TARGETS), picked)

    def action_history(self) -> None:
        def picked(target: str | None) -> None:
            if target:
                self.load_history(target)

        self.app.push_screen(PickScreen("History and restore of…", TARGETS), picked)

    def action_delete(self) -> None:
        name = self.selected_profile()
        if name is None:
            self.notify("no profile selected", severity="warning")
            return
        row = self._rows.get(name)
        where = (
            "\nStill pointing at it (switch them to another profile):\n"
            + "\n".join(f"  {f}" for f in row.active_files)
            if row and row.active_files
            else ""
        )

        def answered(yes: bool | None) -> None:
            if yes:
                self.delete_profile(name)

        self.app.push_screen(
            ConfirmScreen(
                f"Delete profile {name}?",
                f"The profile and its key in the OS keyring are removed.{where}",
                yes="Delete",
            ),
            answered,
        )

    @work(
        thread=True, exclusive=True, group="profiles-delete", exit_on_error=False, name="the delete"
    )
    def delete_profile(self, name: str) -> None:
        from driftdesk.providers.removal import remove_profile

        removed = remove_profile(name)
        lines = [f"removed {name}" + (" and its keyring entry" if removed.had_key else "")]
        lines += [
            f"{row.target} ({row.scope}) still points at it: {row.path}"
            for row in removed.still_pointing
        ]
        self.post_message(DetailReady(f"deleted {name}", "\n".join(lines)))
        self.load_profiles()

    def action_copy(self) -> None:
        name = self.selected_profile()
        if name:
            self.app.copy_to_clipboard(name)
            self.notify(f"copied {name}")

    def palette_commands(self) -> list[PaletteCommand]:
        return [
            PaletteCommand("profiles: add", "Add a provider profile", self.action_add),
            PaletteCommand("profiles: edit", "Edit the selected profile", self.action_edit),
            PaletteCommand(
                "profiles: switch", "Switch a target to the selected profile", self.action_switch
            ),
            PaletteCommand("profiles: test", "Doctor the selected profile", self.action_doctor),
            PaletteCommand("profiles: import", "Import a live config", self.action_import),
            PaletteCommand(
                "profiles: history and restore",
                "A config file's driftdesk writes; restore it byte for byte",
                self.action_history,
            ),
            PaletteCommand("profiles: delete", "Delete the selected profile", self.action_delete),
            PaletteCommand("profiles: refresh", "Reload profiles and status", self.action_refresh),
        ]


def _shorten(text: str, width: int | None) -> str:
    return text if width is None or len(text) <= width else text[: width - 1] + "…"


def _profile_extra(p: Any) -> str:
    parts = [
        f"{tier} model {value}"
        for tier, value in (
            ("haiku", p.haiku_model),
            ("sonnet", p.sonnet_model),
            ("opus", p.opus_model),
        )
        if value
    ]
    if p.headers:
        parts.append("headers: " + ", ".join(sorted(p.headers)))  # names only: values may be secret
    if p.notes:
        parts.append(f"notes: {p.notes}")
    return " · ".join(parts)


def switch_choices(protocol: str) -> list[tuple[str, str]]:
    """``("target:scope", "label naming the file")`` for the targets this protocol can drive."""
    from driftdesk.providers import locations

    names = {"claude": "Claude Code", "codex": "Codex", "env": ".env file"}
    choices = []
    for target, scope in TARGETS_BY_PROTOCOL.get(protocol, ()):
        if target == "claude":
            path = locations.claude_settings_path(scope)
        elif target == "codex":
            path = locations.codex_config_path(scope)
        else:
            path = locations.env_file_path(None)
        where = "" if scope in ("user", "file") else f" ({scope})"
        choices.append((f"{target}:{scope}", f"{names[target]}{where}: {_home_relative(path)}"))
    return choices


def _home_relative(path: Any) -> str:
    from pathlib import Path

    try:
        return "~/" + str(Path(path).relative_to(Path.home()))
    except ValueError:
        return str(path)


def _target_status() -> tuple[
    dict[str, list[str]], dict[str, list[str]], str, dict[str, list[str]]
]:
    """Which profile is active on which target (and drift there), from ``providers.status``;
    the last dict names the files: ``claude (user): ~/.claude/settings.json``."""
    from driftdesk.providers.status import collect_status

    active: dict[str, list[str]] = {}
    drift: dict[str, list[str]] = {}
    files: dict[str, list[str]] = {}
    notes: list[str] = []
    for entry in collect_status():
        where = entry.target if entry.scope in ("user", "file") else f"{entry.target}/{entry.scope}"
        if entry.profile:
            active.setdefault(entry.profile, []).append(where)
            files.setdefault(entry.profile, []).append(
                f"{entry.target} ({entry.scope}): {_home_relative(entry.path)}"
            )
        if entry.drifted:
            owner = entry.written_profile or entry.profile or "?"
            drift.setdefault(owner, []).append(f"{where} edited since switch")
            notes.append(f"{entry.path} changed since driftdesk wrote it ({entry.detail})".strip())
    return active, drift, "\n".join(notes), files


LEVEL_STYLES = {"ok": "green", "warn": "yellow", "error": "bold red", "info": "dim"}


def _checks_text(checks: list[Any]) -> Text:
    text = Text()
    for check in checks:
        level = str(check.level)
        text.append(f"{level:>5} ", style=LEVEL_STYLES.get(level, ""))
        text.append(f"{check.name}: ", style="bold")
        text.append(check.message)
        if check.fix and level != "ok":
            text.append(f"  → {check.fix}", style="dim")
        text.append("\n")
    return text
