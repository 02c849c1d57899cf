"""inspect_ai logs imported as inspect reads them: real logs written by the installed
inspect_ai with its mockllm model (no model is called), each figure checked against what
inspect_ai itself reads or computes from the same log."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from analysis_fixtures import rows_of

from driftdesk.analysis.import_formats import ResultsImportError
from driftdesk.analysis.imports import import_results

pytest.importorskip("inspect_ai")

# Four folders of logs: partial credit (C/P/I and numbers, 2 epochs); an eval stopped by an
# error (5 samples × 2 epochs) and its eval-retry; one task run by two models; a .json log.
_MAKE_LOGS = """
import sys
from pathlib import Path
from inspect_ai import Task, eval as inspect_eval, eval_retry, task as inspect_task
from inspect_ai.dataset import Sample
from inspect_ai.scorer import Score, mean, scorer
from inspect_ai.solver import solver

GRADES = {"c": "C", "p": "P", "i": "I", "n07": 0.7, "n025": 0.25}
root = Path(sys.argv[1])
retry_ok = root / "retry-ok"

@solver
def no_model(breaks: bool = False):
    async def solve(state, generate):
        if breaks and not retry_ok.exists() and state.sample_id == "s3" and state.epoch == 2:
            raise RuntimeError("the solver broke on purpose")
        return state
    return solve

@scorer(metrics=[mean()])
def given_score():
    async def score(state, target):
        return Score(value=GRADES.get(target.text, "C"))
    return score

def make(name, ids, breaks=False):
    return Task(name=name, dataset=[Sample(id=i, input="q", target=i) for i in ids],
                solver=no_model(breaks), scorer=given_score())

@inspect_task
def stopped():
    return make("stopped", ["s1", "s2", "s3", "s4", "s5"], breaks=True)

quiet = dict(display="none")
inspect_eval(make("partial", list(GRADES)), model="mockllm/model", log_dir=str(root / "partial"),
             epochs=2, **quiet)
(log,) = inspect_eval(stopped(), model="mockllm/model", log_dir=str(root / "stopped"), epochs=2,
                      max_samples=1, fail_on_error=True, **quiet)
assert log.status == "error", log.status
retry_ok.write_text("")
(retried,) = eval_retry(log, log_dir=str(root / "stopped"), **quiet)
assert retried.status == "success", retried.status
for model in ("mockllm/model", "mockllm/other"):
    inspect_eval(make("partial", list(GRADES)), model=model, log_dir=str(root / "two"), **quiet)
inspect_eval(make("old", ["c", "p", "i"]), model="mockllm/model", log_dir=str(root / "old"),
             epochs=2, log_format="json", **quiet)
