"""How a run treated link faults, in the report (JSON and text), compare and trend: an
absorbing run says what it absorbed and what surfaced; two runs that differ in mode are
warned about (compare) and flagged (trend); a run that retried keeps its report as before."""

from __future__ import annotations

from pathlib import Path

from driftdesk.analysis.compare import compare_runs
from driftdesk.analysis.report import build_report
from driftdesk.analysis.trend import build_trend
from driftdesk.cli.report_text import render_report_table
from driftdesk.fileio import iter_jsonl
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.simulated_endpoint import SandboxServer
from tests.sandbox_runs import sandbox_run


async def _run(url: str, out: Path, link_faults: str) -> Path:
    return await sandbox_run(
        url,
        out,
        repeat=3,
        concurrency=4,
        timeout_s=20.0,
        api_key="sk-test-REALKEY-lfreport-0123456789",
        retry_policy=RetryPolicy(max_retries=3, base_delay_s=0.01, max_delay_s=1.0),
        seed=4,
        inject="429=25%:0.02s,500=10%",
        link_faults=link_faults,
    )


async def test_the_report_compare_and_trend_say_how_link_faults_were_treated(
    tmp_path: Path,
) -> None:
    with SandboxServer(seed=3) as server:
        retried = await _run(server.base_url, tmp_path, "retry")
        absorbed = await _run(server.base_url, tmp_path, "absorb")
    calls = [row for _, row in iter_jsonl(absorbed / "calls.jsonl", [])]
    held = [c for c in calls if c["absorbed"]]
    assert held

    [report] = build_report([absorbed])
    section = report.to_json()["link_faults"]
    assert section["mode"] == "absorb" and section["absorbed"] == len(held)
    assert section["surfaced"] == 0
    assert section["absorbed_wait_s"] == round(sum(c["wait_s"] for c in held), 3)
    assert section["attempts_with_absorbed"] == len({(c["task_id"], c["attempt"]) for c in held})
    text = render_report_table(report)
    assert f"link faults: absorb: {len(held)} absorbed at the proxy" in text
    assert "0 surfaced as link errors" in text
    # A run that did not absorb keeps its report JSON as it was: no such key.
    [before] = build_report([retried])
    assert "link_faults" not in before.to_json()

    comparison = compare_runs(retried, absorbed)
    assert any(
        "treat link faults differently (A: retry, B: absorb)" in w for w in comparison.warnings
    )
    same = compare_runs(absorbed, absorbed)
    assert not any("link faults" in w for w in same.warnings)

    trend = build_trend([retried, absorbed])
    [flag] = [f for f in trend.runs[-1].flags if f.name == "link_faults_changed"]
    assert flag.evidence.startswith("link faults absorb;")
    assert not [f for f in trend.runs[0].flags if f.name == "link_faults_changed"]
