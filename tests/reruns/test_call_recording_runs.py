"""Call recordings in whole runs: on by default, off with --no-bodies or the profile's
``record_bodies = false``, as the manifest says on resume; and ``driftdesk run`` end to end
(the real CLI against the sandbox) leaving one recording per slot that joins calls.jsonl."""

from __future__ import annotations

import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from recording_helpers import joined_to_calls, read_records, recording_of
from reruns_helpers import read_rows

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns import rundir
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run, resume_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.rundir import RECORDING_SUFFIX, read_manifest

TASK = "invoice-7_2"


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(seed=3) as server:
        yield server


def _sim(sandbox: SandboxServer, **fields: Any) -> Profile:
    url = sandbox.base_url
    return Profile(
        name="sim", protocol="openai", base_url=url, model=SIM_MODEL, no_key=True, **fields
    )


async def test_no_bodies_and_a_profile_that_says_so_write_no_recording_and_resume_follows(
    sandbox: SandboxServer, tmp_path: Path
) -> None:
    spec = {"suite": "basic", "repeat": 1, "tasks": [TASK, "arith-01"], "timeout_s": 10}
    off = await execute_run(
        RunSpec(profile=_sim(sandbox), record_bodies=False, out_dir=tmp_path / "a", **spec)
    )
    quiet = await execute_run(
        RunSpec(profile=_sim(sandbox, record_bodies=False), out_dir=tmp_path / "b", **spec)
    )
    on = await execute_run(
        RunSpec(profile=_sim(sandbox), max_recorded_mb=0.5, out_dir=tmp_path / "c", **spec)
    )
    for outcome, expected in ((off, False), (quiet, False), (on, True)):
        assert outcome.status == "completed"
        manifest = read_manifest(outcome.run_dir)
        assert manifest["recording"]["bodies"] is expected
        found = list(outcome.run_dir.glob("attempts/*/*" + RECORDING_SUFFIX))
        assert len(found) == (2 if expected else 0)
    assert read_manifest(on.run_dir)["recording"]["max_recorded_mb"] == 0.5
    # A resume records as its run said: the --no-bodies run's redone slots get no recording.
    for outcome in (off, on):
        (outcome.run_dir / rundir.ATTEMPTS).write_text("")
        for found in outcome.run_dir.glob("attempts/*/*" + RECORDING_SUFFIX):
            found.unlink()
        resumed = await resume_run(outcome.run_dir, profile=_sim(sandbox))
        assert resumed.status == "completed"
        found = list(outcome.run_dir.glob("attempts/*/*" + RECORDING_SUFFIX))
        assert len(found) == (0 if outcome is off else 2)


def test_a_profile_keeps_record_bodies_false_through_edits(home: object) -> None:
    store = ProfileStore()
    store.save(Profile(name="p", protocol="openai", base_url="http://h/v1", model="m"))
    assert store.get("p").record_bodies is None and store.get("p").records_bodies
    store.path.write_text(store.path.read_text() + "record_bodies = false\n")
    assert store.get("p").records_bodies is False
    # A writer that does not know the setting (the TUI's form) leaves it as it is.
    store.save(Profile(name="p", protocol="openai", base_url="http://h/v1", model="m2"))
    assert store.get("p").records_bodies is False and store.get("p").model == "m2"


def test_driftdesk_run_leaves_one_recording_per_slot_joining_calls_jsonl(
    home: object, sandbox: SandboxServer, tmp_path: Path, cli: Any
) -> None:
    ProfileStore().save(_sim(sandbox))
    out = tmp_path / "runs"
    args = ["run", "--profile", "sim", "--suite", "basic", "--repeat", "2", "--concurrency", "8"]
    result = cli(*args, "--out", str(out), timeout=240)
    assert result.returncode == 0, result.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    manifest = read_manifest(run_dir)
    assert manifest["recording"] == {"bodies": True, "max_recorded_mb": 8.0}
    calls = read_rows(run_dir / rundir.CALLS)
    slots = {(t, a) for t in manifest["tasks"] for a in range(2)}
    assert len(slots) >= 60 and {(c["task_id"], c["attempt"]) for c in calls} == slots
    recordings = list(run_dir.glob("attempts/*/*" + RECORDING_SUFFIX))
    assert len(recordings) == len(slots)
    joined = 0
    for task_id, attempt in sorted(slots):
        path = recording_of(run_dir, task_id, attempt)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        records, torn = read_records(path)
        assert not torn and all(r["response"] for r in records)
        joined_to_calls(run_dir, records, task_id, attempt)
        joined += len(records)
    assert joined == len(calls)
