"""The real ``driftdesk run`` / ``resume`` / ``sandbox`` CLI in subprocesses, with the keyring."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from reruns_helpers import read_rows

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_HEADER, SIM_MODEL, SandboxServer
from driftdesk.reruns.suites import load_suite

REAL_KEY = "sk-test-REALKEY-cli-0123456789abcd"


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    server = SandboxServer(seed=3, latency_ms=40)
    server.start()
    yield server
    server.stop()


@pytest.mark.keyring
def test_kill_9_mid_run_then_resume_gives_exactly_every_slot_once(
    home: object, sandbox: SandboxServer, tmp_path: Path, cli: object
) -> None:
    ProfileStore().save(
        Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
    )
    set_key("sim", REAL_KEY)
    out = tmp_path / "runs"
    repeat = 3
    tasks = len(load_suite("basic").tasks)
    process = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite", "basic",
         "--repeat", str(repeat), "--concurrency", "4", "--timeout", "10", "--out", str(out)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )  # fmt: skip
    attempts: Path | None = None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = list(out.glob("*/attempts.jsonl"))
        if found and len(found[0].read_bytes().splitlines()) >= 12:
            attempts = found[0]
            break
        time.sleep(0.02)
    assert attempts is not None, process.stderr.read() if process.stderr else ""
    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)
    run_dir = attempts.parent
    before = read_rows(attempts)
    assert 12 <= len(before) < tasks * repeat
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"

    # A writer killed mid-row leaves a torn last line: resume drops it and says so.
    with open(attempts, "ab") as fh:
        fh.write(b'{"run_id": "torn", "task_id": "arith-01", "att')
    result = cli("resume", str(run_dir), timeout=120)  # type: ignore[operator]
    assert result.returncode == 0, result.stderr
    assert "dropped a torn last line" in result.stderr
    assert "completed" in result.stdout

    rows = read_rows(attempts)
    slots = [(r["task_id"], r["attempt"]) for r in rows]
    assert len(slots) == len(set(slots)) == tasks * repeat
    assert rows[: len(before)] == before
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed" and len(manifest["resumes"]) == 1
    assert REAL_KEY not in (run_dir / "manifest.json").read_text()
    assert all(a == f"Bearer {REAL_KEY}" for a in sandbox.stats.authorizations)


def test_run_reports_setup_errors_clearly(home: object, cli: object) -> None:
    result = cli("run", "--profile", "nope", "--suite", "basic")  # type: ignore[operator]
    assert result.returncode == 2
    assert "no profile named 'nope'" in result.stderr
    ProfileStore().save(
        Profile(name="p", protocol="openai", base_url="http://127.0.0.1:9/v1", model="m")
    )
    result = cli("run", "--profile", "p", "--suite", "no-such-suite")  # type: ignore[operator]
    assert result.returncode == 2 and "no suite 'no-such-suite'" in result.stderr
    result = cli("resume", str(Path("nowhere")))  # type: ignore[operator]
    assert result.returncode == 2 and "not a run dir" in result.stderr


def test_sandbox_cli_says_it_is_simulated(home: object) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "sandbox", "--seed", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        base_url = process.stdout.readline().strip()
        import urllib.request

        with urllib.request.urlopen(base_url + "/models", timeout=5) as response:
            assert response.headers[SIM_HEADER] == "true"
            assert json.load(response)["data"][0]["id"] == SIM_MODEL
    finally:
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=10)
    assert "SIMULATED" in err and process.returncode == 0


@pytest.mark.keyring
def test_ctrl_c_interrupts_cleanly_and_a_live_run_cannot_be_resumed_twice(
    home: object, tmp_path: Path, cli: object
) -> None:
    with SandboxServer(seed=5, latency_ms=150) as server:
        ProfileStore().save(
            Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
        )
        set_key("sim", REAL_KEY)
        out = tmp_path / "runs"
        process = subprocess.Popen(
            [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite", "basic",
             "--repeat", "6", "--concurrency", "3", "--out", str(out)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        attempts: Path | None = None
        while time.monotonic() < deadline:
            found = list(out.glob("*/attempts.jsonl"))
            if found and len(found[0].read_bytes().splitlines()) >= 3:
                attempts = found[0]
                break
            time.sleep(0.02)
        assert attempts is not None
        busy = cli("resume", str(attempts.parent))  # type: ignore[operator]
        assert busy.returncode == 2 and "another driftdesk process" in busy.stderr
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        assert f"driftdesk resume {attempts.parent}" in err
        manifest = json.loads((attempts.parent / "manifest.json").read_text())
        assert manifest["status"] == "interrupted"
        before = read_rows(attempts)
        result = cli("resume", str(attempts.parent), "--concurrency", "8", timeout=120)  # type: ignore[operator]
        assert result.returncode == 0, result.stderr
    rows = read_rows(attempts)
    slots = {(r["task_id"], r["attempt"]) for r in rows}
    assert len(rows) == len(slots) == len(load_suite("basic").tasks) * 6
    assert rows[: len(before)] == before
