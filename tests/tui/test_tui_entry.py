"""Entry points: `driftdesk` lists runs from the data dir and ./runs; the demo quits cleanly
mid-run (runs interrupted, sandbox stopped) and uses the keyring when there is one."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from textual.widgets import OptionList

from driftdesk import paths
from driftdesk.tui.app import DriftdeskApp
from driftdesk.tui.screens.volatility import VolatilityScreen

SIZE = (140, 42)


async def test_default_app_lists_runs_from_data_dir_and_cwd(home, settle, run_writer) -> None:
    run_writer(paths.data_dir() / "runs", "in-data-dir", "A")
    run_writer(Path.cwd() / "runs", "in-cwd", "B")
    app = DriftdeskApp(blink=False)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert isinstance(app.screen, VolatilityScreen)
        options = app.screen.query_one("#runs", OptionList)
        assert options.option_count == 2
        assert [r.run_id for r in app.screen.runs] == ["in-cwd", "in-data-dir"]


async def test_demo_quits_mid_run_cleanly(home, make_app, settle, runs_dir) -> None:
    app = make_app(demo=True, demo_repeat=5, demo_concurrency=2, demo_latency_ms=80.0)
    async with app.run_test(size=SIZE) as pilot:
        while app.demo_run is None or app.demo_run.done < 2:
            await pilot.pause(0.05)
        live = app.demo_run
        base_url = app.sandbox.base_url
        await pilot.press("ctrl+q")
        await pilot.pause()
    assert live.status == "interrupted"
    manifest = json.loads((live.run_dir / "manifest.json").read_text())
    assert manifest["status"] == "interrupted"
    with pytest.raises(urllib.error.URLError):  # the sandbox is gone
        urllib.request.urlopen(base_url + "/models", timeout=2)


@pytest.mark.keyring
async def test_demo_leaves_the_users_profiles_and_keyring_alone(
    home, make_app, settle, wait_for_run
) -> None:
    """A user's own profile named ``sandbox`` is neither overwritten nor joined by a demo
    profile that outlives the demo (pointing at a port that is dead once it exits)."""
    from driftdesk.providers.keys import KeyMissing, get_key, set_key
    from driftdesk.providers.profiles import Profile, ProfileStore

    mine = Profile("sandbox", "openai", "https://my-gateway.example.com/v1", "my-model")
    ProfileStore().save(mine)
    set_key("sandbox", "sk-users-own-key-0123456789")
    config_before = (home.config_dir / "config.toml").read_bytes()
    app = make_app(demo=True, demo_repeat=1, demo_concurrency=8, demo_latency_ms=0.0)
    async with app.run_test(size=SIZE) as pilot:
        while app.demo_run is None:
            await pilot.pause(0.05)
        await wait_for_run(app, pilot, app.demo_run)
        assert app.demo_run.status == "completed"
        assert app.demo_run.spec["profile"] != "sandbox"
        assert ProfileStore().names() == ["sandbox"]  # during the demo too
    assert (home.config_dir / "config.toml").read_bytes() == config_before
    assert ProfileStore().get("sandbox") == mine
    assert get_key("sandbox") == "sk-users-own-key-0123456789"
    with pytest.raises(KeyMissing):
        get_key(app.demo_run.spec["profile"])
