"""--inject on real runs: the builtin agent against the sandbox, through the metering proxy."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from reruns_helpers import read_rows

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run, resume_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.rundir import read_manifest

KEY = "sk-test-REALKEY-inject-0123456789"
FAST_RETRIES = RetryPolicy(max_retries=4, base_delay_s=0.005, max_delay_s=0.05)
INJECTED_FIGURES = (
    "injected_faults",
    "injected_recovered",
    "injected_surfaced",
    "injected_misattributed",
)


def sim_profile(url: str, inject: str | None = None) -> Profile:
    return Profile(name="sim", protocol="openai", base_url=url, model=SIM_MODEL, inject=inject)


def _spec(url: str, out: Path, **overrides: Any) -> RunSpec:
    settings: dict[str, Any] = {
        "profile": sim_profile(url),
        "suite": "basic",
        "repeat": 1,
        "concurrency": 8,
        "timeout_s": 10.0,
        "out_dir": out,
        "api_key": KEY,
        "retry_policy": FAST_RETRIES,
    }
    settings.update(overrides)
    return RunSpec(**settings)


async def test_every_injected_fault_is_accounted_for_over_a_thousand_calls(
    tmp_path: Path,
) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(
            _spec(
                server.base_url,
                tmp_path,
                repeat=30,
                concurrency=48,
                seed=5,
                inject="429=10%:0.01s,500=5%,truncate=2%",
            )
        )
        upstream_requests = server.stats.requests
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert len(calls) >= 1000
    injected = Counter(c["injected"] for c in calls if c["injected"])
    assert set(injected) == {"429", "500", "truncate"}
    # Shares near the asked ones (binomial, 4 sd).
    for kind, share in (("429", 0.10), ("500", 0.05), ("truncate", 0.02)):
        expected = len(calls) * share
        assert abs(injected[kind] - expected) < 4 * (expected * (1 - share)) ** 0.5, kind
    # What each fault looks like in calls.jsonl; 429s and 500s never reached the provider.
    for call in calls:
        if call["injected"] in ("429", "500"):
            assert (call["status"], call["error_kind"]) == (int(call["injected"]),) * 1 + (
                call["injected"],
            )
        elif call["injected"] == "truncate":
            assert (call["status"], call["error_kind"]) == (200, "truncated")
    assert upstream_requests == len(calls) - injected["429"] - injected["500"]
    # The accounting: every injected fault is recovered, surfaced or misattributed.
    totals = {name: sum(r[name] for r in rows) for name in INJECTED_FIGURES}
    assert totals["injected_faults"] == sum(injected.values())
    assert (
        totals["injected_recovered"]
        + totals["injected_surfaced"]
        + totals["injected_misattributed"]
        == totals["injected_faults"]
    )
    assert totals["injected_misattributed"] == 0  # the builtin agent hides no fault
    assert totals["injected_recovered"] > 0 and totals["injected_surfaced"] > 0
    # Surfaced faults made their attempts link errors; the judged attempts stand.
    surfaced = [r for r in rows if r["injected_surfaced"]]
    assert surfaced and all(r["outcome"] == "link_error" for r in surfaced)
    assert {r["outcome"] for r in rows} >= {"pass", "fail", "link_error"}
    manifest = read_manifest(outcome.run_dir)
    assert manifest["injection"]["spec"] == "429=10%:0.01s,500=5%,truncate=2%"


def _decisions(run_dir: Path) -> dict[tuple[str, int, int], str | None]:
    return {
        (c["task_id"], c["attempt"], c["call_index"]): c["injected"]
        for c in read_rows(run_dir / "calls.jsonl")
    }


async def test_the_same_seed_hits_the_same_calls_at_any_concurrency(tmp_path: Path) -> None:
    spec = "429=15%:0.01s,500=10%,truncate=5%"
    with SandboxServer(seed=3) as server:
        one_at_a_time = await execute_run(
            _spec(server.base_url, tmp_path / "a", repeat=3, concurrency=1, seed=9, inject=spec)
        )
        all_at_once = await execute_run(
            _spec(server.base_url, tmp_path / "b", repeat=3, concurrency=32, seed=9, inject=spec)
        )
        other_seed = await execute_run(
            _spec(server.base_url, tmp_path / "c", repeat=3, concurrency=32, seed=10, inject=spec)
        )
    first, second = _decisions(one_at_a_time.run_dir), _decisions(all_at_once.run_dir)
    shared = set(first) & set(second)
    assert len(shared) > 100
    assert sum(1 for key in shared if first[key]) > 10
    assert {key: first[key] for key in shared} == {key: second[key] for key in shared}
    third = _decisions(other_seed.run_dir)
    assert {key: first[key] for key in shared & set(third)} != {
        key: third[key] for key in shared & set(third)
    }


async def test_a_run_without_inject_is_untouched(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(
            _spec(server.base_url, tmp_path, tasks=["arith-01", "lookup-02"], repeat=2)
        )
    manifest = read_manifest(outcome.run_dir)
    assert "injection" not in manifest
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert calls and rows
    assert not any("injected" in c for c in calls)
    assert not any(name in r for r in rows for name in INJECTED_FIGURES)


async def test_the_profile_setting_injects_and_none_turns_it_off(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        profile = sim_profile(server.base_url, inject="500=100%")
        faulted = await execute_run(
            _spec(server.base_url, tmp_path / "a", profile=profile, tasks=["arith-01"])
        )
        clean = await execute_run(
            _spec(
                server.base_url, tmp_path / "b", profile=profile, tasks=["arith-01"], inject="none"
            )
        )
    faulted_rows = read_rows(faulted.run_dir / "attempts.jsonl")
    assert [(r["outcome"], r["error_code"], r["injected_faults"]) for r in faulted_rows] == [
        ("link_error", "500", 5)  # the first call and its 4 retries, all injected
    ]
    assert "injection" not in read_manifest(clean.run_dir)
    assert [r["outcome"] for r in read_rows(clean.run_dir / "attempts.jsonl")] != ["link_error"]


async def test_drop_never_reaches_the_provider_and_is_a_connection_error(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(
            _spec(server.base_url, tmp_path, tasks=["arith-01"], inject="drop=100%")
        )
        requests = server.stats.requests
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert requests == 0
    assert calls and {(c["injected"], c["error_kind"], c["status"]) for c in calls} == {
        ("drop", "connection", None)
    }
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"]) == ("link_error", "connection")
    assert row["injected_surfaced"] == row["injected_faults"] == len(calls)


async def test_timeout_hangs_past_the_clients_timeout(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(
            _spec(
                server.base_url,
                tmp_path,
                tasks=["arith-01"],
                timeout_s=0.3,
                inject="timeout=100%",
                retry_policy=RetryPolicy(max_retries=1, base_delay_s=0.005, max_delay_s=0.05),
            )
        )
        requests = server.stats.requests
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert requests == 0
    assert [(c["injected"], c["error_kind"]) for c in calls] == [("timeout", "timeout")] * 2
    assert all(c["latency_ms"] >= 250 for c in calls), [c["latency_ms"] for c in calls]
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"], row["injected_surfaced"]) == (
        "link_error",
        "timeout",
        2,
    )


async def test_slow_answers_late_and_the_attempt_is_judged(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(
            _spec(server.base_url, tmp_path, tasks=["arith-01"], inject="slow=100%:200ms")
        )
        requests = server.stats.requests
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert requests == len(calls) > 0
    assert all(c["injected"] == "slow" and c["error_kind"] is None for c in calls)
    assert all(c["ttfb_ms"] >= 195 for c in calls)
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] in ("pass", "fail")
    assert row["injected_recovered"] == row["injected_faults"] == len(calls)


async def test_resume_keeps_the_injection(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        outcome = await execute_run(
            _spec(
                server.base_url,
                tmp_path,
                tasks=["arith-01", "format-02"],
                repeat=3,
                inject="500=30%",
            )
        )
        attempts = outcome.run_dir / "attempts.jsonl"
        lines = attempts.read_text().splitlines(keepends=True)
        attempts.write_text("".join(lines[:2]))  # four slots lost their rows
        await resume_run(outcome.run_dir, api_key=KEY, profile=sim_profile(server.base_url))
    manifest = read_manifest(outcome.run_dir)
    assert manifest["injection"]["spec"] == "500=30%"
    rows = read_rows(attempts)
    assert len(rows) == 6
    assert all("injected_faults" in r for r in rows)
    assert all("injected" in c for c in read_rows(outcome.run_dir / "calls.jsonl"))


def test_a_bad_inject_spec_is_one_line_and_exit_2(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "run", "--profile", "nobody", "--suite", "basic",
         "--out", str(tmp_path), "--inject", "429=5%,430=1%"],
        capture_output=True,
        text=True,
        timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "driftdesk: --inject: unknown fault '430': use 429, 500 (any 5xx), timeout, truncate, "
        "drop or slow"
    ]
    assert not any(tmp_path.iterdir())  # nothing was started


async def test_the_report_and_the_trajectories_show_where_faults_were_injected(
    tmp_path: Path,
) -> None:
    """The report (JSON and the workbench's headline read it) carries the injection figures,
    and each faulted attempt's trajectory has an ``injected`` link event at the faulted call."""
    from driftdesk.analysis.injection_report import read_injection
    from driftdesk.analysis.report import build_report
    from driftdesk.analysis.trajectory import load_trajectory

    with SandboxServer(seed=3) as server:
        outcome = await execute_run(
            _spec(server.base_url, tmp_path, repeat=3, seed=9, inject="429=30%:0.01s,500=10%")
        )
        clean = await execute_run(_spec(server.base_url, tmp_path / "clean", repeat=1))
    (report,) = build_report([outcome.run_dir])
    summary = read_injection(outcome.run_dir)
    assert summary is not None and summary.total.faults > 0
    assert report.injection == summary.to_json()
    assert report.to_json()["injection"]["faults"] == summary.total.faults
    (plain,) = build_report([clean.run_dir])
    assert plain.injection is None
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    faulted = {(c["task_id"], c["attempt"]) for c in calls if c["injected"]}
    marked = 0
    for task_id, attempt in sorted(faulted):
        traj = load_trajectory(outcome.run_dir, task_id, attempt)
        assert traj is not None
        events = [s for s in traj.steps if s.kind == "link_event" and s.detail.get("injected")]
        injected_here = [
            c for c in calls if (c["task_id"], c["attempt"]) == (task_id, attempt) and c["injected"]
        ]
        assert [e.call_index for e in events] == [c["call_index"] for c in injected_here]
        assert all(e.text.startswith("injected ") for e in events)
        marked += len(events)
    assert marked == sum(1 for c in calls if c["injected"])