"""


# One xdist worker runs this module, so its logs fixture (real inspect evals, ~15 s)
# is made once, not once per worker.
pytestmark = pytest.mark.xdist_group("inspect-logs")


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("inspect-logs")
    script = root / "make_logs.py"
    script.write_text(_MAKE_LOGS)
    done = subprocess.run(
        [sys.executable, str(script), str(root)],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return root


def _older_json_log(logs: Path, folder: Path) -> Path:
    """The .json log as older inspect versions wrote it: no sample_ids and no epochs in the
    header, and (as inspect's own log_tool_call_error.json) a sample of epoch 4."""
    (source,) = (logs / "old").glob("*.json")
    document = json.loads(source.read_text())
    del document["eval"]["dataset"]["sample_ids"]
    del document["eval"]["config"]["epochs"]
    document["samples"][-1]["epoch"] = 4
    folder.mkdir()
    target = folder / source.name
    target.write_text(json.dumps(document))
    return target


def test_an_older_json_log_is_read_in_full(logs: Path, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    older = _older_json_log(logs, tmp_path / "older")
    expected = {(str(s.id), s.epoch - 1) for s in read_eval_log(str(older)).samples or []}
    assert len(expected) == 6 and 3 in {attempt for _, attempt in expected}
    for source in (older, older.parent):
        result = import_results(source, out=tmp_path / "runs", run_id=f"r-{source.name}")
        assert {(r["task_id"], r["attempt"]) for r in rows_of(result.run_dir)} == expected


def _stopped_logs(logs: Path) -> tuple[Path, Path]:
    """(the log of the eval the error stopped, its eval-retry), oldest first by name."""
    first, retry = sorted((logs / "stopped").glob("*.eval"))
    return first, retry


def test_a_stopped_eval_keeps_its_unfinished_samples_as_eval_errors(
    logs: Path, tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log

    stopped, _ = _stopped_logs(logs)
    log = read_eval_log(str(stopped))
    assert log.status == "error"
    finished = {(str(s.id), s.epoch - 1) for s in log.samples or []}
    planned = {(f"s{i}", e) for i in range(1, 6) for e in range(2)}
    assert finished < planned  # the error stopped it before the end
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(stopped, alone)
    result = import_results(alone, out=tmp_path / "runs")
    rows = rows_of(result.run_dir)
    assert {(r["task_id"], r["attempt"]) for r in rows} == planned
    unfinished = {(r["task_id"], r["attempt"]) for r in rows if r["error_code"] == "eval_error"}
    assert unfinished == planned - finished
    assert all(r["outcome"] == "harness_error" for r in rows if r["error_code"] == "eval_error")
    broke = [r for r in rows if (r["task_id"], r["attempt"]) == ("s3", 1)]
    assert [(r["outcome"], r["error_code"]) for r in broke] == [("harness_error", "harness_crash")]
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["repeat"] == 2
    assert result.problems == []  # nothing was skipped: the status is a note
    assert len(result.notes) == 1 and "'error'" in result.notes[0]
    assert f"its {len(planned - finished)} unfinished as eval_error rows" in result.notes[0]


def test_an_eval_retry_fills_the_slots_the_stopped_eval_left(logs: Path, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    _, retry = _stopped_logs(logs)
    result = import_results(logs / "stopped", out=tmp_path / "runs")
    rows = rows_of(result.run_dir)
    assert len(rows) == 10
    assert {r["outcome"] for r in rows} == {"pass"}
    retried = read_eval_log(str(retry))
    assert retried.status == "success" and len(retried.samples or []) == 10
    assert len(result.notes) == 1 and "eval_error" not in result.notes[0]


def test_two_models_in_one_folder_are_refused_naming_both(logs: Path, tmp_path: Path) -> None:
    with pytest.raises(ResultsImportError) as refused:
        import_results(logs / "two", out=tmp_path / "runs")
    assert "mockllm/model" in str(refused.value) and "mockllm/other" in str(refused.value)
    assert not (tmp_path / "runs").exists()


def test_a_cancelled_log_skips_no_record(logs: Path, tmp_path: Path, home, cli) -> None:  # type: ignore[no-untyped-def]
    (source,) = (logs / "old").glob("*.json")
    document = json.loads(source.read_text())
    document["status"] = "cancelled"
    document["samples"] = document["samples"][:-1]  # one sample × epoch never finished
    cancelled = tmp_path / "cancelled.json"
    cancelled.write_text(json.dumps(document))
    done = cli("import", str(cancelled), "--out", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "imported 6 attempts of 3 tasks" in done.stdout
    assert "skipped" not in done.stdout
    assert "status 'cancelled'" in done.stderr


def test_partial_credit_is_scored_as_inspect_scores_it(logs: Path, tmp_path: Path) -> None:
    from inspect_ai.log import read_eval_log

    (source,) = (logs / "partial").glob("*.eval")
    (inspect_mean,) = [
        m.value for s in read_eval_log(str(source)).results.scores for m in s.metrics.values()
    ]
    result = import_results(source, out=tmp_path / "runs")
    rows = rows_of(result.run_dir)
    assert len(rows) == 10
    scores = [r["score"] for r in rows]
    assert sum(scores) / len(scores) == pytest.approx(inspect_mean, abs=1e-12)
    # The report shows inspect's mean beside the success rate: the scorer is not binary.
    from driftdesk.analysis.report import build_report

    (report,) = build_report([result.run_dir])
    assert report.mean_score == pytest.approx(inspect_mean, abs=1e-12)
    assert (report.score_tasks, report.partial_scores) == (5, 6)  # P and the numbers, 2 epochs
    shown = subprocess.run(
        [sys.executable, "-m", "driftdesk", "report", str(result.run_dir)],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert f"mean score {inspect_mean:.3f} (inspect's mean over 5 tasks)" in shown, shown
    verdicts = {r["task_id"]: r["outcome"] for r in rows}
    # The default threshold, 0.5: partial credit (0.5) passes, as a 0.7 does; 0.25 fails.
    assert verdicts == {"c": "pass", "p": "pass", "i": "fail", "n07": "pass", "n025": "fail"}
    strict = import_results(source, out=tmp_path / "runs", run_id="strict", score_threshold=0.8)
    verdicts = {r["task_id"]: r["outcome"] for r in rows_of(strict.run_dir)}
    assert verdicts == {"c": "pass", "p": "fail", "i": "fail", "n07": "fail", "n025": "fail"}


def test_pass_k_in_inspects_convention_is_inspects_at_least_k(logs: Path, tmp_path: Path) -> None:
    """Uneven epochs (the stopped eval: one sample crashed at epoch 2, one never ran it): at
    k = 2 epochs, inspect's at_least(2) over its scored samples counts the short ones as 0;
    the "inspect" convention gives that figure, "driftdesk" another one, and each says which."""
    from collections import defaultdict

    from inspect_ai.log import read_eval_log
    from inspect_ai.scorer import at_least

    from driftdesk.analysis.report import build_report

    stopped, _ = _stopped_logs(logs)
    scores = defaultdict(list)
    for sample in read_eval_log(str(stopped)).samples or []:
        for score in (sample.scores or {}).values():
            scores[sample.id].append(score)
    reducer = at_least(2)
    at_least_2 = sum(float(reducer(s).value) for s in scores.values()) / len(scores)
    assert 0 < at_least_2 < 1  # the uneven epochs make the conventions differ
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(stopped, alone)
    run_dir = import_results(alone, out=tmp_path / "runs").run_dir
    (ours,) = build_report([run_dir])
    (theirs,) = build_report([run_dir], pass_k_convention="inspect")
    assert theirs.pass_hat_k[2] == pytest.approx(at_least_2, abs=1e-12)
    assert ours.pass_hat_k[2] != pytest.approx(at_least_2)
    assert (ours.to_json()["pass_k_convention"], theirs.to_json()["pass_k_convention"]) == (
        "driftdesk",
        "inspect",
    )


def test_inspects_own_metrics_are_kept_and_match_the_imported_scores(
    logs: Path, tmp_path: Path
) -> None:
    from inspect_ai.log import read_eval_log

    (source,) = (logs / "partial").glob("*.eval")
    (scored,) = read_eval_log(str(source), header_only=True).results.scores
    result = import_results(source, out=tmp_path / "runs")
    assert result.published == {f"{scored.name}/mean": scored.metrics["mean"].value}
    manifest = json.loads((result.run_dir / "manifest.json").read_text())
    assert manifest["imported_from"]["published"] == result.published
    scores = [r["score"] for r in rows_of(result.run_dir)]
    assert sum(scores) / len(scores) == pytest.approx(scored.metrics["mean"].value, abs=1e-12)
