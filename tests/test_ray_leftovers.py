"""A worker that dies under a Ray test leaves its cluster's folder: the controller says what Ray
logged there (tests/conftest.py, ``pytest_testnodedown``), since xdist itself gives no cause."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import pytest

from tests.conftest import RAY_ROOT_PREFIX, ray_clusters_left_behind


def test_a_cluster_left_behind_is_named_with_rays_fatal_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    logs = tmp_path / f"{RAY_ROOT_PREFIX}abc" / "session_2026-12-02_10-00-00_1_1" / "logs"
    logs.mkdir(parents=True)
    (logs / "raylet.out").write_text(
        "[2026-12-02 10:00:01,000 I 11 11] node_manager.cc:1: all well\n"
        "[2026-12-02 10:00:02,000 C 11 11] worker_pool.cc:667:  Check failed: running_size\n"
    )
    (logs / "python-core-driver-01.log").write_text(
        "[2026-12-02 10:00:03,000 I 12 12] core_worker.cc:8: connected\n"
        "[2026-12-02 10:00:03,000 E 12 12] core_worker.cc:9: The raylet has died\n"
    )
    older = tmp_path / f"{RAY_ROOT_PREFIX}old"
    (older / "session_x" / "logs").mkdir(parents=True)
    (older / "session_x" / "logs" / "raylet.out").write_text("[t C 1 1] x.cc:1: Check failed\n")
    os.utime(older, (time.time() - 3600, time.time() - 3600))  # before this session

    lines = ray_clusters_left_behind(since=time.time() - 60)
    assert (
        lines[0]
        == f"Ray cluster left behind in {tmp_path / (RAY_ROOT_PREFIX + 'abc')}: 2 fatal lines"
    )
    assert lines[1:] == [
        "  python-core-driver-01.log: [2026-12-02 10:00:03,000 E 12 12] core_worker.cc:9: The "
        "raylet has died",
        "  raylet.out: [2026-12-02 10:00:02,000 C 11 11] worker_pool.cc:667:  Check failed: "
        "running_size",
    ]
