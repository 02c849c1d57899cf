"""``driftdesk run --executor ray``: each attempt's work runs as a Ray task on a cluster.

The split (docs/ARCHITECTURE.md, "Scaling out with Ray"):

- the **driver** (the ``driftdesk run`` process) keeps the metering proxy, the real key, the
  run dir and its single writer. Per try it opens an attempt token, submits one Ray task, and
  turns what comes back into the row, the log, the check output and the diff in the run dir;
- a **worker** (``ray_worker.worker_attempt``, in a Ray worker process on any node) gets the task, the
  proxy URL with the attempt's token and the run's throwaway key — never the real key — and
  does the work in a private temporary folder: workspace copy, setup, agent, check, diff. It
  writes nothing the driver owns; it sends back the capped log, the result file, the check
  output and the diff, then removes its folder.

``ray`` is an optional dependency (``pip install 'driftdesk[ray]'``): it is imported only
when ``--executor ray`` is asked for.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from driftdesk.reruns.ray_worker import AttemptJob, pack_folder, worker_attempt
from driftdesk.reruns.suites import Task

EXECUTORS = ("local", "ray")
INSTALL_HINT = "--executor ray needs the ray extra: pip install 'driftdesk[ray]'"
START_HINT = (
    "start one first (`ray start --head --node-ip-address=127.0.0.1` on this machine, or see "
    "docs/ARCHITECTURE.md), or give --ray-address ray://HOST:PORT"
)
NODE_LOST = "node_lost"  # error_code of an attempt whose node died after it called the model


class RayUnavailable(RuntimeError):
    """``--executor ray`` cannot run: no ray installed, no cluster, a bad setting."""


class NodeLost(Exception):
    """The attempt's node (or its worker process) died before the attempt came back."""


@dataclass(frozen=True)
class RaySettings:
    """Where and how attempts run on Ray (kept in the run's manifest for ``resume``)."""

    address: str = "auto"
    resources: dict[str, float] = field(default_factory=dict)

    def manifest(self) -> dict[str, Any]:
        return {"kind": "ray", "ray_address": self.address, "ray_resources": dict(self.resources)}

    @classmethod
    def from_manifest(cls, info: dict[str, Any]) -> RaySettings:
        return cls(
            address=str(info.get("ray_address") or "auto"),
            resources={str(k): float(v) for k, v in (info.get("ray_resources") or {}).items()},
        )


def parse_resources(text: str | None) -> dict[str, float]:
    """``--ray-resources '{"CPU": 2, "GPU": 1, "my_label": 1}'``: what each attempt asks for."""
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(
            f'--ray-resources is not JSON ({exc.msg}): use e.g. {{"CPU": 2}}'
        ) from None
    if not isinstance(data, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) and v >= 0 for v in data.values()
    ):
        raise ValueError('--ray-resources must be a JSON object of numbers >= 0, e.g. {"CPU": 2}')
    return {str(k): float(v) for k, v in data.items()}


