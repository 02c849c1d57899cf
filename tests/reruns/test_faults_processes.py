"""Harness processes die with driftdesk: a real ``driftdesk run`` subprocess is killed with
``kill -9`` and every process its harness started (a child, a ``setsid`` daemon) must go; a
resume kills what a run killed together with its guards left; a background child holding
stdout open does not hold the attempt. Real CLI, real keyring, real processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from reruns_helpers import ScriptedEndpoint, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from tests.processes import alive

KEY = "sk-test-REALKEY-orphans-0123456789"

# First run: start a child and a daemon (setsid, double fork) that writes {"success": true}
# into the slot's result path after a while, then hang. The resumed run's harness exits 1
# without writing anything: if an orphan could write into the resumed slot, it would pass.
HARNESS = textwrap.dedent(
    """
    import json, os, subprocess, sys, time
    result_path, pid_dir = sys.argv[1:3]
    marker = os.path.join(pid_dir, "first-run-done")
    if os.path.exists(marker):
        time.sleep(3)
        sys.exit(1)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    daemon = subprocess.Popen([sys.executable, "-c", '''
    import json, os, sys, time
    if os.fork():
        os._exit(0)
    os.setsid()
    with open(sys.argv[1], "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(4)
    result = os.environ["DRIFTDESK_RESULT_PATH"]
    with open(result, "w") as fh:
        json.dump({"success": True}, fh)
    with open(sys.argv[2], "w") as fh:
        fh.write(result)
    time.sleep(300)
    ''', os.path.join(pid_dir, "daemon.pid"), os.path.join(pid_dir, "orphan-wrote")])
    daemon.wait()
    while not os.path.exists(os.path.join(pid_dir, "daemon.pid")):
        time.sleep(0.01)
    with open(os.path.join(pid_dir, "pids.json"), "w") as fh:
        json.dump({"harness": os.getpid(), "group": os.getpgid(0), "child": child.pid}, fh)
    open(marker, "w").close()
    time.sleep(300)
    """
)


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not (path.exists() and path.stat().st_size):
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def _wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        running = [p for p in pids if alive(p)]
        if not running:
            return []
        time.sleep(0.05)
    return [p for p in pids if alive(p)]


def _start_run(tmp_path: Path, pid_dir: Path, base_url: str) -> subprocess.Popen[str]:
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore

    ProfileStore().save(Profile(name="orph", protocol="openai", base_url=base_url, model="m"))
    set_key("orph", KEY)
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    suite = write_suite(tmp_path / "suite.jsonl", ["t"])
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "driftdesk",
            "run",
            "--profile",
            "orph",
            "--suite",
            str(suite),
            "--repeat",
            "1",
            "--timeout",
            "120",
            "--out",
            str(tmp_path / "runs"),
            "--agent",
            "command",
            "--command",
            f"{sys.executable} {script} {{result_path}} {pid_dir}",
            "--no-probe",  # the endpoint is a closed port: the harness never calls it
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _started(tmp_path: Path) -> tuple[subprocess.Popen[str], Path, dict[str, int], int]:
    """A real run whose harness has its child and its daemon up: (run, pid dir, pids, daemon)."""
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    run = _start_run(tmp_path, pid_dir, "http://127.0.0.1:9/v1")
    _wait_for(pid_dir / "pids.json")
    pids = json.loads((pid_dir / "pids.json").read_text())
    return run, pid_dir, pids, int((pid_dir / "daemon.pid").read_text())


def _resume(run_dir: Path) -> subprocess.CompletedProcess[str]:
    resumed = subprocess.run(
        [sys.executable, "-m", "driftdesk", "resume", str(run_dir), "--no-probe"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    # The resumed slot's harness exits 1 without its result file: a harness error, and a run
    # whose every attempt is one exits 4 (nothing was judged).
    assert resumed.returncode == 4, resumed.stderr
    assert "no attempt of 1 was judged" in resumed.stderr
    return resumed


@pytest.mark.keyring
def test_kill_9_of_driftdesk_run_takes_every_harness_process_with_it(
    home: object, tmp_path: Path
) -> None:
    run, pid_dir, pids, daemon = _started(tmp_path)
    everyone = [pids["group"], pids["harness"], pids["child"], daemon]  # group: the guard
    assert all(alive(p) for p in everyone)
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=10)
    assert _wait_dead(everyone) == []
    assert not (pid_dir / "orphan-wrote").exists()

    # The resumed slot is judged on its own try only: its harness exits 1 with no result.
    (run_dir,) = (tmp_path / "runs").iterdir()
    _resume(run_dir)
    (row,) = read_rows(run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"]) == ("harness_error", "no_result")


@pytest.mark.keyring
def test_resume_kills_what_a_run_killed_with_its_guard_left_behind(
    home: object, tmp_path: Path
) -> None:
    run, _, pids, daemon = _started(tmp_path)
    # Everything that could clean up dies at once: driftdesk, the guard, the harness's group.
    os.killpg(pids["group"], signal.SIGKILL)  # the guard leads the harness's group
    os.kill(run.pid, signal.SIGKILL)
    run.wait(timeout=10)
    assert _wait_dead([pids["group"], pids["harness"], pids["child"]]) == []
    assert alive(daemon)  # escaped: a setsid daemon whose reaper died first
    (run_dir,) = (tmp_path / "runs").iterdir()
    resumed = _resume(run_dir)
    assert _wait_dead([daemon], timeout=5) == []
    assert "killed 1 harness process" in resumed.stdout + resumed.stderr
    (row,) = read_rows(run_dir / "attempts.jsonl")
    assert row["outcome"] != "pass"


BACKGROUND = textwrap.dedent(
    """
    import json, subprocess, sys
    # A background child inherits stdout and outlives the harness.
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(sys.argv[1], "w") as fh:
        json.dump({"success": True}, fh)
    print("harness done", flush=True)
    """
)


async def test_a_background_child_holding_stdout_does_not_hold_the_attempt(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = tmp_path / "background.py"
    script.write_text(BACKGROUND)
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(write_suite(tmp_path / "suite.jsonl", ["t"])),
            repeat=2,
            timeout_s=60,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script} {{result_path}}",
            api_key=KEY,
        )
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [r["outcome"] for r in rows] == ["pass", "pass"]
    # The harness's exit ended each attempt, not the timeout.
    logs = list((outcome.run_dir / "attempts").rglob("*.log"))
    assert len(logs) == 2
    for log in logs:
        text = log.read_text()
        assert "[driftdesk] exit code 0" in text and "killed after" not in text
