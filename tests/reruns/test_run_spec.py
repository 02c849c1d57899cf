"""The run spec's one manifest serialisation: what a new run writes is what a rerun and an
execution read back, with one set of defaults for what a manifest leaves out."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.run_spec import (
    MANIFEST_DEFAULT_CONCURRENCY,
    RunSettings,
    RunSetupError,
    RunSpec,
    check_run_spec,
    new_run_manifest,
)
from driftdesk.reruns.suites import load_suite

PROFILE = Profile(
    name="local", protocol="openai", base_url="http://127.0.0.1:9/v1", model="m", no_key=True
)


def _manifest(spec: RunSpec) -> dict:
    suite = load_suite("basic")
    return new_run_manifest(
        spec,
        run_id="r1",
        profile=PROFILE,
        suite=suite,
        task_ids=suite.task_ids,
        started=datetime(2026, 1, 1, tzinfo=UTC),
        client=None,
        executor={"kind": "local"},
        injection=None,
    )


def test_a_new_runs_manifest_reads_back_as_its_spec(tmp_path: Path) -> None:
    spec = RunSpec(
        profile="local",
        suite="basic",
        repeat=3,
        concurrency=7,
        timeout_s=33.0,
        seed=11,
        agent="command",
        command="python h.py {task_id}",
        isolate=True,
        pass_env=["HOME_*"],
    )
    manifest = _manifest(spec)
    settings = RunSettings.from_manifest(manifest)
    assert settings == RunSettings(
        agent="command",
        command="python h.py {task_id}",
        isolate=True,
        pass_env=("HOME_*",),
        repeat=3,
        concurrency=7,
        timeout_s=33.0,
        seed=11,
        link_faults="absorb",  # the command agent's default (its whole try would be rerun)
    )
    again = RunSpec.rerun_of(manifest, ["arith-01"], tmp_path / "run")
    assert again.link_faults == "absorb"
    for name in ("repeat", "concurrency", "timeout_s", "seed", "agent", "command", "isolate"):
        assert getattr(again, name) == getattr(spec, name), name
    assert again.pass_env == spec.pass_env


@pytest.mark.parametrize(
    "manifest",
    [
        {"agent": "import:tau2", "concurrency": None, "timeout_seconds": None, "repeat": None},
        {"agent": "builtin"},  # keys left out
    ],
)
def test_a_rerun_and_an_execution_read_the_same_defaults(manifest: dict, tmp_path: Path) -> None:
    """They were read twice with different defaults (a rerun ``or 4``, an execution ``, 2``);
    an imported run's rerun ran 4 at once, and still does."""
    settings = RunSettings.from_manifest(manifest)
    rerun = RunSpec.rerun_of(manifest, [], tmp_path / "run")
    assert settings.concurrency == rerun.concurrency == MANIFEST_DEFAULT_CONCURRENCY == 4
    assert settings.timeout_s == rerun.timeout_s == 120.0
    assert settings.repeat == rerun.repeat == 5
    assert rerun.agent == "builtin"  # an imported run's tasks rerun built in


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"repeat": 0}, "--repeat must be at least 1"),
        ({"concurrency": 0}, "--concurrency must be at least 1"),
        ({"timeout_s": 0}, "--timeout must be positive"),
    ],
)
def test_a_spec_is_refused_before_anything_is_looked_at(change: dict, message: str) -> None:
    spec = RunSpec(profile="no-such-profile", suite="no-such-suite", **change)
    with pytest.raises(RunSetupError, match=message):
        check_run_spec(spec)
