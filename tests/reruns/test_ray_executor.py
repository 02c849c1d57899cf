"""``--executor ray`` on a real multi-node Ray cluster on loopback (tests/reruns/ray_helpers.py):
the same rows, calls and outcomes as a local run; the real key nowhere on the workers' side;
a lost node and a killed driver neither lose nor double a slot.

One cluster for the module (starting one takes ~10 s on two cores); the tests share one xdist
worker (``xdist_group``) so two clusters never compete for the cores.
"""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ray_helpers import ANSWERS, HARNESS, LoopbackCluster, loopback_cluster, write_suite
from reruns_helpers import read_rows

from driftdesk.layout import CHECK_OUTPUT_SUFFIX, WORKSPACE_DIFF_SUFFIX, attempt_file
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.engine import RunSpec, execute_run
from driftdesk.reruns.events import AttemptPlaced, RunEvent
from driftdesk.reruns.ray_executor import RaySettings
from driftdesk.reruns.sandbox import SIM_MODEL, SandboxServer

pytest.importorskip("ray")
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.timeout(600)]

KEY = "sk-test-REALKEY-ray-0123456789abcdef"


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    with loopback_cluster(nodes=3, dashboard=True) as running:
        yield running


class Events:
    def __init__(self) -> None:
        self.placed: list[AttemptPlaced] = []

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, AttemptPlaced):
            self.placed.append(event)


def _spec(url: str, suite: Path, tmp: Path, **more: Any) -> RunSpec:
    return RunSpec(
        profile=Profile(name="sim", protocol="openai", base_url=url, model=SIM_MODEL),
        suite=str(suite),
        repeat=4,
        concurrency=3,
        timeout_s=60,
        out_dir=tmp,
        api_key=KEY,
        **more,
    )


def _outcomes(rows: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    by_task: dict[str, Counter[str]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], Counter())[row["outcome"]] += 1
    return by_task


def _files_holding(root: Path, needle: bytes) -> list[Path]:
    found = []
    for path in root.rglob("*"):
        try:
            if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                found.append(path)
        except OSError:
            continue
    return found


@pytest.mark.parametrize("agent", ["builtin", "command"])
async def test_a_suite_on_the_cluster_is_recorded_as_a_local_run_is(
    cluster: LoopbackCluster, tmp_path: Path, agent: str
) -> None:
    suite = write_suite(tmp_path / "suite")
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    harness = tmp_path / "harness.py"
    harness.write_text(HARNESS)
    command = (
        f"{sys.executable} {harness} {{task_id}} {{attempt}} {{result_path}} {dumps}"
        if agent == "command"
        else None
    )
    rows: dict[str, list[dict[str, Any]]] = {}
    events = Events()
    for executor in ("local", "ray"):
        # The same seed on a fresh sandbox: the same draws per task, whatever ran where.
        with SandboxServer(seed=5, suites=[str(suite)]) as sandbox:
            outcome = await execute_run(
                _spec(
                    sandbox.base_url,
                    suite,
                    tmp_path / executor,
                    agent=agent,
                    command=command,
                    executor=executor,
                    ray=RaySettings(address=cluster.address),
                ),
                events if executor == "ray" else None,
            )
        assert outcome.status == "completed", outcome.reason
        rows[executor] = read_rows(outcome.run_dir / "attempts.jsonl")
        if executor == "ray":
            run_dir = outcome.run_dir
    ray_rows = rows["ray"]
    # tasks x repeats rows, each slot exactly once.
    slots = [(r["task_id"], r["attempt"]) for r in ray_rows]
    assert sorted(slots) == sorted((t, a) for t in ANSWERS for a in range(4))
    # Outcomes identical in distribution (per task) to the local run with the same seed.
    assert _outcomes(ray_rows) == _outcomes(rows["local"])
    assert {r["outcome"] for r in ray_rows} <= {"pass", "fail"}
    # Every call metered by the driver's proxy, attributed to its attempt.
    calls = read_rows(run_dir / "calls.jsonl")
    per_slot = Counter((c["task_id"], c["attempt"]) for c in calls)
    assert per_slot == Counter({s: 1 for s in slots})
    assert all(r["calls"] == 1 and r["total_tokens"] for r in ray_rows)
    # Ran on more than one node; each row says where.
    nodes = {r["node"] for r in ray_rows}
    assert len(nodes) >= 2, nodes
    assert {e.node for e in events.placed} == nodes
    assert all(n.startswith("127.0.0.1/") for n in nodes)
    # The node's files came back: the check's output and the workspace diff (answer.txt).
    for row in ray_rows:
        check = attempt_file(run_dir, row["task_id"], row["attempt"], CHECK_OUTPUT_SUFFIX)
        assert "[driftdesk] check exit code" in check.read_text()
        diff = attempt_file(run_dir, row["task_id"], row["attempt"], WORKSPACE_DIFF_SUFFIX)
        assert (agent == "builtin") or "answer.txt" in diff.read_text()
    manifest = (run_dir / "manifest.json").read_text()
    assert '"kind": "ray"' in manifest and cluster.address in manifest
    # The real key: not in any worker's environment, nor in any file on the workers' side.
    if agent == "command":
        dumped = list(dumps.glob("*.json"))
        assert len(dumped) >= 2 * len(slots)  # local and ray tries
        texts = [p.read_text() for p in dumped]
        assert all(KEY not in t for t in texts)
        # The chain of processes above a harness on the cluster includes the Ray worker.
        assert any("default_worker" in t or "ray::" in t for t in texts)
    for pid in cluster.our_pids():
        try:
            assert KEY.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
    assert _files_holding(cluster.root, KEY.encode()) == []
    assert list(cluster.worker_tmp.glob("driftdesk-ray-*")) == []  # workers clean up
