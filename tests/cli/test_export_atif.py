"""``driftdesk export RUN --format atif`` (issue 49): what driftdesk recorded, written as ATIF
that Harbor's models accept. Checked against the JSON Schema derived from harbor 0.25's
``Trajectory`` model (tests/fixtures/harbor/), on a live run whose tries an injected 429 cut and
on an imported Harbor job; and, where a Python with harbor's models is at hand
(``DRIFTDESK_HARBOR_PYTHON``: a python3.12 that can import ``harbor.models``), by the models
themselves."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest
from harbor_fixtures import LONG_TASK, SCHEMAS, Trial, standard_trials, write_job

from driftdesk.analysis.imports import import_results
from tests.sandbox_runs import RIGHT, WRONG, command_harness_run

SCHEMA = json.loads((SCHEMAS / "atif_trajectory.schema.json").read_text())
# Read once: the ``home`` fixture takes DRIFTDESK_* out of the environment during a test.
HARBOR_PYTHON = os.environ.get("DRIFTDESK_HARBOR_PYTHON")
REAL_KEY = "sk-test-REALKEY-export-atif-0123456789"


def _exported(out: Path) -> dict[tuple[str, int], dict]:
    index = json.loads((out / "index.json").read_text())
    found = {}
    for entry in index["trajectories"]:
        doc = json.loads((out / entry["path"]).read_text())
        jsonschema.validate(doc, SCHEMA)
        found[(entry["task_id"], entry["attempt"])] = doc
    return found


def _calls(doc: dict) -> list[str]:
    return [
        call["arguments"].get("command") or call["arguments"].get("keystrokes")
        for step in doc["steps"]
        for call in step.get("tool_calls") or []
    ]


def _harbor_check(out: Path) -> None:
    """The exported files read by harbor's own models, where a Python that has them is set."""
    if not HARBOR_PYTHON:
        return
    done = subprocess.run(
        [HARBOR_PYTHON, str(SCHEMAS / "derive_schemas.py"), "--check", str(out)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-2000:]


async def test_a_run_whose_tries_a_429_cut_exports_as_atif(home, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_dir = await command_harness_run(tmp_path, REAL_KEY)
    rows = [json.loads(line) for line in (run_dir / "attempts.jsonl").open()]
    out = tmp_path / "atif"
    done = cli("export", str(run_dir), "--format", "atif", "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"wrote {len(rows)} ATIF trajectories" in done.stdout
    exported = _exported(out)
    retried = [r for r in rows if r["retries"]]
    assert retried, "no retried try with this seed"
    for row in rows:
        doc = exported[("fix-add", row["attempt"])]
        mine = doc["extra"]["driftdesk"]
        assert mine["outcome"] == row["outcome"]
        # the final try's steps; the earlier tries (cut by the 429) in extra
        assert len(mine["earlier_tries"]) == row["retries"] == mine["try"] - 1
        if row["outcome"] in ("pass", "fail"):
            assert _calls(doc) == (RIGHT if row["outcome"] == "pass" else WRONG)
        for step in doc["steps"]:  # each result answers a call of its own step
            ids = {c["tool_call_id"] for c in step.get("tool_calls") or []}
            for result in (step.get("observation") or {}).get("results", []):
                assert result["source_call_id"] in ids
    for path in out.rglob("*.json"):
        assert REAL_KEY not in path.read_text()
    _harbor_check(out)


def test_an_imported_harbor_job_round_trips(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    trials = standard_trials()
    trials[0].subagent, trials[0].atif_version = True, "ATIF-v1.7"
    job = write_job(tmp_path / "jobs", "j", trials, n_attempts=3)
    result = import_results(job, out=tmp_path / "runs")
    out = tmp_path / "atif"
    done = cli("export", str(result.run_dir), "--out", str(out))
    assert done.returncode == 0, done.stderr
    # the two trials that kept no trajectory are named, not written
    assert "2 attempts kept no trajectory" in done.stderr
    exported = _exported(out)
    assert len(exported) == result.attempts - 2
    assert _calls(exported[(LONG_TASK, 1)]) == ["ls", "rm -rf build"]
    assert "grep" in json.dumps(exported[(LONG_TASK, 0)])  # the subagent's steps kept
    _harbor_check(out)


def test_export_of_no_run_is_refused(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    done = cli("export", str(tmp_path / "nothing"), "--out", str(tmp_path / "o"))
    assert done.returncode == 2 and "not a run dir" in done.stderr


def test_a_run_without_trajectories_exits_1(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    job = write_job(tmp_path / "jobs", "j", [Trial("t", 1.0, trajectory=None)])
    result = import_results(job, out=tmp_path / "runs")
    done = cli("export", str(result.run_dir), "--out", str(tmp_path / "o"))
    assert done.returncode == 1 and "1 attempts kept no trajectory: t#0" in done.stderr


@pytest.mark.skipif(not HARBOR_PYTHON, reason="harbor's models are not installed (./run tests)")
def test_the_fixtures_are_what_harbors_models_read(tmp_path: Path) -> None:
    job = write_job(tmp_path / "jobs", "j", standard_trials(), n_attempts=3)
    _harbor_check(job)
