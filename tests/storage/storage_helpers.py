"""Helpers of the object-storage tests: runs on disk to publish, a sandbox profile, a plain
install (no fsspec) for a subprocess."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis_fixtures import attempt_row, write_run

REAL_KEY = "sk-test-REALKEY-storage-0123456789ab"
SECRET = "storage-SECRET-do-not-write-0123456789abcdef"  # the store's secret key
ACCESS_KEY = "AKIASTORAGETESTKEY01"


@dataclass
class Bucket:
    """A bucket of the loopback S3 server, and an s3fs client of it."""

    name: str
    endpoint: str
    fs: Any

    def url(self, *names: str) -> str:
        return "/".join([f"s3://{self.name}", *names])

    def objects(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        path = f"{self.name}/{prefix}".rstrip("/")
        self.fs.invalidate_cache()
        return dict(self.fs.find(path, detail=True))


def history(root: Path, machine: str, nights: int, tasks: int = 4, repeat: int = 3) -> list[Path]:
    """``nights`` completed runs of one suite under ``root``, as one machine wrote them: some
    link errors, retried tries (``retries``), a flaky task."""
    made = []
    for night in range(nights):
        run_id = f"{machine}-night{night:02d}"
        rows: list[dict[str, Any] | str] = []
        for t in range(tasks):
            for attempt in range(repeat):
                if t == 0 and attempt == 0 and night % 2:
                    outcome = "link_error"
                else:
                    outcome = "pass" if (t + attempt + night) % 3 else "fail"
                rows.append(
                    attempt_row(
                        run_id, f"task-{t}", attempt, outcome, retries=attempt % 2,
                        started_at=f"2026-11-{night + 1:02d}T0{t}:00:00.000Z",
                    )
                )  # fmt: skip
        run = write_run(
            root, run_id, rows, tasks=[f"task-{t}" for t in range(tasks)], repeat=repeat
        )
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["started_at"] = f"2026-11-{night + 1:02d}T0{'12'[machine < 'b']}:00:00Z"
        (run / "manifest.json").write_text(json.dumps(manifest, indent=2))
        made.append(run)
    return made


@contextlib.contextmanager
def objects_read_whole() -> Iterator[list[str]]:
    """The paths of the objects a reader of ``s3://`` fetches whole while in the block (its
    botocore client's reads, from any thread)."""
    from driftdesk.rundir import s3_client

    seen: list[str] = []
    real = s3_client.BotocoreS3.fetch_object

    def counting(self: s3_client.BotocoreS3, stored: Any) -> bytes:
        seen.append(stored.path)
        return real(self, stored)

    s3_client.BotocoreS3.fetch_object = counting  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        s3_client.BotocoreS3.fetch_object = real  # type: ignore[method-assign]


def publish_live(url: str, run_dir: Path) -> None:
    """Publish ``run_dir`` to ``url`` as a run going on is: its rows as parts from the first
    byte, its manifest, its lock held, no seal (a pushed run's parts are dropped once sealed)."""
    from driftdesk.reruns.publish import Publisher

    Publisher(url, run_dir.parent, run_dir=run_dir).tick()


def cli_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(extra)
    return env


# Run at start-up (``sitecustomize``): the path finder finds no fsspec nor s3fs, as on an
# install without the extra (``import`` fails, ``importlib.util.find_spec`` says None).
_HIDE_THE_EXTRA = """
from importlib.machinery import PathFinder

_find = PathFinder.find_spec.__func__


def _without_the_extra(cls, fullname, path=None, target=None):
    if fullname.split(".")[0] in ("fsspec", "s3fs"):
        return None
    return _find(cls, fullname, path, target)


PathFinder.find_spec = classmethod(_without_the_extra)
"""


def without_fsspec(tmp: Path) -> dict[str, str]:
    """The environment of a plain install: fsspec and s3fs are not there (their import
    fails, and looking them up finds nothing), as without the extra."""
    blocker = tmp / "plain-install"
    blocker.mkdir(exist_ok=True)
    (blocker / "sitecustomize.py").write_text(_HIDE_THE_EXTRA)
    return cli_env(PYTHONPATH=f"{blocker}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")


def driftdesk(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
              timeout: float = 120) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "driftdesk", *args],
        capture_output=True, text=True, env=env if env is not None else dict(os.environ),
        cwd=cwd, timeout=timeout,
    )  # fmt: skip


def json_of(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
