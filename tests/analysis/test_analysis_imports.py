"""Imports of the four foreign formats; each fixture's numbers are worked out by hand below.

The fixtures in ./fixtures are written in the real shapes (tau-bench ``EnvRunResult`` list,
tau2 ``Results`` with ``simulations``, AppWorld evaluation with ``aggregate``/``individual``,
generic JSON lines), with bad records mixed in on purpose.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fixtures import report_of, rows_of

from driftdesk.analysis.import_formats import ResultsImportError
from driftdesk.analysis.imports import import_results

FIXTURES = Path(__file__).parent / "fixtures"
approx = pytest.approx


def test_tau_bench(tmp_path: Path) -> None:
    result = import_results(FIXTURES / "tau_bench_retail_results.json", out=tmp_path)
    assert result.format == "tau-bench"
    assert (result.attempts, result.tasks) == (9, 3)
    assert result.problems == [
        "record 7: expected an object, got NoneType",
        "record 8: no task_id",
        "record 11 (task 1): reward is not a number",
    ]
    rows = rows_of(result.run_dir)
    # record 4: reward 0.9999999 is within 1e-6 of 1 -> a pass, as tau-bench scores it
    assert [(r["task_id"], r["attempt"], r["outcome"]) for r in rows[:6]] == [
        ("0", 0, "pass"),
        ("1", 0, "pass"),
        ("2", 0, "fail"),
        ("0", 1, "pass"),
        ("1", 1, "fail"),
        ("2", 1, "link_error"),
    ]
    assert rows[5]["error_code"] == "429"  # litellm RateLimitError stored in info.error
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["tasks"] == ["0", "1", "2"] and manifest["repeat"] == 3
    assert manifest["imported_from"]["skipped"] == 3
    # default: the rate-limited trial is not model behaviour: task 2 is 1 pass out of 2
    # success = (3/3 + 2/3 + 1/2) / 3 = 13/18
    assert report_of(result.run_dir).success_rate == approx(13 / 18)
    # tau-bench counts the errored trial as reward 0; --include-link-errors reproduces it:
    # c = (3, 2, 1) of n = 3: pass^1 = 2/3, pass^2 = (1 + 1/3 + 0)/3 = 4/9, pass^3 = 1/3
    counted = report_of(result.run_dir, include_link_errors=True)
    assert counted.pass_hat_k == approx({1: 2 / 3, 2: 4 / 9, 3: 1 / 3})


def test_tau2(tmp_path: Path) -> None:
    result = import_results(FIXTURES / "tau2_airline_results.json", out=tmp_path, run_id="airline")
    assert result.format == "tau2"
    assert result.run_dir == tmp_path / "airline"
    assert (result.attempts, result.tasks) == (8, 4)
    assert result.problems == [
        "record 9 (task 1): no reward_info.reward",
        "record 10: no task_id",
    ]
    rows = {(r["task_id"], r["attempt"]): r for r in rows_of(result.run_dir)}
    assert rows[("2", 1)]["outcome"] == "link_error"
    assert rows[("2", 1)]["error_code"] == "infrastructure_error"
    assert rows[("3", 0)]["outcome"] == "harness_error"
    assert rows[("2", 0)]["outcome"] == "fail"  # too_many_errors is the agent's doing
    # assistant usage only: prompt 1500 + 1540, completion 10 + 12
    assert (rows[("0", 0)]["prompt_tokens"], rows[("0", 0)]["completion_tokens"]) == (3040, 22)
    report = report_of(result.run_dir)
    # evaluable trials only, as tau2 counts: "0" 2/2, "1" 1/2, "2" 0/1, "3" 1/1
    assert report.success_rate == approx((1 + 0.5 + 0 + 1) / 4)
    assert report.pass_hat_k == approx({1: 0.625, 2: (1 + 0) / 2})
    assert report.consistency_gap_pp == approx(25.0)
    assert (report.link_errors, report.harness_errors) == (1, 1)
    assert report.model == "gpt-4.1-mini"
    # gpt-4.1-mini $0.40 / $1.60 per million: 3040 × 0.4e-6 + 22 × 1.6e-6
    assert report.cost_usd == approx(3040 * 0.4e-6 + 22 * 1.6e-6)
    by_task = {t.task_id: t for t in report.tasks}
    assert by_task["0"].latency_mean_ms == approx((45.5 + 40.0) / 2 * 1000)


def test_appworld_reproduces_the_published_tgc_and_sgc(tmp_path: Path) -> None:
    path = FIXTURES / "appworld_test_normal_evaluation.json"
    result = import_results(path, out=tmp_path)
    assert result.format == "appworld"
    assert (result.attempts, result.tasks) == (8, 8)
    assert result.problems == ["record 9 (task 3b2e8f1_1): no boolean 'success'"]
    assert result.published == {"task_goal_completion": 62.5, "scenario_goal_completion": 33.3}
    scenarios = {r["task_id"]: r["scenario_id"] for r in rows_of(result.run_dir)}
    assert scenarios["7d7fbf6_2"] == "7d7fbf6"
    report = report_of(result.run_dir, group_by="scenario")
    # TGC: 5 of 8 tasks = 62.5; SGC: only 50e1ac9 has all its tasks passing: 1 of 3 = 33.3
    assert report.task_goal_completion == result.published["task_goal_completion"]
    assert report.scenario_goal_completion == result.published["scenario_goal_completion"]


def test_generic_jsonl(tmp_path: Path) -> None:
    result = import_results(FIXTURES / "generic_results.jsonl", out=tmp_path, copy=True)
    assert result.format == "jsonl"
    assert (result.attempts, result.tasks) == (5, 3)
    assert [p.split(":")[0] for p in result.problems] == ["line 5", "line 7", "line 8", "line 10"]
    assert "not a boolean" in result.problems[0]
    assert "no task id" in result.problems[1]
    assert "torn last line" in result.problems[3]
    rows = rows_of(result.run_dir)
    assert [(r["task_id"], r["attempt"], r["outcome"]) for r in rows] == [
        ("gsm-001", 0, "pass"),
        ("gsm-002", 0, "fail"),
        ("gsm-001", 1, "fail"),  # score 0.4 < threshold 1.0
        ("gsm-002", 1, "link_error"),  # an error_code and no verdict
        ("gsm-003", 0, "pass"),
    ]
    assert rows[0]["total_tokens"] == 390 and rows[0]["latency_ms"] == 1200
    report = report_of(result.run_dir)
    assert report.success_rate == approx((0.5 + 0 + 1) / 3)
    # priced as claude-sonnet-4 ($3 / $15): 300 × 3e-6 + 90 × 15e-6
    assert report.cost_usd == approx(300 * 3e-6 + 90 * 15e-6)
    lenient = import_results(
        FIXTURES / "generic_results.jsonl", out=tmp_path, score_threshold=0.4, copy=True
    )
    assert [r["outcome"] for r in rows_of(lenient.run_dir)][2] == "pass"
    assert lenient.run_dir != result.run_dir  # a second import never overwrites the first


def test_field_mapping(tmp_path: Path) -> None:
    source = tmp_path / "custom.jsonl"
    source.write_text(
        '{"problem_id": "p1", "correct": true, "trial": 0}\n'
        '{"problem_id": "p1", "correct": false, "trial": 1}\n'
        '{"problem_id": "p2", "correct": 1, "trial": 0}\n'
    )
    result = import_results(
        source,
        fmt="jsonl",
        task_field="problem_id",
        success_field="correct",
        out=tmp_path / "o",
        copy=True,
    )
    assert [(r["task_id"], r["attempt"], r["outcome"]) for r in rows_of(result.run_dir)] == [
        ("p1", 0, "pass"),
        ("p1", 1, "fail"),
        ("p2", 0, "pass"),
    ]


def test_driftdesk_attempts_round_trip(tmp_path: Path) -> None:
    from analysis_fixtures import write_handmade_run

    run = write_handmade_run(tmp_path / "src")
    result = import_results(run / "attempts.jsonl", out=tmp_path / "out")
    original, imported = report_of(run), report_of(result.run_dir)
    assert imported.success_rate == approx(original.success_rate)
    assert imported.link_errors_by_kind == original.link_errors_by_kind


@pytest.mark.parametrize(
    ("content", "fmt", "message"),
    [
        ("{}", "auto", "cannot tell the format"),
        ("[1, 2", "tau-bench", "not valid JSON"),
        ('{"individual": {}}', "tau2", "not a tau2 file"),
        ('{"individual": {"a_1": {}}}', "appworld", "no usable records"),
    ],
)
def test_unusable_files_are_refused_and_write_nothing(
    tmp_path: Path, content: str, fmt: str, message: str
) -> None:
    source = tmp_path / "results.json"
    source.write_text(content)
    out = tmp_path / "runs"
    with pytest.raises(ResultsImportError, match=message):
        import_results(source, fmt=fmt, out=out)  # type: ignore[arg-type]
    assert not out.exists() or list(out.iterdir()) == []


@pytest.mark.parametrize("copy", [False, True], ids=["zero-copy", "copy"])
def test_no_usable_records_says_why_per_record_and_how_to_name_the_fields(
    tmp_path: Path, copy: bool
) -> None:
    """Seen: a file with fields id/passed gave only 'no usable records (3 bad records)'."""
    import subprocess
    import sys

    source = tmp_path / "results.jsonl"
    source.write_text(
        '{"id": "a", "passed": true}\n{"id": "a", "passed": false}\n{"id": "b", "passed": true}\n'
    )
    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "import", str(source), "--out", str(tmp_path / "o"),
         *(["--copy"] if copy else [])],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    message = done.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "3 bad records: line 1: no task id (task_id or task); line 2: " in message
    assert "--task-field NAME" in message and "--success-field NAME" in message
    assert "--score-threshold, 1.0 by default" in message
    fixed = subprocess.run(
        [sys.executable, "-m", "driftdesk", "import", str(source), "--out", str(tmp_path / "o"),
         "--task-field", "id", *(["--copy"] if copy else [])],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert fixed.returncode == 0, fixed.stderr


def test_import_help_gives_the_default_fields_and_threshold() -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-m", "driftdesk", "import", "--help"],
        capture_output=True, text=True, timeout=60, env={"COLUMNS": "200", "PATH": ""},
    )  # fmt: skip
    text = " ".join(done.stdout.split())
    assert "default: task_id, else task" in text
    assert "default: success, pass or passed, else score or reward" in text
    assert "(default 1.0; inspect logs" in text


@pytest.mark.parametrize("copy", [False, True], ids=["zero-copy", "copy"])
def test_a_named_success_field_missing_is_a_bad_record_not_a_silent_fail(
    tmp_path: Path, copy: bool
) -> None:
    """Seen: under --success-field passed, a record with reward 0.9 and no passed counted as
    a fail without a word."""
    source = tmp_path / "results.jsonl"
    source.write_text(
        '{"task_id": "a", "passed": true}\n{"task_id": "a", "reward": 0.9}\n'
        '{"task_id": "b", "passed": false}\n'
    )
    result = import_results(
        source, fmt="jsonl", success_field="passed", out=tmp_path / "o", copy=copy
    )
    assert result.attempts == 2
    assert result.problems == ["line 2: no 'passed' (the --success-field)"]
    report = report_of(result.run_dir)
    assert [(t.task_id, t.n) for t in sorted(report.tasks, key=lambda t: t.task_id)] == [
        ("a", 1),
        ("b", 1),
    ]


# A task whose scorer gives each sample the score named by its target; no model is called.
_BOUNDARY_TASK = """
from inspect_ai import Task, eval as inspect_eval
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, mean, scorer
from inspect_ai.solver import solver

