"""An absorbed link fault in the trajectory and the task screen's step line: where it happened
(before the model turn its re-sent call answered), as "429 absorbed, waited 0.1 s"."""

from __future__ import annotations

from pathlib import Path

from driftdesk.analysis.trajectory import load_trajectory
from driftdesk.fileio import iter_jsonl
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.simulated_endpoint import SandboxServer
from driftdesk.tui.widgets.trajectory import step_line
from tests.sandbox_runs import sandbox_run


async def test_an_absorbed_fault_shows_where_it_happened(tmp_path: Path) -> None:
    with SandboxServer(seed=3) as server:
        run_dir = await sandbox_run(
            server.base_url,
            tmp_path,
            repeat=3,
            concurrency=4,
            timeout_s=20.0,
            api_key="sk-test-REALKEY-absorbed-0123456789",
            retry_policy=RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=1.0),
            seed=2,
            inject="429=40%:0.1s",
            link_faults="absorb",
        )
    calls = [row for _, row in iter_jsonl(run_dir / "calls.jsonl", [])]
    absorbed = [c for c in calls if c["absorbed"]]
    assert absorbed
    call = absorbed[0]
    traj = load_trajectory(run_dir, call["task_id"], call["attempt"])
    assert traj is not None
    events = [s for s in traj.steps if s.kind == "link_event"]
    assert events, [s.kind for s in traj.steps]
    event = next(s for s in events if s.call_index == call["call_index"])
    assert event.text == "injected 429 → 429 absorbed, waited 0.1 s"
    assert event.detail["absorbed"] is True and event.detail["wait_s"] == 0.1
    # Before the model turn of the call the proxy sent again.
    after = traj.steps[traj.steps.index(event) + 1 :]
    assert any(s.kind == "model" and (s.call_index or 0) > call["call_index"] for s in after)
    assert step_line(event).plain.endswith("⚡ 429 absorbed, waited 0.1 s")
    # explain names it as absorbed: the agent never saw it.
    from driftdesk.analysis.explain import explain_task

    data = explain_task(run_dir, call["task_id"]).to_json()
    [view] = [v for v in data["attempts"] if v["attempt"] == call["attempt"]]
    marked = [e for e in view["link_events"] if e.get("absorbed")]
    assert marked and marked[0]["kind"] == "429"
