"""``--executor ray`` on a real multi-node Ray cluster on loopback (tests/reruns/ray_helpers.py):
the same rows, calls and outcomes as a local run; the real key nowhere on the workers' side;
a lost node and a killed driver neither lose nor double a slot.

One two-node cluster for the module (starting one takes ~10 s on two cores; the node-loss test
adds a third and kills it); the tests share one xdist worker (``xdist_group``, with
``--dist loadgroup`` as ./run tests passes it) so two clusters never compete for the cores.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from coding_helpers import PROBE_TASK, write_coding_suite
from ray_helpers import (
    ANSWERS,
    HARNESS,
    NODE_LOSS_HARNESS,
    VICTIM_MARK,
    LoopbackCluster,
    loopback_cluster,
    write_suite,
)
from reruns_helpers import read_rows

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.events import AttemptOutput, AttemptPlaced, RunEvent
from driftdesk.reruns.ray_executor import RaySettings
from driftdesk.reruns.run_spec import RunSetupError, RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.rundir import (
    CHECK_OUTPUT_SUFFIX,
    CLIENT_HOME_SUFFIX,
    CLIENT_OUTPUT_SUFFIX,
    WORKSPACE_DIFF_SUFFIX,
    attempt_file,
)
from tests.conftest import real_client

# Each test skips (counted by tests/conftest.py as a missing Ray), rather than the module.
RAY_MISSING = importlib.util.find_spec("ray") is None
if RAY_MISSING and os.environ.get("CI"):  # CI installs the extra (./run tests): a failure
    raise ImportError("ray is not installed")
pytestmark = [
    pytest.mark.skipif(
        RAY_MISSING, reason="ray is not installed: run ./run tests (it installs driftdesk[ray])"
    ),
    pytest.mark.xdist_group("ray"),
    pytest.mark.timeout(600),
]

KEY = "sk-test-REALKEY-ray-0123456789abcdef"
ROOT = Path(__file__).resolve().parents[2]


def _clients_folder() -> Path | None:
    """Where the real Claude Code and Codex are (None: not installed here, outside CI)."""
    folder = Path(os.environ.get("DRIFTDESK_TEST_CLIENTS") or ROOT / ".tools/npm/node_modules/.bin")
    return folder if (folder / "claude").exists() and (folder / "codex").exists() else None


@pytest.fixture(scope="module")
def cluster() -> Iterator[LoopbackCluster]:
    # The nodes find the real clients on the PATH they were started with, as a node a team
    # installed them on would; this test process (the driver) does not have them on its PATH.
    saved = os.environ["PATH"]
    folder = _clients_folder()
    if folder is not None:
        os.environ["PATH"] = f"{folder}{os.pathsep}{saved}"
    try:
        with loopback_cluster(nodes=2, dashboard=True) as running:
            os.environ["PATH"] = saved
            yield running
    finally:
        os.environ["PATH"] = saved


class Events:
    def __init__(self) -> None:
        self.placed: list[AttemptPlaced] = []

    def on_event(self, event: RunEvent) -> None:
        if isinstance(event, AttemptPlaced):
            self.placed.append(event)


def _spec(url: str, suite: Path, tmp: Path, **more: Any) -> RunSpec:
    settings: dict[str, Any] = {"repeat": 4, "concurrency": 3, "timeout_s": 60, **more}
    return RunSpec(
        profile=Profile(name="sim", protocol="openai", base_url=url, model=SIM_MODEL),
        suite=str(suite),
        out_dir=tmp,
        api_key=KEY,
        **settings,
    )


def _harness_command(tmp: Path) -> tuple[str, Path]:
    """The --command template of the test harness, and where it dumps environments."""
    dumps = tmp / "dumps"
    dumps.mkdir()
    harness = tmp / "harness.py"
    harness.write_text(HARNESS)
    return f"{sys.executable} {harness} {{task_id}} {{attempt}} {{result_path}} {dumps}", dumps


async def _ray_run(
    cluster: LoopbackCluster, suite: Path, out: Path, listener: Any, **more: Any
) -> Any:
    with SandboxServer(seed=5, suites=[str(suite)]) as sandbox:
        spec = _spec(
            sandbox.base_url,
            suite,
            out,
            executor="ray",
            ray=RaySettings(address=cluster.address),
            **more,
        )
        return await execute_run(spec, listener)


def _outcomes(rows: list[dict[str, Any]]) -> dict[str, Counter[str]]:
    by_task: dict[str, Counter[str]] = {}
    for row in rows:
        by_task.setdefault(row["task_id"], Counter())[row["outcome"]] += 1
    return by_task


def _assert_key_nowhere_on_the_cluster(cluster: LoopbackCluster) -> None:
    """Not in the environment of any process of the cluster (Ray workers, harnesses, clients),
    nor in any file under its session, temp and home folders."""
    for pid in cluster.our_pids():
        try:
            assert KEY.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
    assert _files_holding(cluster.root, KEY.encode()) == []


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
    harness_command, dumps = _harness_command(tmp_path)
    command = harness_command if agent == "command" else None
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
    _assert_key_nowhere_on_the_cluster(cluster)
    assert list(cluster.worker_tmp.glob("driftdesk-ray-*")) == []  # workers clean up


def run_children(run_id: str) -> list[int]:
    """Processes (harnesses) still carrying the run's mark in their environment."""
    needle = f"DRIFTDESK_RUN_CHILD={run_id}".encode()
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if needle in Path(f"/proc/{name}/environ").read_bytes().split(b"\0"):
                    found.append(int(name))
            except OSError:
                continue
    return found


