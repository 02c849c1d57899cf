"""--inject with the REAL Claude Code and Codex clients against the sandbox: a 429, a 500 and a
Messages / Responses stream cut mid-answer reach the client as a faulty gateway would send them,
driftdesk's retries show as calls after the injected one, and every fault is accounted for."""

from __future__ import annotations

from pathlib import Path

import pytest
from coding_helpers import write_coding_suite
from reruns_helpers import client_profile, read_rows

from driftdesk.analysis.injection_report import read_injection
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SandboxServer

REAL_KEY = "sk-test-REALKEY-inject-clients-0123456789"


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
@pytest.mark.parametrize("fault", ["429", "500", "truncate"])
async def test_an_injected_fault_on_the_first_call_is_retried_and_accounted_for(
    agent: str, fault: str, clients_on_path: None, tmp_path: Path
) -> None:
    suite = write_coding_suite(tmp_path / "suite")
    spec = f"{fault}=100%" + (":0.05s" if fault == "429" else "")
    with SandboxServer(seed=7, suites=[suite], linger_s=0.3) as server:
        outcome = await execute_run(
            RunSpec(
                profile=client_profile(agent, server),
                suite=str(suite),
                tasks=["fix-add"],
                repeat=1,
                timeout_s=120.0,
                out_dir=tmp_path / "runs",
                api_key=REAL_KEY,
                agent=agent,  # type: ignore[arg-type]
                retry_policy=RetryPolicy(max_retries=1, base_delay_s=0.05, max_delay_s=0.1),
                inject=spec,
                link_faults="retry",  # the client sees each fault
            )
        )
        requests = server.stats.requests
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    model_calls = [c for c in calls if c["path"].endswith(("/messages", "/responses"))]
    # Every model call is faulted: each try ends on it; a 429 or 500 is retried by driftdesk (the
    # clients' own retries are off), a cut stream is not (truncated is no retryable error).
    retries = 0 if fault == "truncate" else 1
    assert len(model_calls) >= 1 + retries
    assert all(c["injected"] == fault for c in model_calls)
    expected_kind = "truncated" if fault == "truncate" else fault
    assert {c["error_kind"] for c in model_calls} == {expected_kind}
    assert (row["outcome"], row["error_code"], row["retries"]) == (
        "link_error",
        expected_kind,
        retries,
    )
    assert row["injected_faults"] == row["injected_surfaced"] == len(model_calls)
    assert row["injected_misattributed"] == 0
    # 429 and 500 never reached the provider; a truncated answer did (and was cut).
    assert requests == (len(model_calls) if fault == "truncate" else 0) + len(calls) - len(
        model_calls
    )


@pytest.mark.timeout(600)
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
async def test_a_small_faulted_run_accounts_for_every_fault(
    agent: str, clients_on_path: None, tmp_path: Path
) -> None:
    suite = write_coding_suite(tmp_path / "suite")
    with SandboxServer(seed=7, suites=[suite], linger_s=0.3) as server:
        outcome = await execute_run(
            RunSpec(
                profile=client_profile(agent, server),
                suite=str(suite),
                tasks=["fix-add", "rename"],
                repeat=2,
                concurrency=4,
                timeout_s=120.0,
                seed=4,
                out_dir=tmp_path / "runs",
                api_key=REAL_KEY,
                agent=agent,  # type: ignore[arg-type]
                retry_policy=RetryPolicy(max_retries=4, base_delay_s=0.05, max_delay_s=0.1),
                inject="429=20%:0.05s,500=10%,truncate=10%",
                link_faults="retry",  # the client sees each fault
            )
        )
    summary = read_injection(outcome.run_dir)
    assert summary is not None
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    injected = [c for c in calls if c["injected"]]
    total = summary.total
    print(f"{agent}: {len(calls)} calls, {summary.spec}: {total}")
    assert injected and total.faults == len(injected)
    assert summary.accounted
    assert total.misattributed == 0, summary.misattributed_attempts
