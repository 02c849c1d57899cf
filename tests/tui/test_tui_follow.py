"""The Run screen follows any live run in the runs folder, whoever started it (issue 45, item
6): a run started from the command line shows there as it fills in, and a client's followed
log shows the commands it ran (from the proxy's recording), not only its stderr."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.tui.screens.run import RunScreen
from driftdesk.tui.widgets.run_log import RunLog
from tests.conftest import real_client
from tests.reruns.coding_helpers import CODING_TASKS, write_coding_suite

SIZE = (140, 42)


def _start_cli_run(runs_dir: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "run", "--out", str(runs_dir), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def _until(pilot, condition, timeout: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await pilot.pause(0.1)


def _log_text(screen: RunScreen) -> str:
    return "\n".join(screen.query_one("#run-log", RunLog).lines)


async def test_a_run_started_from_the_command_line_is_followed(
    home, make_app, runs_dir, settle
) -> None:
    with SandboxServer(latency_ms=250.0) as server:
        ProfileStore().save(Profile("sim", "openai", server.base_url, SIM_MODEL, no_key=True))
        process = _start_cli_run(
            runs_dir, "--profile", "sim", "--suite", "basic", "--repeat", "3",
            "--concurrency", "2",
        )  # fmt: skip
        try:
            app = make_app(start_mode="run")
            async with app.run_test(size=SIZE) as pilot:
                screen = app.screen
                assert isinstance(screen, RunScreen)
                await _until(pilot, lambda: screen.live is not None, 30, "the CLI's run")
                live = screen.live
                assert live is not None and live.followed
                await _until(pilot, lambda: live.done >= 2, 60, "two attempts")
                screen.redraw()
                title = str(screen.query_one("#run-title").render())
                assert live.run_id in title and "started elsewhere" in title
                assert "· builtin" in title  # the run's agent (and client, when recorded)
                assert "No run yet" not in title
                assert live.total == len(live.task_ids) * 3
                assert any(c in ("pass", "fail") for c in live.cells.values())
                await _until(pilot, lambda: "[call" in _log_text(screen), 30, "a call line")
                assert process.wait(timeout=120) == 0, (
                    process.stderr.read() if process.stderr else ""
                )
                await _until(pilot, lambda: live.finished, 30, "the run to end")
                assert live.status == "completed" and live.done == live.total
                # A followed run is not this app's to quit over.
                assert live not in app.unfinished_runs()
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()


@pytest.mark.keyring
async def test_a_codex_run_followed_shows_the_commands_it_ran(
    home, make_app, runs_dir, tmp_path, monkeypatch
) -> None:
    from driftdesk.providers.keys import set_key

    monkeypatch.setenv("PATH", f"{real_client('codex').parent}{os.pathsep}{os.environ['PATH']}")
    suite = write_coding_suite(tmp_path / "suite", [CODING_TASKS[0]])  # fix-add, always right
    with SandboxServer(seed=0, suites=[suite], linger_s=0.3, latency_ms=300.0) as server:
        ProfileStore().save(Profile("codex-sim", "openai", server.base_url, SIM_MODEL))
        set_key("codex-sim", "sk-test-follow-codex-0123456789")
        process = _start_cli_run(
            runs_dir, "--profile", "codex-sim", "--suite", str(suite), "--agent", "codex",
            "--repeat", "2", "--concurrency", "1", "--timeout", "180",
        )  # fmt: skip
        try:
            app = make_app(start_mode="run")
            async with app.run_test(size=SIZE) as pilot:
                screen = app.screen
                assert isinstance(screen, RunScreen)
                await _until(pilot, lambda: screen.live is not None, 60, "the CLI's run")
                await _until(
                    pilot,
                    lambda: (
                        "$ python3 -c 'import calc; print(calc.add(2, 3))'" in _log_text(screen)
                    ),
                    240,
                    "the client's last command in the followed log",
                )
                text = _log_text(screen)
                # Every command of the sandbox's script, as the client ran it, in its order.
                script = CODING_TASKS[0]["simulated"]["commands"]
                shown = [line[2:] for line in text.splitlines() if line.startswith("$ ")]
                assert shown[: len(script)] == script
                assert '{"cmd"' not in text and "\\'" not in text
                assert process.wait(timeout=240) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
