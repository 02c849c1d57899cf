"""A harness plants symlinks (or hard links, FIFOs) where driftdesk will write: none of them
redirects a write. Without ``--isolate`` the task's folder is the harness's to write, and
driftdesk writes ``<n>.diff``, ``<n>.check.txt`` and the logs there after it ran; under it the
harness sees that folder as an empty scratch tmpfs, and what it plants there never lands.

Real bubblewrap, real subprocesses, real files outside the run dir as the victims."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from coding_helpers import write_coding_suite
from reruns_helpers import ScriptedEndpoint, needs_bwrap, read_rows

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.command_agent import read_result_file
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.rundir import open_private

VICTIM_TEXT = "the user's own file\n"

# Plants a symlink to the victim at every file of the task's folder driftdesk writes later:
# this attempt's diff, check output and log, and the next attempt's log.
PLANTER = textwrap.dedent(
    """
    import json, os, sys
    victim, result_path, attempt = sys.argv[1], sys.argv[2], int(sys.argv[3])
    folder = os.path.dirname(result_path)
    planted = []
    for name in (f"{attempt}.diff", f"{attempt}.check.txt", f"{attempt}.log",
                 f"{attempt + 1}.log", f"{attempt + 1}.diff"):
        path = os.path.join(folder, name)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        os.symlink(victim, path)
        planted.append(name)
    with open("notes.txt", "w") as fh:
        fh.write("done\\n")
    with open(result_path, "w") as fh:
        json.dump({"success": True, "planted": planted}, fh)
    """
)


def _victim(home: Path) -> Path:
    victim = home / "victim.txt"
    victim.write_text(VICTIM_TEXT)
    victim.chmod(0o644)
    return victim


def test_open_private_replaces_a_planted_symlink(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    for mode in ("w", "a"):
        path = tmp_path / f"0.{mode}.diff"
        path.symlink_to(victim)
        with open_private(path, mode) as fh:
            fh.write("ours\n")
        assert not path.is_symlink() and path.read_text() == "ours\n"
        assert victim.read_text() == VICTIM_TEXT
        assert victim.stat().st_mode & 0o777 == 0o644  # no fchmod through it either


def test_open_private_replaces_a_planted_hard_link(tmp_path: Path) -> None:
    victim = _victim(tmp_path)
    path = tmp_path / "0.check.txt"
    os.link(victim, path)
    with open_private(path, "w") as fh:  # "w" would have truncated the victim at open
        fh.write("ours\n")
    assert path.read_text() == "ours\n"
    assert victim.read_text() == VICTIM_TEXT
    assert os.stat(victim).st_nlink == 1


def test_open_private_does_not_block_on_a_planted_fifo(tmp_path: Path) -> None:
    path = tmp_path / "1.log"
    os.mkfifo(path)
    with open_private(path, "a") as fh:
        fh.write("ours\n")
    assert path.is_file() and path.read_text() == "ours\n"


def test_open_private_keeps_appending_to_its_own_file(tmp_path: Path) -> None:
    path = tmp_path / "0.log"
    with open_private(path, "a") as fh:
        fh.write("one\n")
    with open_private(path, "a") as fh:
        fh.write("two\n")
    assert path.read_text() == "one\ntwo\n"
    with open_private(path, "w") as fh:
        fh.write("three\n")
    assert path.read_text() == "three\n"
    assert path.stat().st_mode & 0o777 == 0o600


@pytest.mark.keyring
async def test_an_isolated_harness_planting_symlinks_redirects_no_write(
    home: object, scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    needs_bwrap()
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore

    ProfileStore().save(Profile(name="up", protocol="openai", base_url=scripted.url, model="m"))
    set_key("up", "sk-test-REALKEY-symlinks-0123456789")
    victim = _victim(Path(os.environ["HOME"]))
    suite_dir = tmp_path / "suite"
    task = {
        "task_id": "notes",
        "prompt": "Write done into notes.txt.",
        "workspace": "write-notes",
        "check": 'test "$(cat notes.txt)" = done',
    }
    suite = write_coding_suite(suite_dir, [task])
    script = suite_dir / "planter.py"
    script.write_text(PLANTER)
    outcome = await execute_run(
        RunSpec(
            profile="up",
            suite=str(suite),
            repeat=2,
            concurrency=1,
            timeout_s=90,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script} {victim} {{result_path}} {{attempt}}",
            isolate=True,
        )
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [r["outcome"] for r in rows] == ["pass", "pass"], rows
    folder = next((outcome.run_dir / "attempts").iterdir())
    planted = json.loads((outcome.run_dir / rows[0]["result_path"]).read_text())["planted"]
    assert planted == ["0.diff", "0.check.txt", "0.log", "1.log", "1.diff"]  # it did plant
    assert not [p for p in folder.rglob("*") if p.is_symlink()]  # in its sandbox only
    assert victim.read_text() == VICTIM_TEXT
    assert victim.stat().st_mode & 0o777 == 0o644
    for name in ("0.diff", "0.check.txt", "0.log", "1.log"):
        path = folder / name
        assert not path.is_symlink(), name
        assert path.stat().st_mode & 0o777 == 0o600, name
    assert "notes.txt" in (folder / "0.diff").read_text()
    assert "check exit code 0" in (folder / "0.check.txt").read_text()


def test_a_result_file_planted_as_a_symlink_is_not_read_through(tmp_path: Path) -> None:
    # A file of the user's that says success: read through the link, it would be the verdict.
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"success": true, "error_message": "the user\'s own file"}')
    result_path = tmp_path / "0.try-1.result.json"
    result_path.symlink_to(elsewhere)
    result = read_result_file(result_path)
    assert result is not None and result.outcome == "harness_error", result
    assert result.error_code == "no_result" and "symlink" in (result.error_message or "")


def test_a_result_file_planted_as_a_fifo_does_not_block(tmp_path: Path) -> None:
    result_path = tmp_path / "0.try-1.result.json"
    os.mkfifo(result_path)  # no writer: a blocking open would wait for ever
    result = read_result_file(result_path)
    assert result is not None and result.error_code == "no_result", result
    assert "no regular file" in (result.error_message or "")


def test_a_result_file_that_is_a_folder_or_real_file_reads_as_before(tmp_path: Path) -> None:
    folder = tmp_path / "dir.result.json"
    folder.mkdir()
    as_folder = read_result_file(folder)
    assert as_folder is not None and "directory" in (as_folder.error_message or "")
    real = tmp_path / "real.result.json"
    real.write_text('{"success": true, "score": 0.5}')
    verdict = read_result_file(real)
    assert verdict is not None and verdict.outcome == "pass" and verdict.score == 0.5
    assert read_result_file(tmp_path / "missing.json") is None
