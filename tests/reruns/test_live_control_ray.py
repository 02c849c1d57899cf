"""A run on a Ray cluster (two nodes on loopback) is retuned and paused by ``driftdesk ctl`` as
a local run is: the driver admits attempts and gates the model calls, wherever they run."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import time
from collections import Counter
from pathlib import Path

import pytest
from ray_helpers import loopback_cluster
from reruns_helpers import read_rows, write_suite
from test_live_control import KEY, Timeline, _ctl

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import AttemptFinished, AttemptStarted
from driftdesk.reruns.ray_executor import RaySettings
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

RAY_MISSING = importlib.util.find_spec("ray") is None
if RAY_MISSING and os.environ.get("CI"):
    raise ImportError("ray is not installed")
pytestmark = [
    pytest.mark.skipif(RAY_MISSING, reason="ray is not installed: run ./run tests"),
    pytest.mark.xdist_group("ray"),
    pytest.mark.timeout(600),
]


async def test_a_ray_run_is_retuned_and_paused_by_ctl(tmp_path: Path) -> None:
    with (
        loopback_cluster(nodes=2, cpus=4) as cluster,
        SandboxServer(latency_ms=400) as server,
    ):
        timeline = Timeline()
        suite = write_suite(tmp_path / "suite.jsonl", [f"t{i}" for i in range(12)])
        spec = RunSpec(
            profile=Profile(
                name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL
            ),
            suite=str(suite),
            out_dir=tmp_path / "runs",
            api_key=KEY,
            repeat=5,
            concurrency=4,
            timeout_s=60,
            executor="ray",
            ray=RaySettings(address=cluster.address),
        )
        run = asyncio.create_task(execute_run(spec, timeline))
        deadline = time.monotonic() + 120
        while len(timeline.of(AttemptFinished)) < 4 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert timeline.run_dir is not None and not run.done()
        run_dir = str(timeline.run_dir)

        asked = time.monotonic()
        retuned = await asyncio.to_thread(_ctl, run_dir, "--concurrency", "1")
        assert retuned.returncode == 0, retuned.stderr
        await asyncio.sleep(max(0.0, asked + 1.5 - time.monotonic()))
        server.stats.peak = server.stats.in_flight
        await asyncio.sleep(1.0)
        assert server.stats.peak <= 1

        paused = await asyncio.to_thread(_ctl, run_dir, "--pause")
        assert paused.returncode == 0, paused.stderr
        started = len(timeline.of(AttemptStarted))
        await asyncio.sleep(2.0)
        assert len(timeline.of(AttemptStarted)) == started
        unpaused = await asyncio.to_thread(_ctl, run_dir, "--unpause", "--concurrency", "4")
        assert unpaused.returncode == 0, unpaused.stderr
        outcome = await run
    assert outcome.status == "completed"
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    slots = Counter((r["task_id"], r["attempt"]) for r in rows)
    assert len(slots) == 60 and set(slots.values()) == {1}
