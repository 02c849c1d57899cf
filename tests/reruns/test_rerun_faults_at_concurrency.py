"""A few hundred attempts at high concurrency against the sandbox with injected faults, killed
with SIGKILL at a random moment and resumed: every slot exactly once in attempts.jsonl.

The bounded, in-suite version of the 10k-attempt benchmark (issue 13): real ``driftdesk run``
and ``resume`` subprocesses, the real keyring, the sandbox endpoint on loopback answering 429,
500 and hanging on a share of requests.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, FaultRates, SandboxServer
from driftdesk.reruns.suites import load_suite

REPEAT = 10
CONCURRENCY = 64


def _complete_rows(path: Path) -> list[dict]:
    rows = []
    for line in path.read_bytes().splitlines(keepends=True):
        if line.endswith(b"\n"):
            rows.append(json.loads(line))
    return rows


@pytest.mark.keyring
@pytest.mark.parametrize("seed", [5])
def test_faults_kill_9_and_resume_keep_every_slot_exactly_once(
    home: object, tmp_path: Path, seed: int
) -> None:
    faults = FaultRates(rate_limit=0.005, server_error=0.005, timeout=0.005)
    sandbox = SandboxServer(seed=seed, latency_ms=20, faults=faults, retry_after_s=0.2)
    sandbox.start()
    try:
        ProfileStore().save(
            Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
        )
        set_key("sim", "sk-test-faults-0123456789abcdef")
        out = tmp_path / "runs"
        slots = len(load_suite("basic").tasks) * REPEAT
        kill_after = random.Random(seed).randint(slots // 5, slots * 4 // 5)
        run = subprocess.Popen(
            [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite", "basic",
             "--repeat", str(REPEAT), "--concurrency", str(CONCURRENCY), "--timeout", "3",
             "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        attempts: Path | None = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and run.poll() is None:
            found = list(out.glob("*/attempts.jsonl"))
            if found and found[0].read_bytes().count(b"\n") >= kill_after:
                attempts = found[0]
                break
            time.sleep(0.01)
        assert attempts is not None, run.stderr.read() if run.stderr else ""
        os.kill(run.pid, signal.SIGKILL)
        run.wait(10)
        before = _complete_rows(attempts)
        assert kill_after <= len(before) < slots

        resumed = subprocess.run(
            [sys.executable, "-m", "driftdesk", "resume", str(attempts.parent)],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
        rows = _complete_rows(attempts)
        counts = Counter((r["task_id"], r["attempt"]) for r in rows)
        doubled = {slot: n for slot, n in counts.items() if n > 1}
        assert not doubled
        assert len(counts) == slots  # none lost
        assert rows[: len(before)] == before  # what was written before the kill is kept as is
        outcomes = Counter(r["outcome"] for r in rows)
        assert outcomes["pass"] + outcomes["fail"] > slots // 2, outcomes
        assert sandbox.stats.requests > slots  # faults were injected and retried
    finally:
        sandbox.stop()
