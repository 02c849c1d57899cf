"""A real multi-node Ray cluster on loopback for the Ray executor's tests, and their suites.

Every node is a real raylet process (``ray.cluster_utils.Cluster``) bound to 127.0.0.1. Ray
turns a ``127.0.0.1`` address into the machine's own address unless
``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0`` (its loopback mode): that is set for the cluster, the
driver and the CLI subprocesses, so no test traffic leaves loopback.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.conftest import RAY_ROOT_PREFIX

LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}
# Ray reads these once, when it is first imported: set before any test imports it.
os.environ.update(LOOPBACK_ENV)
NODE_ARGS: dict[str, Any] = {
    "num_cpus": 1,
    "object_store_memory": 100 * 1024 * 1024,
    "node_ip_address": "127.0.0.1",
}


@dataclass
class LoopbackCluster:
    cluster: Any  # ray.cluster_utils.Cluster
    root: Path  # Ray's temp dir (sessions, logs) and the nodes' TMPDIR
    worker_tmp: Path

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    def add_node(self, **args: Any) -> Any:
        with node_environment(self.root):
            return self.cluster.add_node(**{**NODE_ARGS, **args})

    def raylet_pid(self, node: Any) -> int:
        return int(node.all_processes["raylet"][0].process.pid)

    def kill_node(self, node: Any) -> list[int]:
        """What a machine that dies does: its raylet and every process under it (the Ray
        workers, and so the harnesses they run) killed at once. A raylet killed alone leaves
        its workers running their tasks to the end (Ray 2.60): no attempt is lost then."""
        raylet = self.raylet_pid(node)
        tree, children = [raylet], _children()
        for pid in tree:
            tree.extend(children.get(pid, []))
        for pid in tree:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return tree

    @staticmethod
    def label(node: Any) -> str:
        """How the executor names a node in events and rows."""
        return f"127.0.0.1/{node.node_id[:8]}"

    def our_pids(self) -> list[int]:
        """Every live process of this cluster (its command line or environment names our root)."""
        needle = str(self.root).encode()
        found = []
        for name in os.listdir("/proc"):
            if not name.isdigit() or int(name) == os.getpid():
                continue
            try:
                with open(f"/proc/{name}/cmdline", "rb") as fh:
                    cmdline = fh.read()
                with open(f"/proc/{name}/environ", "rb") as fh:
                    environ = fh.read()
            except OSError:
                continue
            if needle in cmdline or needle in environ:
                found.append(int(name))
        return found


def _children() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as fh:
                    parent = int(fh.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(name))
    return children


@contextlib.contextmanager
def node_environment(root: Path) -> Iterator[None]:
    """What a node started now inherits: a temp folder and a home of its own under ``root``
    (a machine's own shell set-up, which a client's shell tool sources, stays out of the
    tests), loopback mode on. The test process's own values come back afterwards."""
    names = [*LOOPBACK_ENV, "TMPDIR", "HOME"]
    saved = {k: os.environ.get(k) for k in names}
    (root / "home").mkdir(exist_ok=True)
    os.environ.update(LOOPBACK_ENV)
    os.environ["TMPDIR"] = str(root / "tmp")  # the nodes' (and so the workers') temp folder
    os.environ["HOME"] = str(root / "home")
    try:
        yield
    finally:
        for key, value in saved.items():
            if key in LOOPBACK_ENV:
                continue
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _free_port() -> int:
    """A loopback port nothing listens on now. Ray's API server binds 8265 unless told
    otherwise, with no retry: whatever else holds that port (a cluster another test left
    behind, a user's own Ray) would make every cluster fail to start."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def loopback_cluster(
    nodes: int, dashboard: bool = False, head_cpus: int = 1, cpus: int = 1
) -> Iterator[LoopbackCluster]:
    """A head node and ``nodes - 1`` worker nodes (``cpus`` each, 100 MB object store each).
    Torn down on exit, failure included; a process of it outliving the shutdown is killed."""
    from ray.cluster_utils import Cluster

    # short (Ray's socket paths must fit); named so that a dead worker's cluster is found
    root = Path(tempfile.mkdtemp(prefix=RAY_ROOT_PREFIX))
    worker_tmp = root / "tmp"
    (worker_tmp / "ray").mkdir(parents=True)  # Ray notes the current cluster there
    os.environ.update(LOOPBACK_ENV)
    cluster = None
    handle = None
    try:
        with node_environment(root):
            cluster = Cluster(
                initialize_head=True,
                head_node_args={
                    **NODE_ARGS,
                    "num_cpus": head_cpus,
                    "include_dashboard": dashboard,
                    "dashboard_port": _free_port(),
                    "temp_dir": str(root),
                    "_system_config": {
                        # A killed node is declared dead within seconds, not the default ~30 s.
                        "health_check_period_ms": 1000,
                        "health_check_failure_threshold": 3,
                    },
                },
            )
            for _ in range(nodes - 1):
                cluster.add_node(**{**NODE_ARGS, "num_cpus": cpus})
            cluster.wait_for_nodes()
        handle = LoopbackCluster(cluster, root, worker_tmp)
        yield handle
    finally:
        if cluster is not None:
            with contextlib.suppress(Exception):
                cluster.shutdown()
        if handle is not None:
            deadline = time.monotonic() + 10
            while handle.our_pids() and time.monotonic() < deadline:
                time.sleep(0.2)
            for pid in handle.our_pids():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(root, ignore_errors=True)


# A harness that asks the model (through the proxy URL it is given), writes the answer into
# its workspace copy for the task's check, and dumps its own and its ancestors' environments
# (the Ray worker that runs it included) where the test can read them.
HARNESS = textwrap.dedent(
    """
    import json, os, sys, time, urllib.request
    task_id, attempt, result_path, dump_dir = sys.argv[1:5]
    if task_id.startswith("early-"):
        time.sleep(4)
    body = json.dumps({"model": os.environ["DRIFTDESK_MODEL"],
                       "messages": [{"role": "user", "content": os.environ["DRIFTDESK_PROMPT"]}]})
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
    text = answer["choices"][0]["message"]["content"].strip()
    if task_id.startswith("late-"):
        time.sleep(4)
    with open("answer.txt", "w") as fh:
        fh.write(text)
    environments, pid = {}, os.getpid()
    while pid > 1:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                environ = fh.read().decode("utf-8", "replace")
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read().decode("utf-8", "replace").replace("\\0", " ")
            with open(f"/proc/{pid}/stat") as fh:
                parent = int(fh.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
        environments[str(pid)] = {"cmdline": cmdline, "environ": environ}
        pid = parent
    name = f"{task_id}-{attempt}-{time.time_ns()}.json"
    with open(os.path.join(dump_dir, name), "w") as fh:
        json.dump(environments, fh)
    print(f"answered {text}")
    with open(result_path, "w") as fh:
        json.dump({"success": True}, fh)  # judged: the task's check decides
    """
)

# Answer tasks (one model call each) with a workspace and a check that reads the answer.
ANSWERS = {"sum-1": "383", "sum-2": "18", "sum-3": "858", "sum-4": "215", "sum-5": "3240"}


def write_suite(folder: Path, ids: dict[str, str] | None = None) -> Path:
    """A suite the sandbox plays (``suites=[path]``): each task asks a sum, its workspace holds
    a README, its check compares ``answer.txt`` (command agent) or the builtin's answer."""
    ids = ids or ANSWERS
    (folder / "ws").mkdir(parents=True, exist_ok=True)
    (folder / "ws" / "README").write_text("answer goes in answer.txt\n")
    lines = []
    for task_id, expected in ids.items():
        check = (
            f'got="$(cat answer.txt 2>/dev/null || printf %s "$DRIFTDESK_ANSWER")"; '
            f'test "$got" = "{expected}"'
        )
        lines.append(
            json.dumps(
                {
                    "task_id": task_id,
                    "prompt": f"Task {task_id}: reply with the number only.",
                    "expected": {"equals": expected},
                    "reference_answer": expected,
                    "workspace": "ws",
                    "check": check,
                }
            )
        )
    path = folder / "suite.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


VICTIM_MARK = "DDTEST_VICTIM_NODE=1"  # in the environment of the node the node-loss test kills

# The node-loss test's harness. Off the victim it asks the model once and answers. On the
# victim (its Ray worker's environment carries VICTIM_MARK) the first try there becomes the
# "caller": it asks the model, says so, and waits to be killed; the second, the "waiter",
# waits to be killed without asking. Each role's file names its slot, so which try had called
# the model when the node died is known, not left to chance.
NODE_LOSS_HARNESS = textwrap.dedent(
    """
    import json, os, sys, time, urllib.request
    task_id, attempt, result_path, roles = sys.argv[1:5]

    def on_victim():
        pid = os.getppid()
        while pid > 1:
            try:
                with open(f"/proc/{pid}/environ", "rb") as fh:
                    if b"@MARK@" in fh.read().split(b"\\0"):
                        return True
                with open(f"/proc/{pid}/stat") as fh:
                    pid = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                return False
        return False

    def take_role():
        for role in ("caller", "waiter"):
            try:
                fd = os.open(os.path.join(roles, role), os.O_CREAT | os.O_EXCL | os.O_WRONLY)
            except FileExistsError:
                continue
            os.write(fd, f"{task_id} {attempt}".encode())
            os.close(fd)
            return role
        return None

    def signal(name):
        with open(os.path.join(roles, name + ".tmp"), "w") as fh:
            fh.write(f"{task_id} {attempt}")
        os.rename(os.path.join(roles, name + ".tmp"), os.path.join(roles, name))

    role = take_role() if on_victim() else None
    if role == "waiter":
        signal("waiter-started")
        time.sleep(120)  # its node is killed before it asks the model
    body = json.dumps({"model": os.environ["DRIFTDESK_MODEL"],
                       "messages": [{"role": "user", "content": os.environ["DRIFTDESK_PROMPT"]}]})
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    answer = json.loads(urllib.request.urlopen(request, timeout=30).read())
    if role == "caller":
        signal("caller-asked")
        time.sleep(120)  # its node is killed after it asked the model
    with open("answer.txt", "w") as fh:
        fh.write(answer["choices"][0]["message"]["content"].strip())
    with open(result_path, "w") as fh:
        json.dump({"success": True}, fh)  # judged: the task's check decides
    """
).replace("@MARK@", VICTIM_MARK)
