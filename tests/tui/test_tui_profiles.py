"""Profiles screen: switching Claude Code to a profile edits the real settings.json in a temp
home only after the diff is confirmed, and keeps everything else in the file."""

from __future__ import annotations

import json
import threading
import time

import pytest
from textual.widgets import DataTable, Input

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.tui.screens.modals import ConfirmScreen, NameScreen, PickScreen
from driftdesk.tui.screens.profile_form import ProfileFormScreen
from driftdesk.tui.screens.profiles import ProfilesScreen

SIZE = (140, 42)

SETTINGS = {
    "hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]},
    "statusLine": {"type": "command", "command": "status.sh"},
    "env": {"OTHER": "kept"},
}


def _store_profile() -> None:
    ProfileStore().save(
        Profile(name="work", protocol="anthropic", base_url="http://127.0.0.1:9/v1", model="m-1")
    )


async def test_switch_claude_after_confirm_keeps_the_rest(home, make_app, settle) -> None:
    _store_profile()
    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text(json.dumps(SETTINGS, indent=2) + "\n")
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
        table = app.screen.query_one("#profiles-table", DataTable)
        assert str(table.get_row("work")[0]) == "work"
        await pilot.press("s")
        assert isinstance(app.screen, PickScreen)
        await pilot.press("enter")  # the first target: Claude Code
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert "ANTHROPIC_BASE_URL" in app.screen._body
        assert json.loads(home.claude_settings.read_text()) == SETTINGS  # nothing written yet
        await pilot.press("y")
        await settle(app, pilot)
        written = json.loads(home.claude_settings.read_text())
        assert written["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/v1"
        assert written["hooks"] == SETTINGS["hooks"]
        assert written["statusLine"] == SETTINGS["statusLine"]
        assert written["env"]["OTHER"] == "kept"
        # The table now shows where the profile is active.
        assert "claude" in str(table.get_row("work")[5])


async def test_switch_cancelled_writes_nothing(home, make_app, settle) -> None:
    _store_profile()
    home.claude_settings.parent.mkdir(parents=True)
    original = json.dumps(SETTINGS, indent=2) + "\n"
    home.claude_settings.write_text(original)
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("s", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("n")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
    assert home.claude_settings.read_text() == original


async def test_add_profile_form_validates_and_saves(home, make_app, settle) -> None:
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        assert isinstance(app.screen, ProfileFormScreen)
        await pilot.press(*"local")  # typed into the focused name field
        form = app.screen
        form.query_one("#base_url").value = "not-a-url"  # type: ignore[attr-defined]
        form.query_one("#model").value = "m-2"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ProfileFormScreen)  # refused: bad URL
        assert "invalid base URL" in str(app.screen.query_one("#form-error").render())
        base = app.screen.query_one("#base_url")
        base.value = "http://127.0.0.1:8/v1"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
    saved = ProfileStore().get("local")
    assert (saved.base_url, saved.model, saved.protocol) == (
        "http://127.0.0.1:8/v1",
        "m-2",
        "openai",
    )


async def test_unparseable_settings_is_refused_and_left_untouched(home, make_app, settle) -> None:
    _store_profile()
    home.claude_settings.parent.mkdir(parents=True)
    broken = '{"env": {"A": 1,, }\n'
    home.claude_settings.write_text(broken)
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("s", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)  # no confirm: nothing to confirm
        errors = [n for n in app._notifications if n.severity == "error"]
        assert errors and "settings.json" in errors[-1].message
    assert home.claude_settings.read_text() == broken


@pytest.mark.keyring
async def test_key_typed_in_the_form_goes_to_the_keyring_only(home, make_app, settle) -> None:
    from driftdesk.providers.keys import get_key
    from driftdesk.secrets import mask_key

    key = "sk-live-abcdefghijklmnop1234"
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("a")
        form = app.screen
        form.query_one("#name").value = "keyed"  # type: ignore[attr-defined]
        form.query_one("#base_url").value = "http://127.0.0.1:7/v1"  # type: ignore[attr-defined]
        form.query_one("#model").value = "m"  # type: ignore[attr-defined]
        form.query_one("#key").focus()
        await pilot.press(*key)
        await pilot.pause()
        # Typed masked: what the field draws (not its render(), a Panel whose str is a repr)
        # is one bullet per character, and no part of the key is anywhere on screen.
        field = form.query_one("#key", Input)
        assert "".join(segment.text for segment in field.render_line(0)).strip() == "•" * len(key)
        screen = "\n".join(strip.text for strip in app.screen._compositor.render_strips())
        assert "••••" in screen and key[-10:] not in screen
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        table = app.screen.query_one("#profiles-table", DataTable)
        assert str(table.get_row("keyed")[4]) == mask_key(key)
    assert get_key("keyed") == key
    assert key not in (home.config_dir / "config.toml").read_text()


async def test_doctor_results_show_inline(home, make_app, settle) -> None:
    # An anthropic base URL ending in /v1 is a classic mistake the doctor names.
    _store_profile()
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("t")
        await settle(app, pilot)
        detail = str(app.screen.query_one("#profile-detail-text").render())
        assert "doctor work" in detail
        assert "work: base URL" in detail and "/v1/v1/messages" in detail


@pytest.mark.keyring
async def test_import_claude_settings_as_a_profile(home, make_app, settle) -> None:
    from driftdesk.providers.keys import get_key

    home.claude_settings.parent.mkdir(parents=True)
    home.claude_settings.write_text(
        json.dumps(
            {
                "env": {
                    "ANTHROPIC_BASE_URL": "https://gw.example.com/anthropic",
                    "ANTHROPIC_MODEL": "claude-x",
                    "ANTHROPIC_AUTH_TOKEN": "sk-ant-imported-0123456789",
                }
            }
        )
    )
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("i")
        assert isinstance(app.screen, PickScreen)
        await pilot.press("enter")  # Claude Code
        await settle(app, pilot)
        # What will be imported is shown first, and the name is asked for.
        assert isinstance(app.screen, NameScreen)
        body = app.screen._body
        assert "https://gw.example.com/anthropic" in body and "claude-x" in body
        assert "sk-ant-imported-0123456789" not in body  # the key only masked
        app.screen.query_one("#name").value = "gw"  # type: ignore[attr-defined]
        await pilot.press("enter")
        await settle(app, pilot)
        table = app.screen.query_one("#profiles-table", DataTable)
        names = [str(table.get_row(k)[0]) for k in table.rows]
        assert names == ["gw"]
    profile = ProfileStore().get("gw")
    assert (profile.base_url, profile.model) == ("https://gw.example.com/anthropic", "claude-x")
    assert get_key("gw") == "sk-ant-imported-0123456789"


async def test_importing_a_config_driftdesk_wrote_points_at_its_profile(
    home, make_app, settle
) -> None:
    from driftdesk.providers.targets import apply_switch, plan_switch

    ProfileStore().save(Profile("oa", "openai", "http://127.0.0.1:9/v1", "gpt-x"))
    apply_switch(plan_switch(ProfileStore().get("oa"), "codex"))
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("i")
        await pilot.press("down", "enter")  # Codex
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)  # nothing asked: nothing to import
        said = [n.message for n in app._notifications]
        assert any("driftdesk's own profile 'oa'" in m for m in said), said
    assert ProfileStore().names() == ["oa"]


