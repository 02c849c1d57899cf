"""Fault probes against the command agent's contract: where the result file is, who may write
it, and what a missing or odd one means. Real harness scripts, real subprocesses, loopback only.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from reruns_helpers import ScriptedEndpoint, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.execution import RunOutcome
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run

KEY = "sk-test-REALKEY-faults-0123456789"


def _script(tmp_path: Path, name: str, body: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(body))
    return path


async def _run(
    tmp_path: Path,
    scripted: ScriptedEndpoint,
    command: str,
    task_ids: list[str],
    *,
    repeat: int = 1,
    concurrency: int = 2,
    timeout_s: float = 30.0,
    out_dir: Path | None = None,
    max_retries: int = 0,
) -> RunOutcome:
    return await execute_run(
        RunSpec(
            profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(write_suite(tmp_path / "suite.jsonl", task_ids)),
            repeat=repeat,
            concurrency=concurrency,
            timeout_s=timeout_s,
            out_dir=out_dir if out_dir is not None else tmp_path / "runs",
            agent="command",
            command=command,
            api_key=KEY,
            retry_policy=RetryPolicy(max_retries=max_retries, base_delay_s=0.01, max_delay_s=0.02),
        )
    )


def _rows(outcome: RunOutcome) -> dict[tuple[str, int], dict[str, object]]:
    return {(r["task_id"], r["attempt"]): r for r in read_rows(outcome.run_dir / "attempts.jsonl")}


# --- the result file ------------------------------------------------------------------------


async def test_a_harness_that_cds_elsewhere_still_writes_its_own_result(
    scripted: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Seen: with a relative --out, {result_path} was relative; the harness cd'd elsewhere, its
    # {"success": false} landed there, and the missing file with exit 0 was recorded pass.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    script = _script(
        tmp_path,
        "cd_harness.py",
        f"""
        import json, os, sys
        os.chdir({str(elsewhere)!r})
        with open("seen.json", "w") as fh:
            json.dump([sys.argv[1], os.environ["DRIFTDESK_RESULT_PATH"]], fh)
        os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
        with open(sys.argv[1], "w") as fh:
            json.dump({{"success": False}}, fh)
        """,
    )
    monkeypatch.chdir(tmp_path)
    outcome = await _run(
        tmp_path,
        scripted,
        f"{sys.executable} {script} {{result_path}}",
        ["t"],
        out_dir=Path("runs"),  # relative, as a user types it
    )
    (row,) = _rows(outcome).values()
    assert row["outcome"] == "fail"
    argument, variable = json.loads((elsewhere / "seen.json").read_text())
    assert os.path.isabs(argument) and argument == variable
    assert (tmp_path / "runs" / outcome.run_id / str(row["result_path"])) == Path(argument)


async def test_a_missing_result_file_is_no_result_when_the_template_uses_it(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = _script(tmp_path, "silent.py", "import sys; sys.exit(int(sys.argv[1]))\n")
    uses = await _run(tmp_path, scripted, f"{sys.executable} {script} 0 {{result_path}}", ["t"])
    (row,) = _rows(uses).values()
    assert (row["outcome"], row["error_code"]) == ("harness_error", "no_result")
    assert row["success"] is None
    uses_fail = await _run(
        tmp_path, scripted, f"{sys.executable} {script} 1 {{result_path}}", ["t"]
    )
    (row,) = _rows(uses_fail).values()
    assert (row["outcome"], row["error_code"]) == ("harness_error", "no_result")
    # A template without {result_path} is judged by its exit code.
    plain = await _run(tmp_path, scripted, f"{sys.executable} {script} 0", ["t"])
    (row,) = _rows(plain).values()
    assert (row["outcome"], row["success"]) == ("pass", True)
    assert "result_path" in row  # the row still names the try's (unused) result file


async def test_an_error_code_in_the_result_file_is_that_link_error(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = _script(
        tmp_path,
        "link.py",
        """
        import json, os, sys
        code = {"rate": "429", "empty": "empty_response", "bogus": "no such\\ncode"}
        task = os.environ["DRIFTDESK_TASK_ID"]
        with open(os.environ["DRIFTDESK_RESULT_PATH"], "w") as fh:
            json.dump({"error_code": code[task], "error_message": "said " + task}, fh)
        """,
    )
    outcome = await _run(
        tmp_path,
        scripted,
        f"{sys.executable} {script} {{result_path}}",
        ["rate", "empty", "bogus"],
        max_retries=2,
    )
    rows = _rows(outcome)
    rate = rows["rate", 0]
    assert (rate["outcome"], rate["error_code"], rate["retries"]) == ("link_error", "429", 2)
    assert rate["error_message"] == "said rate"
    empty = rows["empty", 0]
    assert (empty["outcome"], empty["error_code"], empty["retries"]) == (
        "link_error",
        "empty_response",
        0,
    )
    bogus = rows["bogus", 0]
    assert (bogus["outcome"], bogus["error_code"]) == ("harness_error", "no_result")
    # Each try wrote its own file; the row names the last one's.
    tries = sorted(p.name for p in (outcome.run_dir / "attempts").rglob("0.*.result.json"))
    assert len(tries) == 3 + 1 + 1
    assert str(rate["result_path"]).endswith(".result.json")


async def test_literal_braces_need_doubling_and_the_error_says_so(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    with pytest.raises(ValueError, match=r"\{\{ or \}\}") as error:
        await _run(tmp_path, scripted, """echo '{"success": true}' > {result_path}""", ["t"])
    assert '{"success"}' in str(error.value)
    with pytest.raises(ValueError, match=r"\{\{ or \}\}"):
        await _run(tmp_path, scripted, "echo { > {result_path}", ["t"])
    doubled = await _run(
        tmp_path, scripted, """echo '{{"success": true}}' > {result_path}""", ["t"]
    )
    (row,) = _rows(doubled).values()
    assert row["outcome"] == "pass"


# --- every slot its own result ----------------------------------------------------------------

SLOW_OR_WRITER = """
import json, os, sys, time
if os.environ["DRIFTDESK_TASK_ID"] == "a b":
    with open(sys.argv[1], "w") as fh:
        json.dump({"success": True}, fh)