def check_address(address: str) -> str:
    """``auto`` (the cluster this machine belongs to), ``ray://HOST:PORT`` (Ray Client) or
    ``HOST:PORT`` (a head node's GCS)."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or (sep and host and port.isdigit()):
        return address
    raise ValueError(f"--ray-address {address!r}: use auto, ray://HOST:PORT or HOST:PORT")


def task_options(resources: dict[str, float]) -> dict[str, Any]:
    """Ray task options: the resources asked for, and no retry by Ray itself — a task Ray
    reran behind our back could call the model twice for one slot (we decide, see NodeLost)."""
    options: dict[str, Any] = {"max_retries": 0, "retry_exceptions": False}
    custom = dict(resources)
    options["num_cpus"] = custom.pop("CPU", 1.0)
    if "GPU" in custom:
        options["num_gpus"] = custom.pop("GPU")
    if "memory" in custom:
        options["memory"] = custom.pop("memory")
    if custom:
        options["resources"] = custom
    return options


# --- the driver's side ----------------------------------------------------------------------


_connections = 0  # runs of this process connected to Ray (one process, one Ray connection)
_connections_lock = threading.Lock()


class RayCluster:
    """The driver's connection to the cluster, for one execution of a run. Two runs of one
    process (the TUI's) share Ray's one connection; the last to end closes it."""

    def __init__(self, settings: RaySettings) -> None:
        self.settings = settings
        self.dashboard_url: str | None = None
        self.node_ip = "127.0.0.1"
        self._remote: Any = None
        self._connected = False
        self._options = task_options(settings.resources)
        self._workspaces: dict[Path, Any] = {}

    def connect(self) -> None:
        try:
            import ray
        except ImportError:
            raise RayUnavailable(INSTALL_HINT) from None
        global _connections
        with _connections_lock:
            try:
                context = ray.init(
                    address=self.settings.address,
                    log_to_driver=False,  # the worker's output comes back in the attempt's log
                    namespace="driftdesk",
                    ignore_reinit_error=True,
                )
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RayUnavailable(
                    f"no Ray cluster at {self.settings.address} ({str(exc).splitlines()[0]}): "
                    + START_HINT
                ) from None
            _connections += 1
            self._connected = True
        url = getattr(context, "dashboard_url", None)
        if url:
            self.dashboard_url = url if "://" in url else f"http://{url}"
        self.node_ip = ray.util.get_node_ip_address()
        self._remote = ray.remote(worker_attempt)

    def close(self) -> None:
        """Idempotent: the run's end, and any failure on the way to it, call it."""
        global _connections
        self._workspaces.clear()
        with _connections_lock:
            if not self._connected:
                return
            self._connected = False
            _connections -= 1
            if _connections == 0:
                import ray

                ray.shutdown()

    def nodes_without(self, executable: str) -> list[str]:
        """The alive nodes where ``executable`` is not on the PATH (of the node's workers), by
        a tiny task pinned to each node. A node that dies before its probe runs is left out:
        it is gone, not lacking the client (GCS lists a killed node as alive until its health
        check gives up on it, so a node lost just before a run is still listed)."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        probe = ray.remote(_which)
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        refs = [
            probe.options(
                num_cpus=0,
                max_retries=0,
                scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
            ).remote(executable)
            for n in nodes
        ]
        _, unanswered = ray.wait(refs, num_returns=len(refs), timeout=120)
        for ref in unanswered:  # a probe stuck on a node must not hold it after we gave up
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=True)
        lacking = []
        for node, ref in zip(nodes, refs, strict=True):
            try:
                path = ray.get(ref, timeout=0)
            except ray.exceptions.RayError as exc:
                if not _still_alive(node["NodeID"]):
                    continue
                raise RayUnavailable(
                    f"the cluster's nodes did not say whether `{executable}` is installed: "
                    f"{str(exc).splitlines()[0]}"
                ) from None
            if path is None:
                lacking.append(f"{node.get('NodeManagerAddress')}/{node['NodeID'][:8]}")
        return lacking

    def workspace_ref(self, task: Task) -> Any:
        """The task's workspace, packed and put in the object store once per run."""
        if task.workspace is None:
            return None
        ref = self._workspaces.get(task.workspace)
        if ref is None:
            import ray

            ref = self._workspaces[task.workspace] = ray.put(pack_folder(task.workspace))
        return ref

    async def run(
        self,
        job: AttemptJob,
        on_placed: Callable[[dict[str, Any]], None],
        on_output: Callable[[str, str], None],
    ) -> dict[str, Any]:
        """Run ``job`` as a Ray task; ``on_placed`` is told where once it starts, ``on_output``
        each output line (stream, text) as the node sends it. Raises ``NodeLost`` when the
        node or worker died under it."""
        import ray
        from ray import exceptions

        generator = self._remote.options(num_returns="streaming", **self._options).remote(job)
        try:
            async for ref in generator:
                value = await ref
                if "node_id" in value:
                    on_placed(value)
                elif "output" in value:
                    for stream, text in value["output"]:
                        on_output(stream, text)
                else:
                    return dict(value)
        except exceptions.RayTaskError as exc:  # our code raised in the worker: a bug
            raise RuntimeError(str(exc).splitlines()[-1] if str(exc) else repr(exc)) from None
        except exceptions.RayError as exc:  # the worker or its node died
            raise NodeLost(f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
        except BaseException:
            with contextlib.suppress(Exception):
                ray.cancel(generator, force=True)
            raise
        raise NodeLost("the Ray task ended without a result")


def _still_alive(node_id: str) -> bool:
    import ray

    try:
        nodes = ray.nodes()
    except Exception as exc:  # GCS unreachable: whatever Ray raises for it
        said = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RayUnavailable(f"the cluster did not list its nodes: {said}") from None
    return any(n["NodeID"] == node_id and n.get("Alive") for n in nodes)


def _which(executable: str) -> str | None:
    return shutil.which(executable)


def import_check() -> None:
    """Refuse ``--executor ray`` early (before a run dir exists) when ray is not installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise RayUnavailable(INSTALL_HINT) from None