@pytest.mark.keyring
async def test_edit_tiers_headers_and_notes_keeps_the_key(home, make_app, settle) -> None:
    from driftdesk.providers.keys import get_key, set_key

    key = "sk-edit-" + "k" * 20
    _store_profile()
    set_key("work", key)
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        form = app.screen
        assert isinstance(form, ProfileFormScreen)
        assert form.query_one("#key").value == ""  # type: ignore[attr-defined]
        form.query_one("#haiku_model").value = "claude-haiku-x"  # type: ignore[attr-defined]
        form.query_one("#sonnet_model").value = "claude-sonnet-x"  # type: ignore[attr-defined]
        form.query_one("#opus_model").value = "claude-opus-x"  # type: ignore[attr-defined]
        headers = form.query_one("#headers")
        headers.text = "Authorization: Bearer nope\n"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, ProfileFormScreen)  # refused: the key's header
        assert "API key field" in str(form.query_one("#form-error").render())
        headers.text = "X-Team: evals\n\nanthropic-beta: tools-2025\n"  # type: ignore[attr-defined]
        form.query_one("#notes").value = "gateway, EU region"  # type: ignore[attr-defined]
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
        # reopened, the form shows what was saved
        await pilot.press("e")
        assert "X-Team: evals" in app.screen.query_one("#headers").text  # type: ignore[attr-defined]
        await pilot.press("escape")
    saved = ProfileStore().get("work")
    assert (saved.haiku_model, saved.sonnet_model, saved.opus_model) == (
        "claude-haiku-x",
        "claude-sonnet-x",
        "claude-opus-x",
    )
    assert saved.headers == {"X-Team": "evals", "anthropic-beta": "tools-2025"}
    assert saved.notes == "gateway, EU region"
    assert (saved.base_url, saved.model) == ("http://127.0.0.1:9/v1", "m-1")
    config = (home.config_dir / "config.toml").read_text()
    assert "claude-opus-x" in config and "X-Team" in config and key not in config
    assert get_key("work") == key  # an empty key field leaves the keyring alone