VALUES = {
    "at-half": 0.5, "just-below": 0.4999, "above": 0.75, "zero": 0, "one": 1,
    "half-as-text": "0.5", "below-as-text": "0.49",
}

@solver
def no_model():
    async def solve(state, generate):
        return state
    return solve

@scorer(metrics=[mean()])
def given_score():
    async def score(state, target):
        return Score(value=VALUES[target.text])
    return score

task = Task(
    name="boundary",
    dataset=[Sample(id=name, input="q", target=name) for name in VALUES],
    solver=no_model(),
    scorer=given_score(),
)
(log,) = inspect_eval(task, model="mockllm/model", log_dir="logs", display="none")
assert log.status == "success", log.status
"""


def test_an_inspect_score_of_exactly_one_half_passes(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """inspect_ai's numbers pass at ≥ 0.5 (``PASS_THRESHOLD``), the boundary included, as a
    number and as text; a real inspect log, written by inspect_ai's own eval."""
    import subprocess
    import sys

    script = tmp_path / "boundary_task.py"
    script.write_text(_BOUNDARY_TASK)
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result = import_results(tmp_path / "logs", out=tmp_path / "runs")
    outcomes = {row["task_id"]: (row["outcome"], row["score"]) for row in rows_of(result.run_dir)}
    assert outcomes == {
        "at-half": ("pass", 0.5),
        "just-below": ("fail", 0.4999),
        "above": ("pass", 0.75),
        "zero": ("fail", 0.0),
        "one": ("pass", 1.0),
        "half-as-text": ("pass", 0.5),
        "below-as-text": ("fail", 0.49),
    }