@pytest.mark.keyring
def test_driver_killed_with_9_then_resume_on_ray_completes_exactly(
    cluster: LoopbackCluster, home: object, tmp_path: Path, cli: Any
) -> None:
    # Each attempt calls the model, then works 4 s: a kill always finds some in flight.
    ids = {f"late-{n}": value for n, value in enumerate(ANSWERS.values())}
    suite = write_suite(tmp_path / "suite", ids)
    command, _ = _harness_command(tmp_path)
    out = tmp_path / "runs"
    repeat = 2
    with SandboxServer(seed=5, suites=[str(suite)]) as sandbox:
        ProfileStore().save(
            Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
        )
        set_key("sim", KEY)
        process = subprocess.Popen(
            [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite", str(suite),
             "--agent", "command", "--command", command, "--repeat", str(repeat),
             "--concurrency", "3", "--timeout", "60", "--out", str(out), "--no-probe",
             "--executor", "ray", "--ray-address", cluster.address],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        attempts: Path | None = None
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and process.poll() is None:
            found = list(out.glob("*/attempts.jsonl"))
            if found and len(found[0].read_bytes().splitlines()) >= 3:
                attempts = found[0]
                break
            time.sleep(0.05)
        if attempts is None:
            process.kill()
            _, err = process.communicate(10)
            pytest.fail(f"no rows before the deadline: {err.decode()[-3000:]}")
        os.kill(process.pid, signal.SIGKILL)
        _, err = process.communicate(10)
        assert "attempts run on Ray; dashboard: http://127.0.0.1:" in err.decode()
        run_dir = attempts.parent
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["status"] == "running"
        before = read_rows(attempts)
        assert 3 <= len(before) < len(ids) * repeat
        # The attempts the dead driver left on the cluster are ended by Ray (the driver's job
        # died): no harness of the run survives it.
        deadline = time.monotonic() + 60
        while run_children(manifest["run_id"]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert run_children(manifest["run_id"]) == []

        result = cli("resume", str(run_dir), "--executor", "ray", timeout=300)
        assert result.returncode == 0, result.stderr
        assert "completed" in result.stdout
    rows = read_rows(attempts)
    slots = [(r["task_id"], r["attempt"]) for r in rows]
    assert len(slots) == len(set(slots)) == len(ids) * repeat
    assert rows[: len(before)] == before
    assert {r["outcome"] for r in rows} <= {"pass", "fail"}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "completed"
    assert manifest["resumes"][-1]["executor"]["kind"] == "ray"
    assert KEY not in (run_dir / "manifest.json").read_text()


async def test_a_node_killed_mid_run_loses_and_doubles_no_slot(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """A node with two CPUs dies (its raylet and its workers, SIGKILL) while it runs two tries:
    one that has called the model (recorded ``harness_error`` ``node_lost``, never run twice)
    and one that has not (run once more on a live node). Both are there every time: the
    harness on that node takes the two roles (``NODE_LOSS_HARNESS``), and the node is killed
    once the caller's call is made and the waiter has started."""
    name, value = VICTIM_MARK.split("=")
    os.environ[name] = value  # what the node's raylet, and so its workers, start with
    try:
        victim = cluster.add_node(num_cpus=2)
    finally:
        del os.environ[name]
    cluster.cluster.wait_for_nodes()
    victim_label = cluster.label(victim)
    ids = {f"sum-{n}": value for n, value in enumerate(["1", "2", "3", "4", "5", "6"])}
    suite = write_suite(tmp_path / "suite", ids)
    roles = tmp_path / "roles"
    roles.mkdir()
    harness = tmp_path / "harness.py"
    harness.write_text(NODE_LOSS_HARNESS)
    command = f"{sys.executable} {harness} {{task_id}} {{attempt}} {{result_path}} {roles}"
    placed: list[str] = []

    class Placements:
        def on_event(self, event: RunEvent) -> None:
            if isinstance(event, AttemptPlaced):
                placed.append(event.node)

    async def kill_when_both_roles_are_taken() -> None:
        deadline = time.monotonic() + 120
        while not ((roles / "caller-asked").exists() and (roles / "waiter-started").exists()):
            assert time.monotonic() < deadline, f"no two tries on {victim_label}: {placed}"
            await asyncio.sleep(0.1)
        cluster.kill_node(victim)

    killer = asyncio.ensure_future(kill_when_both_roles_are_taken())
    outcome = await _ray_run(
        cluster,
        suite,
        tmp_path / "out",
        Placements(),
        repeat=2,
        concurrency=5,
        agent="command",
        command=command,
    )
    await killer  # it did kill (or says why it could not)
    assert outcome.status == "completed", outcome.reason
    caller, waiter = (
        (task_id, int(attempt))
        for task_id, attempt in ((roles / r).read_text().split() for r in ("caller", "waiter"))
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    slots = [(r["task_id"], r["attempt"]) for r in rows]
    assert sorted(slots) == sorted((t, a) for t in ids for a in range(2))  # none lost, none twice
    by_slot = {(r["task_id"], r["attempt"]): r for r in rows}
    # Killed after its model call: recorded as lost, not run again.
    lost = by_slot.pop(caller)
    assert (lost["outcome"], lost["error_code"], lost["calls"]) == (
        "harness_error",
        "node_lost",
        1,
    ), lost
    assert lost["node"] == victim_label
    # Killed before any call: run once more, on a live node, and judged.
    moved = by_slot.pop(waiter)
    assert moved["outcome"] in ("pass", "fail") and moved["calls"] == 1, moved
    assert moved["node"] != victim_label
    assert {r["outcome"] for r in by_slot.values()} <= {"pass", "fail"}  # the sandbox errs too
    # Never doubled: one model call per slot, the lost node's included.
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert Counter((c["task_id"], c["attempt"]) for c in calls) == Counter({s: 1 for s in slots})


async def test_the_tui_live_pane_counts_attempts_per_node(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    """Each node has one CPU; every try waits (WAITING_HARNESS) until the pane has shown two
    nodes busy at once, so the overlap is made, not left to how fast the sandbox answers."""
    from driftdesk.tui.screens.run import _counters
    from driftdesk.tui.state import LiveRun

    harness = tmp_path / "waiting.py"
    harness.write_text(WAITING_HARNESS)
    go = tmp_path / "go"
    live = LiveRun(label="ray")
    seen: list[str] = []

    class Pane:  # the Run screen's listener, and what its counters line shows meanwhile
        def on_event(self, event: RunEvent) -> None:
            live.on_event(event)
            if isinstance(event, AttemptPlaced):
                seen.append(_counters(live).plain)
                if seen[-1].count("127.0.0.1/") >= 2:
                    go.touch()

    suite = write_suite(tmp_path / "suite", {"sum-1": "383", "sum-2": "383"})
    outcome = await _ray_run(
        cluster,
        suite,
        tmp_path / "out",
        Pane(),
        repeat=2,
        agent="command",
        command=f"{sys.executable} {harness} {{result_path}} {go}",
    )
    assert outcome.status == "completed" and live.done == 4
    assert all("ray nodes: 127.0.0.1/" in line for line in seen)
    assert all("dashboard http://127.0.0.1:" in line for line in seen)
    assert any(line.count("127.0.0.1/") >= 2 for line in seen), seen  # two nodes busy at once
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert {r["outcome"] for r in rows} == {"pass"}, rows  # none waited in vain
    assert live.running_per_node == Counter()  # every attempt left its node


def test_two_runs_of_one_process_share_the_ray_connection(cluster: LoopbackCluster) -> None:
    import ray

    from driftdesk.reruns.ray_executor import RayCluster

    first, second = (
        RayCluster(RaySettings(cluster.address)),
        RayCluster(RaySettings(cluster.address)),
    )
    first.connect()
    second.connect()
    assert first.dashboard_url and first.dashboard_url.startswith("http://127.0.0.1:")
    assert first.node_ip == "127.0.0.1"
    first.close()
    first.close()  # idempotent: counted once
    assert ray.is_initialized()  # the other run still uses it
    second.close()
    assert not ray.is_initialized()


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
async def test_the_real_clients_run_on_the_cluster_as_they_run_here(
    cluster: LoopbackCluster, tmp_path: Path, agent: str
) -> None:
    """The real Claude Code / Codex, found on the nodes' PATH (not the driver's), rerun coding
    tasks on the cluster: each slot once, the sandbox's script followed, every call metered by
    the driver's proxy, the client's output, config dir, check output and diff back in the run
    dir, and the real key nowhere on the cluster's side."""
    if _clients_folder() is None:
        real_client("claude")  # fails in CI, skips elsewhere, saying how to install them
    suite = write_coding_suite(tmp_path / "suite")
    protocol = "anthropic" if agent == "claude-code" else "openai"
    with SandboxServer(seed=7, suites=[str(suite)]) as sandbox:
        url = sandbox.root_url if agent == "claude-code" else sandbox.base_url
        outcome = await execute_run(
            RunSpec(
                profile=Profile(name="sim", protocol=protocol, base_url=url, model=SIM_MODEL),
                suite=str(suite),
                out_dir=tmp_path / "out",
                api_key=KEY,
                agent=agent,
                repeat=2,
                concurrency=2,
                timeout_s=180,
                executor="ray",
                ray=RaySettings(address=cluster.address),
            )
        )
        seen_keys = (
            set(sandbox.stats.api_keys)
            if agent == "claude-code"
            else {a.removeprefix("Bearer ") for a in sandbox.stats.authorizations}
        )
    assert outcome.status == "completed", outcome.reason
    run_dir = outcome.run_dir
    rows = read_rows(run_dir / "attempts.jsonl")
    assert sorted((r["task_id"], r["attempt"]) for r in rows) == [
        (t, a) for t in ("fix-add", "rename", "write-notes") for a in range(2)
    ]
    calls = read_rows(run_dir / "calls.jsonl")
    for row in rows:
        task, attempt = row["task_id"], row["attempt"]
        diff = attempt_file(run_dir, task, attempt, WORKSPACE_DIFF_SUFFIX).read_text()
        # The script: fix-add always right, write-notes always wrong, rename a coin flip whose
        # path shows in the attempt's diff.
        expected = {"fix-add": "pass", "write-notes": "fail"}.get(task)
        if task == "rename":
            expected = "pass" if "new.txt" in diff else "fail"
            assert ("copy.txt" in diff) == (expected == "fail"), diff
        assert row["outcome"] == expected, row
        mine = [c for c in calls if (c["task_id"], c["attempt"]) == (task, attempt)]
        assert row["calls"] == len(mine) >= 2 and all(c["status"] == 200 for c in mine)
        assert row["client_prompt_tokens"] and row["client_completion_tokens"], row
        assert row["node"].startswith("127.0.0.1/") and row["retries"] == 0
        assert attempt_file(run_dir, task, attempt, CLIENT_OUTPUT_SUFFIX).read_text().strip()
        home = attempt_file(run_dir, task, attempt, CLIENT_HOME_SUFFIX)
        assert (home / ("settings.json" if agent == "claude-code" else "config.toml")).is_file()
        log = (attempt_file(run_dir, task, attempt, ".log")).read_text()
        assert f"[{agent}] is_error=False" in log, log[-2000:]
    assert (
        "-    return a - b"
        in attempt_file(run_dir, "fix-add", 0, WORKSPACE_DIFF_SUFFIX).read_text()
    )
    notes_check = attempt_file(run_dir, "write-notes", 0, CHECK_OUTPUT_SUFFIX).read_text()
    assert "exit code 1" in notes_check
    assert len({r["node"] for r in rows}) >= 2
    assert sandbox.stats.requests == len(calls)
    assert seen_keys == {KEY}  # the driver's proxy put the real key on, and only it
    _assert_key_nowhere_on_the_cluster(cluster)
    assert _files_holding(run_dir, KEY.encode()) == []


async def test_isolate_on_the_cluster_runs_the_client_under_bubblewrap(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    if _clients_folder() is None:
        real_client("claude")
    suite = write_coding_suite(tmp_path / "suite", [PROBE_TASK])
    with SandboxServer(seed=7, suites=[str(suite)]) as sandbox:
        outcome = await execute_run(
            RunSpec(
                profile=Profile(
                    name="sim", protocol="anthropic", base_url=sandbox.root_url, model=SIM_MODEL
                ),
                suite=str(suite), out_dir=tmp_path / "out", api_key=KEY, agent="claude-code",
                repeat=2, concurrency=2, timeout_s=180, isolate=True,
                executor="ray", ray=RaySettings(address=cluster.address),
            )
        )  # fmt: skip
    assert outcome.status == "completed", outcome.reason
    for row in read_rows(outcome.run_dir / "attempts.jsonl"):
        assert row["outcome"] == "pass", row
        diff = attempt_file(outcome.run_dir, "probe", row["attempt"], WORKSPACE_DIFF_SUFFIX)
        lines = diff.read_text().splitlines()
        # What the client's shell tool wrote, read back through the diff the node sent: PID 1
        # of its namespace is bubblewrap, and the node's home is hidden from it.
        pid1 = [line for line in lines if line.startswith("+") and "--unshare-pid" in line]
        assert pid1 and pid1[0][1:].split()[0].endswith("bwrap"), lines
        assert "+hidden" in lines


def test_a_node_that_dies_while_asked_for_its_clients_is_left_out(
    cluster: LoopbackCluster,
) -> None:
    """A node listed alive and dead by the time its probe is placed (seen: the node an earlier
    test killed, still listed for a few seconds) is a node gone, not a node without the
    client: the run starts on the others instead of refusing the cluster."""
    from driftdesk.reruns.ray_executor import RayCluster

    doomed = cluster.add_node(num_cpus=1)
    connection = RayCluster(RaySettings(cluster.address))
    connection.connect()
    try:
        import ray

        assert any(n["NodeID"] == doomed.node_id and n["Alive"] for n in ray.nodes())
        cluster.kill_node(doomed)  # listed alive until the health check misses it
        assert connection.nodes_without("sh") == []
        missing = connection.nodes_without("no-such-client-here")
        assert cluster.label(doomed) not in missing
        assert cluster.label(cluster.cluster.head_node) in missing  # a live node still named
    finally:
        connection.close()


async def test_a_client_missing_on_a_node_is_refused_naming_the_node(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    folder = _clients_folder()
    saved = os.environ["PATH"]
    os.environ["PATH"] = os.pathsep.join(
        p for p in saved.split(os.pathsep) if folder is None or Path(p) != folder
    )
    try:
        bare = cluster.add_node(num_cpus=1)  # returns once the node is alive
    finally:
        os.environ["PATH"] = saved
    out = tmp_path / "out"
    try:
        suite = write_coding_suite(tmp_path / "suite")
        with pytest.raises(RunSetupError) as refused:
            await execute_run(
                RunSpec(
                    profile=Profile(
                        name="sim", protocol="openai", base_url="http://127.0.0.1:9/v1",
                        model=SIM_MODEL,
                    ),
                    suite=str(suite), out_dir=out, api_key=KEY, agent="codex", probe=False,
                    executor="ray", ray=RaySettings(address=cluster.address),
                )
            )  # fmt: skip
    finally:
        cluster.cluster.remove_node(bare)
    message = str(refused.value)
    assert cluster.label(bare) in message and "npm install -g @openai/codex" in message
    if folder is not None:  # the other nodes have it: only the bare one is named
        assert message.count("127.0.0.1/") == 1
    assert not out.exists() or not any(out.iterdir())


# A harness that prints a line, then waits for the test to have seen that line (a file the test
# writes when the line reaches it) before it answers: without live output from the node it
# waits in vain, and says so.
WAITING_HARNESS = """
import json, os, sys, time
result_path, go = sys.argv[1], sys.argv[2]
print("first line, before the answer", flush=True)
deadline = time.monotonic() + 90
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.1)
print("seen live" if os.path.exists(go) else "not seen before the end", flush=True)
with open("answer.txt", "w") as fh:  # the task's check reads it
    fh.write("383" if os.path.exists(go) else "late")
with open(result_path, "w") as fh:
    json.dump({"success": os.path.exists(go)}, fh)
"""


async def test_a_tries_output_reaches_the_driver_while_it_runs(
    cluster: LoopbackCluster, tmp_path: Path
) -> None:
    harness = tmp_path / "waiting.py"
    harness.write_text(WAITING_HARNESS)
    go = tmp_path / "go"
    suite = write_suite(tmp_path / "suite", {"sum-1": "383"})
    lines: list[str] = []

    class Follow:  # what the TUI's followed attempt gets: AttemptOutput events
        def on_event(self, event: RunEvent) -> None:
            if isinstance(event, AttemptOutput):
                lines.append(event.text)
                if "first line" in event.text:
                    go.touch()

    outcome = await _ray_run(
        cluster,
        suite,
        tmp_path / "out",
        Follow(),
        repeat=1,
        agent="command",
        command=f"{sys.executable} {harness} {{result_path}} {go}",
    )
    assert outcome.status == "completed", outcome.reason
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] == "pass", row
    assert lines[:2] == ["first line, before the answer", "seen live"]
    log = attempt_file(outcome.run_dir, "sum-1", 0, ".log").read_text()
    assert "[stdout] seen live" in log  # and the whole log still came back