USER_ONLY_KEY = "sk-ant-user-only-0123456789abcdef"


async def test_adding_a_profile_with_a_key_but_no_keyring_writes_nothing_and_keeps_the_key(
    home, make_app, settle
) -> None:
    """As ``driftdesk profile add`` does: refused, nothing written, the typed key still there."""
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        app = make_app(start_mode="profiles")
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            await pilot.press("a")
            form = app.screen
            form.query_one("#name").value = "nokeyring"  # type: ignore[attr-defined]
            form.query_one("#base_url").value = "http://127.0.0.1:7/v1"  # type: ignore[attr-defined]
            form.query_one("#model").value = "m"  # type: ignore[attr-defined]
            form.query_one("#key").value = "sk-typed-0123456789abcdef"  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await settle(app, pilot)
            assert isinstance(app.screen, ProfileFormScreen)  # still open
            error = str(app.screen.query_one("#form-error").render())
            assert "keyring" in error and "Nothing was saved" in error
            assert "KeyringUnavailable" not in error
            assert app.screen.query_one("#key").value == "sk-typed-0123456789abcdef"  # type: ignore[attr-defined]
        assert ProfileStore().names() == []
        assert not (home.config_dir / "config.toml").exists()
    finally:
        keyring.set_keyring(previous)


async def test_a_failed_run_is_reported_as_a_plain_sentence(home, make_app, settle) -> None:
    from driftdesk.reruns.run_spec import RunSpec

    app = make_app(start_mode="run")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        live = app.start_run(RunSpec(profile="nope", suite="basic", out_dir=home.project / "r"))
        while not live.finished:
            await pilot.pause(0.05)
        await settle(app, pilot)
        messages = [n.message for n in app._notifications if n.severity == "error"]
        assert messages and "No profile named 'nope'" in messages[-1]
        for text in (messages[-1], live.error or ""):
            assert "ProfileNotFound" not in text and "--" not in text


async def test_switch_offers_only_targets_for_the_protocol_with_scopes_and_files(
    home, make_app, settle
) -> None:
    _store_profile()  # anthropic
    ProfileStore().save(Profile("oa", "openai", "http://127.0.0.1:9/v1", "gpt-x"))
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.screen.query_one("#profiles-table", DataTable)
        table.move_cursor(row=table.get_row_index("work"))
        await pilot.press("s")
        picker = app.screen
        assert isinstance(picker, PickScreen)
        values = [value for value, _ in picker._options]
        assert values == ["claude:user", "claude:project", "claude:local"]
        labels = " ".join(label for _, label in picker._options)
        assert "~/.claude/settings.json" in labels and "settings.local.json" in labels
        await pilot.press("escape")
        table.move_cursor(row=table.get_row_index("oa"))
        await pilot.press("s")
        values = [value for value, _ in app.screen._options]  # type: ignore[attr-defined]
        assert values == ["codex:user", "env:file"]  # Codex ignores project-scope providers
        await pilot.press("enter")  # Codex, user scope
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(app, pilot)
        table.move_cursor(row=table.get_row_index("oa"))
        await settle(app, pilot)
        detail = str(app.screen.query_one("#profile-detail-text").render())
        assert "codex (user):" in detail and ".codex/config.toml" in detail


@pytest.mark.keyring
async def test_delete_a_profile_and_its_key_from_the_profiles_screen(
    home, make_app, settle
) -> None:
    from driftdesk.providers.keys import KeyMissing, get_key, set_key

    _store_profile()
    set_key("work", "sk-work-0123456789abcdef")
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("d")
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        # The answer reaches the screen below the dialog, which starts the delete: wait for its
        # outcome (settle alone can look before the delete has started, on a loaded machine).
        table = app.screen.query_one("#profiles-table", DataTable)
        deadline = time.monotonic() + 60
        while table.row_count or ProfileStore().names():
            assert time.monotonic() < deadline, "the profile was never deleted"
            await pilot.pause(0.05)
        await settle(app, pilot)
        assert table.row_count == 0
    assert ProfileStore().names() == []
    with pytest.raises(KeyMissing):
        get_key("work")


