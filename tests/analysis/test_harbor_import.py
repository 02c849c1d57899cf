"""Harbor jobs imported (issue 49): runs, attribution, Harbor's own mean beside driftdesk's,
rewards, pass@k, older job dirs, bad input. Job dirs are built by ``harbor_fixtures`` field by
field from harbor 0.25's models and checked against the JSON Schemas derived from them."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_fixtures import report_of, rows_of
from harbor_fixtures import (
    BILLING,
    LONG_TASK,
    Trial,
    standard_trials,
    validate,
    write_job,
)

from driftdesk.analysis.harbor_policy import attribute
from driftdesk.analysis.import_formats import ResultsImportError
from driftdesk.analysis.imports import import_results

approx = pytest.approx


def test_harbor_is_not_installed_here() -> None:
    # Reading Harbor jobs never needs harbor: the test venv does not have it.
    assert importlib.util.find_spec("harbor") is None


def test_harbors_mean_reproduced_beside_the_judged_trials(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "2026-11-30__02-00-00", standard_trials(), n_attempts=3)
    validate(job)
    result = import_results(job, out=tmp_path / "runs")
    assert (result.format, result.attempts, result.tasks, result.more) == ("harbor", 13, 5, [])
    report = report_of(result.run_dir)
    harbor = report.to_json()["harbor"]
    job_result = json.loads((job / "result.json").read_text())
    (group,) = job_result["stats"]["evals"].values()
    # Harbor's mean: every trial on disk, the 5 without a reward (rate limit, sandbox,
    # billing, verifier timeout, cancelled) counted 0: 6 / 14, the job's own figure
    assert harbor["harbor_mean"] == {"mean": approx(6 / 14, abs=1e-15)}
    # to the digit: the very figure the job's result.json states
    assert harbor["harbor_mean"] == harbor["job_reported_mean"] == group["metrics"][0]
    assert harbor["trials_on_disk"] == 14 and harbor["missing_rewards_as_zero"] == 5
    # driftdesk's: the judged trials only: 6 passes of 9
    assert harbor["judged_mean"] == {"mean": approx(6 / 9)} and harbor["judged_trials"] == 9
    assert report.attempts_judged == 9
    assert harbor["excluded"] == {
        "link_error": {
            "ApiRateLimitError (model_provider_failed)": 1,
            "SandboxBuildFailedError (sandbox_failed)": 1,
            "BadRequestError (model_provider_failed, billing)": 1,
        },
        "harness_error": {"VerifierTimeoutError (verifier_failed)": 1},
    }
    assert harbor["cancelled"] == 1
    assert report.link_errors == 3 and report.harness_errors == 1
    # the timed-out agent that still scored 1.0 is a pass
    rows = {(r["task_id"], r["attempt"]): r for r in rows_of(result.run_dir)}
    timed_out = rows[(LONG_TASK, 2)]
    assert timed_out["outcome"] == "pass" and timed_out["harbor_cause"] == "agent_exhausted_budget"
    assert rows[("hello-world", 2)]["error_code"] == "ApiRateLimitError"
    assert rows[("sqlite-recovery", 0)]["outcome"] == "harness_error"
    assert ("sqlite-recovery", 2) not in rows  # cancelled: left out
    # volatility per task, the tasks grouped by task_name (their folders are cut to 32)
    stats = {t.task_id: t for t in report.tasks}
    assert stats[LONG_TASK].n == 3 and stats[LONG_TASK].volatile
    assert all(not p.name.startswith(LONG_TASK) for p in job.iterdir())


def test_the_report_text_puts_both_figures_side_by_side(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "nightly", standard_trials(), n_attempts=3)
    result = import_results(job, out=tmp_path / "runs")
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "report", str(result.run_dir)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "Harbor's mean 0.428571 over every trial on disk (14; 5 without a reward" in (
        done.stdout
    )
    assert "the job's result.json: 0.428571" in done.stdout
    assert "driftdesk's mean 0.666667 over the judged trials (9)" in done.stdout
    assert "cancelled 1 (not imported)" in done.stdout


@pytest.mark.parametrize(
    ("name", "message", "reward", "outcome", "cause"),
    [
        ("AgentTimeoutError", "timed out", 0.0, "fail", "agent_exhausted_budget"),
        ("ContentPolicyViolationError", "refused", 0.0, "fail", "agent_refused_task"),
        ("NonZeroAgentExitCodeError", "exit 1", 1.0, "link_error", "unclassified"),
        ("SomethingNewError", "??", None, "link_error", "unclassified"),
        ("BadRequestError", BILLING, None, "link_error", "model_provider_failed"),
        ("BadRequestError", "Daytona sandbox quota reached", None, "link_error", "sandbox_failed"),
        ("RewardFileNotFoundError", "no reward.txt", None, "harness_error", "verifier_failed"),
        ("MissingExtraError", "pip install harbor[x]", None, "link_error", "harbor_failed"),
        (None, "", None, "harness_error", None),  # no exception, no reward: nothing to judge
    ],
)
def test_each_exception_family(
    tmp_path: Path, name: str | None, message: str, reward: float | None, outcome: str, cause: str
) -> None:
    job = write_job(
        tmp_path / "jobs",
        "j",
        [Trial("t", 1.0), Trial("t", reward, name, message, minute=1)],
    )
    validate(job)
    result = import_results(job, out=tmp_path / "runs")
    row = rows_of(result.run_dir)[1]
    assert (row["outcome"], row["harbor_cause"]) == (outcome, cause)
    if outcome in ("link_error", "harness_error") and name:
        assert row["error_code"] == name and name in row["error_message"]


def test_the_message_decides_an_ambiguous_name() -> None:
    assert attribute("BadRequestError", BILLING).detail == "billing"
    assert attribute("BadRequestError", "runloop devbox failed").cause == "sandbox_failed"
    assert attribute("BadRequestError", "invalid tool schema").cause == "model_provider_failed"
    assert attribute("ApiRateLimitError", "sandbox").cause == "model_provider_failed"


def test_attempts_are_trials_in_start_order(tmp_path: Path) -> None:
    # written out of order (a resumed job reruns trials under new names, later)
    trials = [Trial("t", 0.0, minute=30), Trial("t", 1.0, minute=5), Trial("t", 0.5, minute=10)]
    result = import_results(write_job(tmp_path / "jobs", "j", trials), out=tmp_path / "runs")
    assert [(r["attempt"], r["score"]) for r in rows_of(result.run_dir)] == [
        (0, 1.0),
        (1, 0.5),
        (2, 0.0),
    ]


def test_jobs_stay_separate_runs_or_merge(tmp_path: Path) -> None:
    jobs = tmp_path / "jobs"
    write_job(jobs, "night-1", standard_trials(), n_attempts=3)
    write_job(jobs, "night-2", standard_trials(minute=600), n_attempts=3, seed=2)
    separate = import_results(jobs, out=tmp_path / "runs")
    run_dirs = [separate.run_dir] + [m.run_dir for m in separate.more]
    assert len(run_dirs) == 2
    manifests = [json.loads((d / "manifest.json").read_text()) for d in run_dirs]
    assert {m["suite"]["name"] for m in manifests} == {"harbor:terminal-bench@2.0"}
    assert manifests[0]["started_at"] < manifests[1]["started_at"]
    with pytest.raises(ResultsImportError, match=r"holds 2 runs.*--run-id names one run"):
        import_results(jobs, out=tmp_path / "other", run_id="mine")
    merged = import_results(jobs, out=tmp_path / "merged", merge=True)
    assert merged.more == [] and merged.attempts == 26
    tasks = {t.task_id: t.n for t in report_of(merged.run_dir).tasks}
    assert tasks[LONG_TASK] == 6  # three trials from each job
    facts = report_of(merged.run_dir).harbor
    assert facts is not None and facts["job_reported_mean"] is None  # two jobs: no one figure
    assert facts["harbor_mean"] == {"mean": approx(12 / 28)}


def test_trend_and_compare_across_nightly_jobs(tmp_path: Path) -> None:
    from driftdesk.analysis.compare import compare_runs
    from driftdesk.analysis.trend import build_trend

    jobs = tmp_path / "jobs"
    write_job(jobs, "night-1", standard_trials(), n_attempts=3)
    later = standard_trials(minute=1440)
    later[1].reward = 1.0  # the long task's failing trial passes the next night
    write_job(jobs, "night-2", later, n_attempts=3, seed=3)
    result = import_results(jobs, out=tmp_path / "runs")
    runs = [result.run_dir, result.more[0].run_dir]
    trend = build_trend(runs)
    assert len(trend.runs) == 2 and trend.suite == "harbor:terminal-bench@2.0"
    comparison = compare_runs(runs[0], runs[1])
    moved = {t.task_id: t for t in comparison.changed}
    assert (moved[LONG_TASK].before, moved[LONG_TASK].after) == ("volatile", "pass")
    assert moved[LONG_TASK].success_a == approx(2 / 3) and moved[LONG_TASK].success_b == 1.0


def test_runs_are_keyed_by_agent_model_and_dataset(tmp_path: Path) -> None:
    trials = [Trial("t", 1.0), Trial("t", 0.0, model="openai/gpt-5", minute=1)]
    result = import_results(write_job(tmp_path / "jobs", "j", trials), out=tmp_path / "runs")
    models = {
        json.loads((d / "manifest.json").read_text())["model"]
        for d in [result.run_dir, *(m.run_dir for m in result.more)]
    }
    assert models == {"claude-sonnet-4-5", "gpt-5"}


def test_an_older_job_dir(tmp_path: Path) -> None:
    trials = [Trial("t", 1.0, naive_times=True), Trial("t", 0.0, minute=1, naive_times=True)]
    job = write_job(tmp_path / "jobs", "old", trials, legacy_stats=True, lock=False)
    validate(job)
    result = import_results(job, fmt="harbor", out=tmp_path / "runs")
    harbor = report_of(result.run_dir).harbor
    assert harbor is not None and harbor["versions"] == []  # no lock.json: version unknown
    assert harbor["harbor_mean"] == harbor["job_reported_mean"] == {"mean": 0.5}
    assert [r["attempt"] for r in rows_of(result.run_dir)] == [0, 1]
    assert all(r["started_at"].endswith("+00:00") for r in rows_of(result.run_dir))


def test_partial_rewards_keep_every_key_and_harbors_per_key_mean(tmp_path: Path) -> None:
    trials = [
        Trial("a", {"reward": 0.5, "style": 1.0}),
        Trial("a", {"reward": 1.0, "style": 0.0}, minute=1),
        Trial("b", {"reward": 0.25, "style": 0.5}, minute=2),
        Trial("b", None, "ApiOverloadedError", "overloaded", minute=3),
    ]
    job = write_job(tmp_path / "jobs", "partial", trials)
    validate(job)
    result = import_results(job, out=tmp_path / "runs")
    rows = rows_of(result.run_dir)
    assert rows[0]["rewards"] == {"reward": 0.5, "style": 1.0} and rows[0]["score"] == 0.5
    report = report_of(result.run_dir)
    assert report.mean_score == approx(((0.5 + 1.0) / 2 + 0.25) / 2)
    assert report.partial_scores == 2
    harbor = report.harbor
    assert harbor is not None
    assert harbor["harbor_mean"] == harbor["job_reported_mean"]
    assert harbor["harbor_mean"] == {"reward": approx(1.75 / 4), "style": approx(1.5 / 4)}
    assert harbor["harbor_pass_at_k"] == {}  # not binary: Harbor gives none


def test_pass_at_k_as_harbor_computes_it(tmp_path: Path) -> None:
    rewards = {"a": [1, 0, 0, 0], "b": [1, 1, 0, 0], "c": [0, 0, 0, 0]}
    trials = [
        Trial(task, float(r), minute=i * 10 + j)
        for i, (task, values) in enumerate(rewards.items())
        for j, r in enumerate(values)
    ]
    result = import_results(
        write_job(tmp_path / "jobs", "k", trials, n_attempts=4), out=tmp_path / "runs"
    )
    report = report_of(result.run_dir, pass_k_convention="harbor")
    # k = 2, 4 (Harbor's values up to 4); pass@2: a 1 - C(3,2)/C(4,2) = 1/2, b 5/6, c 0
    assert report.pass_at_k == {2: approx((1 / 2 + 5 / 6) / 3), 4: approx(2 / 3)}
    harbor = report.harbor
    assert harbor is not None
    assert harbor["harbor_pass_at_k"] == {"2": approx((1 / 2 + 5 / 6) / 3), "4": approx(2 / 3)}


def test_bad_input_costs_a_line_each(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "live", standard_trials(), n_attempts=3, finished=False)
    (job / "unfinished__abc1234" / "agent").mkdir(parents=True)  # no result.json yet
    torn = next(job.glob("hello-world__*")) / "result.json"
    torn.write_text(torn.read_text()[:200])
    job_result = json.loads((job / "result.json").read_text())
    (group,) = job_result["stats"]["evals"].values()
    group["exception_stats"]["ApiRateLimitError"].append("ghost-task__zzzzzzz")
    (job / "result.json").write_text(json.dumps(job_result))
    result = import_results(job, out=tmp_path / "runs")
    problems = "\n".join(result.problems)
    assert "the job is still running (1 trials running)" in problems
    assert "unfinished__abc1234: no result.json" in problems
    assert f"{torn.parent.name}: result.json is not valid JSON (truncated?)" in problems
    assert "names 1 trials that are not on disk (ghost-task__zzzzzzz)" in problems
    assert len(result.problems) == 4
    assert result.attempts == 12  # 14 trials, one torn, one cancelled: nothing else lost


def test_a_job_without_its_result_json(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "killed", [Trial("t", 1.0), Trial("t", 0.0, minute=1)])
    (job / "result.json").unlink()
    result = import_results(job, fmt="harbor", out=tmp_path / "runs")
    assert result.problems == ["killed: no result.json (the job's own figures are not known)"]
    harbor = report_of(result.run_dir).harbor
    assert harbor is not None and harbor["job_reported_mean"] is None
    assert harbor["harbor_mean"] == {"mean": 0.5}


def test_not_a_job(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsImportError, match="no Harbor job"):
        import_results(tmp_path / "empty", fmt="harbor", out=tmp_path / "runs")


def test_a_second_import_of_the_same_job_is_refused(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "j", [Trial("t", 1.0)])
    import_results(job, out=tmp_path / "runs")
    with pytest.raises(ResultsImportError, match="was imported before"):
        import_results(job, out=tmp_path / "runs")