else:
    time.sleep(1.0)  # the writer is done by now; a shared file would be read as ours
"""


async def test_task_ids_that_sanitise_alike_never_share_a_result(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = _script(tmp_path, "writer.py", SLOW_OR_WRITER)
    long_id = "task-" + "é" * 150  # 305 bytes: over a file name's 255
    outcome = await _run(
        tmp_path,
        scripted,
        f"{sys.executable} {script} {{result_path}}",
        ["a/b", "a-b", "a b", long_id],
        concurrency=4,
    )
    rows = _rows(outcome)
    assert rows["a b", 0]["outcome"] == "pass"
    for task_id in ("a/b", "a-b", long_id):
        assert (rows[task_id, 0]["outcome"], rows[task_id, 0]["error_code"]) == (
            "harness_error",
            "no_result",
        )
    folders = {p.name for p in (outcome.run_dir / "attempts").iterdir()}
    assert len(folders) == 4
    assert all(len(name.encode()) <= 255 for name in folders)
    from driftdesk.analysis.attempts import task_attempts

    (long_row,) = task_attempts(outcome.run_dir, long_id)
    assert long_row["log_path"] is not None


async def test_an_old_run_dir_keeps_its_task_folders_readable(tmp_path: Path) -> None:
    from driftdesk.analysis.attempts import task_attempts

    run_dir = tmp_path / "old"
    folder = run_dir / "attempts" / "a-b"  # the layout before the hash suffix
    folder.mkdir(parents=True)
    (folder / "0.log").write_text("old log\n")
    (folder / "0.result.json").write_text('{"success": true}')
    row = {"run_id": "old", "task_id": "a/b", "attempt": 0, "outcome": "pass"}
    (run_dir / "attempts.jsonl").write_text(json.dumps(row) + "\n")
    (found,) = task_attempts(run_dir, "a/b")
    assert found["log_path"] == str(folder / "0.log")
    assert found["result_path"] == str(folder / "0.result.json")
