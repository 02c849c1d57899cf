"""Ctrl-C and SIGTERM on the real ``driftdesk run``: during the set-up of a 100k-task suite and
during attempts, the process stops promptly, says how to resume, and prints no asyncio debris
(``_GatheringFuture exception was never retrieved``, ``Event loop is closed``, tracebacks)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from driftdesk.providers.profiles import Profile

KEY = "sk-test-REALKEY-signals-0123456789"
DEBRIS = (
    "Traceback",
    "never retrieved",
    "Event loop is closed",
    "Task was destroyed",
    "Exception ignored",
)


def _profile() -> None:
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore

    ProfileStore().save(
        Profile(name="sig", protocol="openai", base_url="http://127.0.0.1:9/v1", model="m")
    )
    set_key("sig", KEY)


def _run(tmp_path: Path, suite: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "run", "--profile", "sig", "--suite", str(suite),
         "--out", str(tmp_path / "runs"), "--no-probe", *extra],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip


def _wait_until_sigterm_is_caught(pid: int) -> None:
    """Until the process has its SIGTERM handler (its caught-signals mask in /proc says so):
    before that, imports are still running and SIGTERM would simply kill it."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as fh:
            caught = next(line for line in fh if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & (1 << (signal.SIGTERM - 1)):
            return
        time.sleep(0.01)
    raise AssertionError("driftdesk never installed its SIGTERM handler")


@pytest.mark.keyring
def test_sigterm_during_the_set_up_of_a_100k_task_suite_stops_it(
    home: object, tmp_path: Path
) -> None:
    _profile()
    suite = tmp_path / "big.jsonl"
    with open(suite, "w") as fh:
        for i in range(100_000):
            fh.write(json.dumps({"task_id": f"t{i}", "prompt": "q", "expected": {"equals": "x"}}))
            fh.write("\n")
    run = _run(tmp_path, suite, "--repeat", "3")
    _wait_until_sigterm_is_caught(run.pid)  # set-up starts now; it took minutes when quadratic
    run.send_signal(signal.SIGTERM)
    try:
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, (out, err)
    assert "interrupted" in err
    for debris in DEBRIS:
        assert debris not in out + err, err


HARNESS = """
import time
time.sleep(120)
"""


@pytest.mark.keyring
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_attempts_leaves_no_asyncio_debris(
    home: object, tmp_path: Path, signum: int
) -> None:
    _profile()
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps({"task_id": f"t{i}"}) + "\n" for i in range(4)))
    script = tmp_path / "sleepy.py"
    script.write_text(HARNESS)
    run = _run(
        tmp_path, suite, "--repeat", "2", "--concurrency", "4", "--agent", "command",
        "--command", f"{sys.executable} {script} {{result_path}}",
    )  # fmt: skip
    deadline = time.monotonic() + 60
    logs: list[Path] = []
    while len(logs) < 4:  # every worker has its harness running
        assert time.monotonic() < deadline, "the harnesses never started"
        time.sleep(0.1)
        logs = list((tmp_path / "runs").glob("*/attempts/*/*.log"))
    run.send_signal(signum)
    try:
        out, err = run.communicate(timeout=60)
    finally:
        run.kill()
    assert run.returncode == 130, (out, err)
    assert "driftdesk resume" in err
    for debris in DEBRIS:
        assert debris not in out + err, err
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
