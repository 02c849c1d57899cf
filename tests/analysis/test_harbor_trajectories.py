"""Harbor trials' ATIF trajectories in driftdesk's step model (issue 49): read in place when a
task is opened (or copied with --copy), explain on a task's trials, subagents, continued
trajectories, multi-step tasks, redaction, and the files it cannot read."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from harbor_fixtures import LONG_TASK, Trial, standard_trials, validate, write_job

from driftdesk.analysis import atif
from driftdesk.analysis.explain import explain_task
from driftdesk.analysis.imports import import_results
from driftdesk.analysis.trajectory import action_sequence, load_trajectory
from driftdesk.rundir import TRAJECTORY_SUFFIX

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def _commands(traj) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        json.loads(a.value)["keystrokes"] for a in action_sequence(traj) if a.name == "bash_command"
    ]


def test_explain_shows_where_a_passing_and_a_failing_trial_parted(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "j", standard_trials(), n_attempts=3)
    result = import_results(job, out=tmp_path / "runs")
    assert not list(result.run_dir.rglob(f"*{TRAJECTORY_SUFFIX}"))  # read in place
    explanation = explain_task(result.run_dir, LONG_TASK)
    divergences = [d for _, _, d in explanation.pairs if d is not None]
    assert divergences and {d.step for d in divergences} == {1}
    text = "\n".join(explanation.sentences())
    assert "rm -rf build" in text and "make test" in text
    traj = load_trajectory(result.run_dir, LONG_TASK, 1)
    assert traj is not None and traj.source == "harbor" and traj.outcome == "fail"
    assert _commands(traj) == ["ls", "rm -rf build"]
    kinds = [s.kind for s in traj.steps]
    assert kinds == ["user", "model", "tool_result", "model", "tool_result", "model"]
    first_call = traj.steps[1]
    assert first_call.tokens == 110 and first_call.detail["reasoning"] == "thinking"


def test_subagents_and_continued_trajectories(tmp_path: Path) -> None:
    trials = [
        Trial("t", 1.0, subagent=True, atif_version="ATIF-v1.7"),
        Trial("t", 1.0, minute=1, continued=True, atif_version="ATIF-v1.8"),
    ]
    job = write_job(tmp_path / "jobs", "j", trials)
    validate(job)
    result = import_results(job, out=tmp_path / "runs")
    with_sub = load_trajectory(result.run_dir, "t", 0)
    assert with_sub is not None and not with_sub.problems
    sub_steps = [s for s in with_sub.steps if s.detail.get("subagent") == "sub-1"]
    assert [s.kind for s in sub_steps] == ["user", "model", "tool_result"]
    assert sub_steps[1].tool_calls == [("grep", '{"pattern":"TODO"}')]
    continued = load_trajectory(result.run_dir, "t", 1)
    assert continued is not None and not continued.problems
    # the continuation's steps follow, its copied context left out
    assert _commands(continued) == ["ls", "make test", "make check"]
    assert continued.steps[-1].text == "All checks pass."
    assert sum(s.text.startswith("Solve t") for s in continued.steps) == 1


def test_multi_step_tasks_keep_their_step_results_and_each_steps_trajectory(
    tmp_path: Path,
) -> None:
    job = write_job(tmp_path / "jobs", "j", [Trial("deploy", 1.0, steps=["build", "deploy"])])
    validate(job)
    result = import_results(job, out=tmp_path / "runs")
    (row,) = [json.loads(line) for line in (result.run_dir / "attempts.jsonl").open()]
    assert [s["step_name"] for s in row["step_results"]] == ["build", "deploy"]
    assert row["step_results"][0]["rewards"] == {"reward": 1.0}
    assert row["prompt_tokens"] == 2400  # both steps' agent results
    traj = load_trajectory(result.run_dir, "deploy", 0)
    assert traj is not None
    markers = [s.detail.get("task_step") for s in traj.steps if s.detail.get("task_step")]
    assert markers == ["build", "deploy"]
    assert _commands(traj) == ["ls", "make test", "ls", "make test"]


@pytest.mark.parametrize("copy", [False, True])
def test_trajectory_content_is_redacted_read_in_place_or_copied(tmp_path: Path, copy: bool) -> None:
    job = write_job(tmp_path / "jobs", "j", [Trial("t", 1.0)], secret=SECRET)
    result = import_results(job, out=tmp_path / "runs", copy=copy)
    kept = list(result.run_dir.rglob(f"*{TRAJECTORY_SUFFIX}"))
    assert len(kept) == (1 if copy else 0)
    if copy:  # the run no longer needs the job
        assert SECRET not in kept[0].read_text()
        shutil.rmtree(job)
    traj = load_trajectory(result.run_dir, "t", 0)
    assert traj is not None and traj.steps
    shown = json.dumps(traj.to_json())
    assert SECRET not in shown and "sk-proj" in shown  # masked, its prefix kept


def test_files_it_cannot_read_are_one_line_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown = Trial("t", 1.0).__dict__ | {"atif_version": "ATIF-v9.0"}
    trials = [Trial(**unknown), Trial("t", 0.0, minute=1), Trial("t", 1.0, minute=2)]
    trials[2].trajectory = '{"schema_version": "ATIF-v1.6", "steps": [{"step_id": 1'  # torn
    job = write_job(tmp_path / "jobs", "j", trials)
    result = import_results(job, out=tmp_path / "runs")
    assert result.attempts == 3  # the rows do not need the trajectories
    bad_version = load_trajectory(result.run_dir, "t", 0)
    assert bad_version is not None and bad_version.problems == [
        "trajectory.json: ATIF version 'ATIF-v9.0' is not one driftdesk reads "
        "(ATIF-v1.0 to ATIF-v1.8)"
    ]
    torn = load_trajectory(result.run_dir, "t", 2)
    assert torn is not None and len(torn.problems) == 1
    assert torn.problems[0].startswith("trajectory.json: not valid JSON")
    monkeypatch.setattr(atif, "MAX_TRAJECTORY_BYTES", 1024)
    huge = load_trajectory(result.run_dir, "t", 1)
    assert huge is not None and huge.steps == []
    assert "MiB a trajectory is read to; not read" in huge.problems[0]
    # explain still runs over the others, naming nothing it could not read as steps
    shutil.rmtree(job)
    gone = load_trajectory(result.run_dir, "t", 1)
    assert gone is not None and "is not there any more" in gone.problems[0]


AUDITED_IMPORT = r"""
import sys
opened = []
def hook(event, args):
    if event == "open" and isinstance(args[0], str) and "trajectory" in args[0]:
        opened.append(args[0])
sys.addaudithook(hook)
from driftdesk.analysis.imports import import_results
from pathlib import Path
import_results(Path(sys.argv[1]), out=Path(sys.argv[2]))
print(len(opened))
"""


def test_the_import_opens_no_trajectory(tmp_path: Path) -> None:
    # they are read when a task is opened; a folder of jobs was first scanned as inspect logs,
    # which opened every JSON file in it
    write_job(tmp_path / "jobs", "j", standard_trials(), n_attempts=3)
    done = subprocess.run(
        [sys.executable, "-c", AUDITED_IMPORT, str(tmp_path / "jobs"), str(tmp_path / "runs")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.strip() == "0"
