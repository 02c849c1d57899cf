"""A run killed outright (``kill -9``: no chance to write why, the same state a manifest that
could not be written last leaves) still says why it stopped, in ``resume`` and in the runs list.
The real CLI, a real harness, a real keyring."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.rundir import PROCESS_GONE

KEY = "sk-test-REALKEY-why-0123456789"
# Waits while its marker file exists: the first run is killed while it waits; resume is quick.
SLEEPY = "import os, sys, time\nwhile os.path.exists(sys.argv[1]):\n    time.sleep(0.1)\n"


def test_a_killed_run_says_why_in_resume_and_the_runs_list(home: object, tmp_path: Path) -> None:
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore
    from driftdesk.reruns.run_facts import run_facts
    from driftdesk.rundir.catalog import discover_runs

    ProfileStore().save(
        Profile(name="why", protocol="openai", base_url="http://127.0.0.1:9/v1", model="m")
    )
    set_key("why", KEY)
    suite = tmp_path / "suite.jsonl"
    suite.write_text("".join(json.dumps({"task_id": f"t{i}"}) + "\n" for i in range(2)))
    script = tmp_path / "sleepy.py"
    script.write_text(SLEEPY)
    marker = tmp_path / "hold"
    marker.touch()
    runs = tmp_path / "runs"
    run = subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "run", "--profile", "why", "--suite", str(suite),
         "--out", str(runs), "--no-probe", "--agent", "command", "--concurrency", "2",
         "--repeat", "1", "--command", f"{sys.executable} {script} {marker}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while len(list(runs.glob("*/attempts/*/*.log"))) < 2:
            assert time.monotonic() < deadline, "the harnesses never started"
            time.sleep(0.1)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(30)
    (run_dir,) = runs.iterdir()
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "running"

    (info,) = discover_runs([runs], run_facts())
    assert (info.status, info.resumable, info.stopped_because) == (
        "interrupted",
        True,
        PROCESS_GONE,
    )

    marker.unlink()
    resumed = subprocess.run(
        [sys.executable, "-m", "driftdesk", "resume", str(run_dir), "--no-probe",
         "--concurrency", "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming; the run had stopped: {PROCESS_GONE}" in resumed.stderr, resumed.stderr
