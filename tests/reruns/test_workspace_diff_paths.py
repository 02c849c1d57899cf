"""The workspace diff reads as a repository's: ``a/<file> b/<file>``, whatever changed."""

from __future__ import annotations

from pathlib import Path

from driftdesk.reruns.workspace import AttemptWorkspace, write_diff


def test_added_changed_and_removed_files_are_named_relative_on_both_sides(tmp_path: Path) -> None:
    before = tmp_path / "suite"
    before.mkdir()
    (before / "kept.txt").write_text("one\n")
    (before / "gone.txt").write_text("bye\n")
    after = tmp_path / "attempts" / "coin-0123" / "0.workspace"
    after.mkdir(parents=True)
    (after / "kept.txt").write_text("two\n")
    (after / "coin.txt").write_text("heads\n")
    ws = AttemptWorkspace(after, tmp_path / "check.txt", tmp_path / "0.diff", source=before)
    write_diff(ws)
    headers = [line for line in ws.diff.read_text().splitlines() if line.startswith("diff ")]
    assert sorted(headers) == [
        "diff --git a/coin.txt b/coin.txt",
        "diff --git a/gone.txt b/gone.txt",
        "diff --git a/kept.txt b/kept.txt",
    ]
    assert str(tmp_path) not in ws.diff.read_text()
