"""``driftdesk run --agent inspect`` as a user types it: the real CLI, the real keyring, the
real inspect_ai, against the project's sandbox endpoint."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from inspect_helpers import write_task
from reruns_helpers import read_rows

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

REAL_KEY = "sk-test-REALKEY-inspect-cli-0123456789"


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    server = SandboxServer(seed=5)
    server.start()
    yield server
    server.stop()


@pytest.mark.keyring
def test_run_agent_inspect_from_the_command_line(
    home: object, sandbox: SandboxServer, tmp_path: Path, cli: Callable[..., Any]
) -> None:
    ProfileStore().save(
        Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
    )
    set_key("sim", REAL_KEY)
    task = write_task(tmp_path, ["first", "second"])
    out = tmp_path / "runs"
    done = cli(
        "run", "--profile", "sim", "--agent", "inspect", "--suite", f"{task}@arithmetic",
        "--repeat", "2", "--concurrency", "2", "--timeout", "60", "--out", str(out),
        timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("completed:")
    (run_dir,) = out.iterdir()
    rows = read_rows(run_dir / "attempts.jsonl")
    assert sorted((r["task_id"], r["attempt"]) for r in rows) == [
        ("first", 0), ("first", 1), ("second", 0), ("second", 1)
    ]  # fmt: skip
    assert {r["outcome"] for r in rows} <= {"pass", "fail"}
    assert all(r["calls"] == 1 and r["total_tokens"] for r in rows)
    calls = read_rows(run_dir / "calls.jsonl")
    assert all(c["served_model"] == SIM_MODEL and c["task_id"] for c in calls)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["tasks"] == ["first", "second"] and manifest["agent"] == "inspect"
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert REAL_KEY.encode() not in path.read_bytes(), path
    # driftdesk does not resume an inspect run: inspect's eval-retry does, then import.
    resumed = cli("resume", str(run_dir), timeout=60)
    assert resumed.returncode == 2 and "eval-retry" in resumed.stderr
