"""Live in the workbench with the REAL Claude Code: launch from the form with the claude-code
preset, watch attempts pass and fail against the sandbox, then drill into the volatile task and
read its log, check output, workspace diff and proxied calls."""

from __future__ import annotations

import json
import os

import pytest
from textual.widgets import DataTable, RichLog

from driftdesk.analysis.attempt_detail import call_line
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.screens.task import TaskScreen
from driftdesk.tui.screens.volatility import VolatilityScreen
from tests.conftest import real_client
from tests.reruns.coding_helpers import CODING_TASKS, write_coding_suite

SIZE = (140, 42)
KEY = "sk-test-REALKEY-tui-presets-0123456789"


@pytest.mark.keyring
async def test_claude_code_attempts_live_then_drill_into_the_volatile_task(
    home, make_app, settle, open_launch_form, wait_for_run, runs_dir, tmp_path, monkeypatch
) -> None:
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import Profile, ProfileStore
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    monkeypatch.setenv("PATH", f"{real_client('claude').parent}{os.pathsep}{os.environ['PATH']}")
    # Two tasks: one always wrong, one a coin flip (seed 0 plays its attempts 0, 1, 2 wrong,
    # wrong, right: the sandbox draws by task, attempt and turn).
    tasks = [t for t in CODING_TASKS if t["task_id"] in ("write-notes", "rename")]
    suite = write_coding_suite(tmp_path / "suite", tasks)
    with SandboxServer(seed=0, suites=[suite]) as server:
        ProfileStore().save(
            Profile(
                name="claude-sim", protocol="anthropic", base_url=server.root_url, model=SIM_MODEL
            )
        )
        set_key("claude-sim", KEY)
        app = make_app(start_mode="run")
        async with app.run_test(size=SIZE) as pilot:
            await open_launch_form(
                app, pilot, profile="claude-sim", agent="claude-code", suite=str(suite),
                repeat="3", concurrency="1", timeout="180",
            )  # fmt: skip
            await pilot.press("ctrl+s")
            await pilot.pause()
            assert isinstance(app.screen, RunScreen)
            live = app.screen.live
            assert live is not None
            await wait_for_run(app, pilot, live)
            assert live.status == "completed"
            assert live.by_outcome["pass"] >= 1 and live.by_outcome["fail"] >= 4
            manifest = json.loads((live.run_dir / "manifest.json").read_text())
            assert manifest["agent"] == "claude-code"
            await pilot.press("v")
            await settle(app, pilot)
            assert isinstance(app.screen, VolatilityScreen)
            tasks_table = app.screen.query_one("#tasks", DataTable)
            tasks_table.focus()
            first = str(tasks_table.get_row(next(iter(tasks_table.rows)))[1])
            assert first == "rename"  # the volatile one leads (spread first)
            await pilot.press("enter")
            await settle(app, pilot)
            assert isinstance(app.screen, TaskScreen) and app.screen.task_id == "rename"
            attempts = app.screen.query_one("#attempts", DataTable)
            outcomes = [str(attempts.get_row(k)[1]) for k in attempts.rows]
            assert outcomes == ["fail", "fail", "pass"]
            await pilot.press("down", "down")  # the passing attempt
            await settle(app, pilot)
            text = "\n".join(
                line.text for line in app.screen.query_one("#attempt-log", RichLog).lines
            )
            assert text.startswith("$ cd ")  # the log: the client's command line first
            assert "[claude-code] is_error=False" in text
            assert "── check output ──" in text and "check exit code 0" in text
            assert "── workspace diff ──" in text and "+++ b/new.txt" in text
            assert "── proxied calls (3) ──" in text and "POST /v1/messages  status 200" in text


def test_a_call_line_names_the_served_model_when_the_proxy_recorded_it() -> None:
    call = {
        "call_index": 0,
        "method": "POST",
        "path": "/v1/messages",
        "status": 200,
        "latency_ms": 12.4,
        "prompt_tokens": 10,
        "completion_tokens": 2,
    }
    assert "served" not in call_line(call)
    line = call_line({**call, "served_model": "other-model", "model_mismatch": True})
    assert "served other-model (differs from the requested model)" in line
    assert "tokens 10+2" in line


async def test_demo_needs_no_npm_client(
    home, make_app, settle, wait_for_run, runs_dir, tmp_path, monkeypatch
) -> None:
    """`driftdesk demo` with neither Claude Code nor Codex anywhere on PATH."""
    import shutil

    bare = tmp_path / "bin"
    bare.mkdir()
    for tool in ("sh", "git", "python3"):
        found = shutil.which(tool)
        if found:
            (bare / tool).symlink_to(found)
    monkeypatch.setenv("PATH", str(bare))
    assert shutil.which("claude") is None and shutil.which("codex") is None
    app = make_app(demo=True, demo_repeat=1, demo_concurrency=8, demo_latency_ms=0.0)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        live = app.demo_run
        assert live is not None
        await wait_for_run(app, pilot, live)
        assert live.status == "completed"
        assert sum(live.by_outcome.values()) == len(live.task_ids)
