"""``--link-faults absorb`` on real runs: the engine against the sandbox, through the metering
proxy, with injected faults — the agent never sees one, the rows count them, the manifest
records the mode; a resume can change it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from reruns_helpers import read_rows

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.rundir import RunManifest

KEY = "sk-test-REALKEY-absorb-0123456789"
FAST_RETRIES = RetryPolicy(max_retries=4, base_delay_s=0.005, max_delay_s=0.05)


def _spec(url: str, out: Path, **overrides: Any) -> RunSpec:
    settings: dict[str, Any] = {
        "profile": Profile(name="sim", protocol="openai", base_url=url, model=SIM_MODEL),
        "suite": "basic",
        "repeat": 4,
        "concurrency": 8,
        "timeout_s": 20.0,
        "out_dir": out,
        "api_key": KEY,
        "retry_policy": FAST_RETRIES,
        "seed": 11,
        "inject": "429=10%:0.01s,500=5%",
    }
    settings.update(overrides)
    return RunSpec(**settings)


async def test_absorbing_keeps_every_injected_fault_from_the_agent(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(_spec(server.base_url, tmp_path, link_faults="absorb"))
    manifest = RunManifest.read(outcome.run_dir)
    assert manifest.link_faults == "absorb"
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    injected = [c for c in calls if c["injected"]]
    assert len(injected) >= 5
    # Every injected fault was held at the proxy: the agent saw none, nothing was retried.
    assert all(c["absorbed"] and c["wait_s"] > 0 for c in injected)
    assert all(c["error_kind"] is None for c in calls if not c["absorbed"])
    assert all(r["outcome"] in ("pass", "fail") and r["retries"] == 0 for r in rows)
    assert sum(r["absorbed_faults"] for r in rows) == len(injected)
    assert sum(r["injected_absorbed"] for r in rows) == len(injected)
    assert sum(r["injected_recovered"] for r in rows) == len(injected)
    waits = sum(c["wait_s"] for c in injected)
    assert abs(sum(r["absorbed_wait_s"] for r in rows) - waits) < 0.01


async def test_retry_mode_lets_the_agent_see_them_and_the_builtin_default_is_retry(
    tmp_path: Path,
) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(_spec(server.base_url, tmp_path))
    assert RunManifest.read(outcome.run_dir).link_faults == "retry"
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert all("absorbed" not in c for c in calls)  # rows as they were before absorbing
    assert all("absorbed_faults" not in r for r in rows)
    assert sum(r["retries"] for r in rows) >= 5  # the agent retried each fault itself


async def test_the_profile_setting_and_the_agent_kind_choose_the_mode(tmp_path: Path) -> None:
    from driftdesk.reruns.agent_kinds import AGENT_KINDS

    assert AGENT_KINDS["claude-code"].default_link_faults == "absorb"
    assert AGENT_KINDS["codex"].default_link_faults == "absorb"
    assert AGENT_KINDS["command"].default_link_faults == "absorb"
    assert AGENT_KINDS["builtin"].default_link_faults == "retry"
    assert AGENT_KINDS["inspect"].default_link_faults == "retry"
    with SandboxServer(seed=3) as server:
        profile = Profile(
            name="sim",
            protocol="openai",
            base_url=server.base_url,
            model=SIM_MODEL,
            link_faults="absorb",
        )
        outcome = await execute_run(
            _spec(server.base_url, tmp_path, profile=profile, repeat=1, inject="none")
        )
    assert RunManifest.read(outcome.run_dir).link_faults == "absorb"


async def test_a_resume_can_change_the_mode_and_records_it(tmp_path: Path) -> None:
    from driftdesk.reruns.run_start import resume_run

    with SandboxServer(seed=3) as server:
        spec = _spec(
            server.base_url,
            tmp_path,
            repeat=1,
            inject="429=100%:0.01s",
            link_faults="retry",
            retry_policy=RetryPolicy(max_retries=0, base_delay_s=0.005, max_delay_s=0.05),
        )
        outcome = await execute_run(spec)
        first = read_rows(outcome.run_dir / "attempts.jsonl")
        assert {r["outcome"] for r in first} == {"link_error"}
        await resume_run(
            outcome.run_dir,
            retry_link_errors=True,
            api_key=KEY,
            profile=spec.profile,  # type: ignore[arg-type]
            link_faults="absorb",
        )
    manifest = RunManifest.read(outcome.run_dir)
    assert manifest.link_faults == "absorb"
    assert manifest.resumes[-1]["link_faults"] == "absorb"
    rows = read_rows(outcome.run_dir / "attempts.jsonl")[len(first) :]
    assert rows and all(r["absorbed_faults"] >= 1 for r in rows)  # held before surfacing
