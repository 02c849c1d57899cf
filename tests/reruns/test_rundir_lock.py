"""The run-dir lock: a brief probe (is_live) never makes a real run or resume fail as busy."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from driftdesk.reruns.rundir import RunDirBusy, is_live, lock_run_dir, unlock_run_dir


def test_a_brief_holder_is_waited_out(tmp_path: Path) -> None:
    probe = lock_run_dir(tmp_path, wait_s=0.0)  # what is_live does, held a little longer
    threading.Timer(0.2, unlock_run_dir, args=(probe,)).start()
    fd = lock_run_dir(tmp_path, wait_s=2.0)
    assert is_live(tmp_path)  # we hold it now
    unlock_run_dir(fd)
    assert not is_live(tmp_path)


def test_a_real_holder_is_reported_busy(tmp_path: Path) -> None:
    holder = lock_run_dir(tmp_path)
    try:
        with pytest.raises(RunDirBusy, match="another driftdesk process"):
            lock_run_dir(tmp_path, wait_s=0.1)
    finally:
        unlock_run_dir(holder)
