"""Hostile run dirs and task ids, through the real CLI: bad input is one line and exit 2, and
what a file says never changes the shape of what we print."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from analysis_fixtures import attempt_row, write_run

READERS = [
    ("report", "{run}"),
    ("report", "--format", "json", "{run}"),
    ("report", "--format", "csv", "{run}"),
    ("compare", "{run}", "{good}"),
    ("compare", "{good}", "{run}"),
    ("check", "{run}", "--min-success", "0.5"),
    ("check", "{good}", "--baseline", "{run}"),
    ("tasks", "{run}", "--failed"),
    ("plot", "{run}"),
]


@pytest.mark.parametrize("argv", READERS, ids=lambda argv: " ".join(argv[:2]))
def test_an_attempts_file_that_is_a_directory_is_bad_input(  # type: ignore[no-untyped-def]
    cli, home, tmp_path: Path, argv: tuple[str, ...]
) -> None:
    """Seen: a run dir whose attempts.jsonl is a directory gave DuckDB's 'IO Error: No files
    found …' with the SQL under it, 'this was not expected', and check exited 1 (a failed
    gate) instead of 2 (bad input)."""
    good = write_run(tmp_path, "good", [attempt_row("good", "t", 0, "pass")], tasks=["t"])
    run = tmp_path / "broken"
    (run / "attempts.jsonl").mkdir(parents=True)
    (run / "manifest.json").write_text(json.dumps({"run_id": "broken", "tasks": ["t"]}))
    done = cli(*(a.format(run=run, good=good) for a in argv))
    assert done.returncode == 2, done.stdout + done.stderr
    (line,) = done.stderr.splitlines()
    assert line == f"driftdesk: {run / 'attempts.jsonl'}: not a file (a directory)"


def test_an_attempts_file_that_is_a_dangling_symlink_is_named(cli, home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Not an empty run: the file it points to is gone, and the line says where it pointed."""
    run = tmp_path / "linked"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"run_id": "linked", "tasks": ["t"]}))
    (run / "attempts.jsonl").symlink_to(tmp_path / "moved-away.jsonl")
    done = cli("check", str(run), "--min-success", "0.5")
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        f"driftdesk: {run / 'attempts.jsonl'}: a symlink to {tmp_path / 'moved-away.jsonl'}, "
        "which is not there\n"
    )