@pytest.mark.keyring
async def test_a_load_replaced_by_a_newer_one_does_not_bring_a_deleted_profile_back(
    home, make_app, settle, monkeypatch
) -> None:
    """Closing the delete dialog resumes the screen, which starts a load; the delete then starts
    another, which cancels the first. A cancelled thread worker still runs to its end: the rows
    it read before the delete must not replace the newer load's (seen under load in CI)."""
    from driftdesk.providers.keys import set_key
    from driftdesk.tui.screens import profiles as profiles_module

    _store_profile()
    set_key("work", "sk-work-0123456789abcdef")
    real_status = profiles_module._target_status
    held, release = threading.Event(), threading.Event()

    def first_load_held(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not held.is_set():  # the load the dialog's closing starts: the profile is read
            held.set()
            release.wait(60)
        return real_status(*args, **kwargs)

    posted: list[object] = []
    real_post = ProfilesScreen.post_message

    def recording_post(self, message):  # type: ignore[no-untyped-def]
        delivered = real_post(self, message)
        if isinstance(message, profiles_module.ProfilesLoaded):
            posted.append(message)
        return delivered

    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        monkeypatch.setattr(profiles_module, "_target_status", first_load_held)
        monkeypatch.setattr(ProfilesScreen, "post_message", recording_post)
        await pilot.press("d", "y")
        table = app.screen.query_one("#profiles-table", DataTable)
        deadline = time.monotonic() + 60
        while table.row_count or not posted:  # the delete's own load has shown no profile
            assert time.monotonic() < deadline, "the delete's load never arrived"
            await pilot.pause(0.05)
        assert held.is_set() and ProfileStore().names() == []
        release.set()  # the replaced load now posts the rows it read before the delete
        while len(posted) < 2:
            assert time.monotonic() < deadline, "the held load never posted"
            await pilot.pause(0.05)
        await settle(app, pilot)
        assert table.row_count == 0


@pytest.mark.keyring
async def test_switch_that_drops_an_unsaved_key_warns_and_restore_brings_it_back(
    home, make_app, settle
) -> None:
    """settings.json holds a key no profile has in the keyring: the dialog says so (masked) and
    names restore; cancelling writes nothing; after the switch the backup gives it back."""
    from driftdesk.providers.restore import apply_restore, plan_restore
    from driftdesk.secrets import mask_key

    _store_profile()
    home.claude_settings.parent.mkdir(parents=True)
    settings = {**SETTINGS, "env": {"OTHER": "kept", "ANTHROPIC_API_KEY": USER_ONLY_KEY}}
    original = json.dumps(settings, indent=2) + "\n"
    home.claude_settings.write_text(original)
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("s", "enter")
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        first = app.screen._body
        assert "WARNING" in first and mask_key(USER_ONLY_KEY) in first
        assert "driftdesk restore claude" in first and USER_ONLY_KEY not in first
        await pilot.press("n")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
        assert home.claude_settings.read_text() == original  # cancelled: nothing written

        await pilot.press("s", "enter")
        await settle(app, pilot)
        await pilot.press("y")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
        assert not [n for n in app._notifications if n.severity == "error"]
    written = json.loads(home.claude_settings.read_text())
    assert written["env"]["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:9/v1"
    assert written["env"]["OTHER"] == "kept"
    assert USER_ONLY_KEY not in home.claude_settings.read_text()
    apply_restore(plan_restore("claude"))
    assert home.claude_settings.read_text() == original


@pytest.mark.keyring
async def test_history_and_restore_with_preview_and_confirm(home, make_app, settle) -> None:
    """h lists the file's writes; picking one shows the diff; cancel writes nothing; confirm
    puts the file back byte for byte."""
    from driftdesk.providers.targets import apply_switch, plan_switch

    _store_profile()
    ProfileStore().save(
        Profile(name="other", protocol="anthropic", base_url="http://127.0.0.1:8/v1", model="m-2")
    )
    home.claude_settings.parent.mkdir(parents=True)
    original = json.dumps(SETTINGS, indent=2) + "\n"
    home.claude_settings.write_text(original)
    apply_switch(plan_switch(ProfileStore().get("work"), "claude"))
    after_first = home.claude_settings.read_bytes()
    apply_switch(plan_switch(ProfileStore().get("other"), "claude"))
    after_second = home.claude_settings.read_bytes()
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("h")
        assert isinstance(app.screen, PickScreen)
        await pilot.press("enter")  # Claude Code
        await settle(app, pilot)
        assert isinstance(app.screen, PickScreen)  # restore to…: last, original, each write
        await pilot.press("enter")  # last: undo the latest write
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        assert (
            "http://127.0.0.1:8/v1" in app.screen._body and "before write 2" in app.screen._heading
        )
        await pilot.press("n")
        await settle(app, pilot)
        assert home.claude_settings.read_bytes() == after_second
        await pilot.press("h", "enter")
        await settle(app, pilot)
        await pilot.press("down", "enter")  # original
        await settle(app, pilot)
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
        assert not [n for n in app._notifications if n.severity == "error"]
    assert home.claude_settings.read_text() == original
    assert after_first != original


async def test_editing_a_keyless_profile_with_a_bearer_gateway_keeps_both(
    home, make_app, settle
) -> None:
    """Seen: the form built a new profile from its fields only, so editing the notes of a
    keyless profile (``profile add --no-key``) or of one with ``--auth-header bearer`` saved it
    as keyed with the protocol's default header; the next run asked for a key."""
    ProfileStore().save(
        Profile(
            name="local", protocol="openai", base_url="http://127.0.0.1:9/v1", model="m",
            no_key=True,
        )
    )  # fmt: skip
    ProfileStore().save(
        Profile(
            name="gw", protocol="anthropic", base_url="http://127.0.0.1:9/anthropic", model="m",
            auth_header="bearer",
        )
    )  # fmt: skip
    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        for name in ("gw", "local"):
            app.screen.query_one("#profiles-table", DataTable).move_cursor(
                row=app.screen.query_one("#profiles-table", DataTable).get_row_index(name)
            )
            await pilot.press("e")
            form = app.screen
            assert isinstance(form, ProfileFormScreen)
            form.query_one("#notes").value = f"edited {name}"  # type: ignore[attr-defined]
            await pilot.press("ctrl+s")
            await settle(app, pilot)
            assert isinstance(app.screen, ProfilesScreen)
    gw, local = ProfileStore().get("gw"), ProfileStore().get("local")
    assert (gw.notes, gw.auth_header, gw.no_key) == ("edited gw", "bearer", False)
    assert (local.notes, local.no_key) == ("edited local", True)


async def _add_form(app, pilot, name: str, base_url: str) -> ProfileFormScreen:  # type: ignore[no-untyped-def]
    """The add-profile form with a name (typed), a base URL and the model "m" filled in."""
    await pilot.press("a")
    form = app.screen
    assert isinstance(form, ProfileFormScreen)
    await pilot.press(*name)
    form.query_one("#base_url").value = base_url  # type: ignore[attr-defined]
    form.query_one("#model").value = "m"  # type: ignore[attr-defined]
    return form


async def test_the_form_sets_the_auth_header_and_keyless(home, make_app, settle) -> None:
    from textual.widgets import Checkbox, Select

    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        form = await _add_form(app, pilot, "ollama", "http://127.0.0.1:11434/v1")
        form.query_one("#no_key", Checkbox).value = True
        await pilot.pause()
        assert form.query_one("#key").disabled  # nothing to type where no key is sent
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
        form = await _add_form(app, pilot, "gw", "http://127.0.0.1:9/anthropic")
        form.query_one("#protocol", Select).value = "anthropic"
        form.query_one("#auth_header", Select).value = "bearer"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfilesScreen)
    assert ProfileStore().get("ollama").no_key is True
    gw = ProfileStore().get("gw")
    assert (gw.auth_header, gw.auth, gw.no_key) == ("bearer", "bearer", False)


async def test_the_form_refuses_a_bearer_less_openai_profile(home, make_app, settle) -> None:
    from textual.widgets import Select

    app = make_app(start_mode="profiles")
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        form = await _add_form(app, pilot, "oa", "http://127.0.0.1:9/v1")
        form.query_one("#auth_header", Select).value = "x-api-key"
        await pilot.press("ctrl+s")
        await settle(app, pilot)
        assert isinstance(app.screen, ProfileFormScreen)  # refused, with the profile's reason
        assert "bearer" in str(form.query_one("#form-error").render())
    assert not ProfileStore().exists("oa")


async def test_a_keyless_profile_shows_as_keyless_without_a_keyring(home, make_app, settle) -> None:
    """Seen: the table said 'keyring unavailable' for a keyless profile (`profile list` says
    '(keyless)'), though such a profile never asks the keyring anything."""
    import keyring
    from keyring.backends import fail

    ProfileStore().save(
        Profile(name="sim", protocol="openai", base_url="http://127.0.0.1:9/v1", model="m",
                no_key=True)
    )  # fmt: skip
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        app = make_app(start_mode="profiles")
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            cells = [str(cell) for cell in app.screen.query_one(DataTable).get_row("sim")]
            assert "(keyless)" in cells
            assert not any("keyring" in cell for cell in cells)
    finally:
        keyring.set_keyring(previous)
