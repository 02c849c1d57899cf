"""The run-dir format has one owner (issue 47): driftdesk.rundir names, reads and frames run
dirs, and nothing else in the product does it by hand."""

from __future__ import annotations

import ast
import datetime as dt
import gzip
import json
import os
from pathlib import Path

import pytest

from driftdesk.analysis.sources import SourceError, manifest_or_empty
from driftdesk.rundir import (
    MANIFEST_FILE,
    ManifestNotObject,
    ManifestUnparsable,
    RunManifest,
    candidate_run_ids,
    cut_torn_tail,
    gzip_member,
    import_run_id_base,
    latest_rows,
    read_manifest,
    record_lines,
    run_id_base,
    safe_name,
    whole_members_end,
)

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ["driftdesk", "analysis", "cli", "providers", "reruns", "tui"]


def _product_modules() -> list[Path]:
    return sorted(p for folder in PRODUCT for p in (REPO / folder).rglob("*.py"))


def test_one_manifest_reader() -> None:
    """Only driftdesk/rundir/manifest.py defines a manifest reader (analysis had a second)."""
    readers = []
    for path in _product_modules():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") == "read_manifest":
                readers.append(str(path.relative_to(REPO)))
    assert readers == ["driftdesk/rundir/manifest.py"]


def test_slot_rule_not_inlined() -> None:
    """The last-row-per-slot rule is driftdesk.rundir.slots' alone: no module keys rows by
    (task_id, attempt) itself to keep the last one."""
    inlined = [
        str(path.relative_to(REPO))
        for path in _product_modules()
        if 'int(row["attempt"]))] = row' in path.read_text(encoding="utf-8")
    ]
    assert inlined == []


def test_last_row_of_a_slot_wins() -> None:
    rows = [
        {"task_id": "a", "attempt": 0, "outcome": "link_error"},
        {"task_id": "a", "attempt": "1", "outcome": "pass"},
        {"task_id": "b"},  # no attempt: no slot
        {"task_id": "a", "attempt": 0, "outcome": "fail"},
    ]
    latest = latest_rows(iter(rows))
    assert list(latest) == [("a", 0), ("a", 1)]
    assert latest[("a", 0)]["outcome"] == "fail"


def test_run_ids_and_safe_names() -> None:
    now = dt.datetime(2026, 12, 7, 5, 1, 2, tzinfo=dt.UTC)
    assert run_id_base("my prof", "gpt/4o", now) == "my-prof-gpt-4o-20261207T050102Z"
    assert (
        import_run_id_base("jsonl", "out file", now, None)
        == "import-jsonl-out-file-20261207T050102Z"
    )
    # The importer's own name for an id with nothing safe in it, as before.
    assert import_run_id_base("jsonl", "x", now, "///") == "import"
    assert safe_name("///") == "x"
    ids = candidate_run_ids("r")
    assert [next(ids) for _ in range(3)] == ["r", "r-2", "r-3"]


def test_framing_reports_and_cuts_a_torn_tail(tmp_path: Path) -> None:
    path = tmp_path / "0.calls.jsonl.gz"
    whole = gzip_member('{"a":1}\n') + gzip_member('{"b":2}\n')
    torn = gzip_member('{"c":3}\n')[:-5]
    path.write_bytes(whole + torn)
    assert gzip.decompress(whole) == b'{"a":1}\n{"b":2}\n'  # members any gzip reader reads
    problems: list[str] = []
    assert [line for _, line in record_lines(path, problems)] == [b'{"a":1}', b'{"b":2}']
    assert len(problems) == 1 and "torn last gzip member" in problems[0]
    assert whole_members_end(path.read_bytes()) == len(whole)
    fd = os.open(path, os.O_WRONLY)
    try:
        assert cut_torn_tail(fd, path, len(whole + torn)) == len(whole)
    finally:
        os.close(fd)
    assert path.read_bytes() == whole


def test_manifest_reader_and_its_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="is not a run dir"):
        read_manifest(tmp_path)
    assert manifest_or_empty(tmp_path) == {} and manifest_or_empty(None) == {}
    (tmp_path / MANIFEST_FILE).write_text("{nope", encoding="utf-8")
    with pytest.raises(ManifestUnparsable, match="does not parse as JSON"):
        read_manifest(tmp_path)
    with pytest.raises(SourceError, match=r"manifest.json: unreadable manifest: Expecting"):
        manifest_or_empty(tmp_path)
    (tmp_path / MANIFEST_FILE).write_text("[1]", encoding="utf-8")
    with pytest.raises(ManifestNotObject, match="expected a JSON object"):
        read_manifest(tmp_path)
    with pytest.raises(SourceError, match="manifest is not a JSON object"):
        manifest_or_empty(tmp_path)


def test_run_manifest_reads_an_older_manifest_and_gives_it_back(tmp_path: Path) -> None:
    """A manifest from before client, check_rule and executor: typed, nothing lost."""
    old = {
        "run_id": "p-m-20250101T000000Z",
        "profile": "p",
        "model": "m",
        "suite": {"path": "/s.jsonl", "name": "basic", "sha256": "00"},
        "repeat": 3,
        "tasks": ["t1", "t2"],
        "status": "completed",
        "a_key_from_later": {"kept": True},
    }
    (tmp_path / MANIFEST_FILE).write_text(json.dumps(old), encoding="utf-8")
    manifest = RunManifest.read(tmp_path)
    assert (manifest.profile, manifest.repeat, manifest.suite_name) == ("p", 3, "basic")
    assert manifest.agent is None and manifest.resumes == [] and manifest.adaptive is None
    assert list(manifest.to_json().items()) == list(old.items())


def test_manifests_are_written_and_parsed_only_by_rundir() -> None:
    """No product module outside driftdesk/rundir writes a manifest or parses one by hand (the
    importer, the zero-copy relink and the Run screen did)."""
    by_hand = []
    for path in _product_modules():
        if path.is_relative_to(REPO / "driftdesk" / "rundir"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            lowered = line.lower()
            if "manifest" in lowered and ("atomic_write_json(" in line or "json.load" in line):
                by_hand.append(f"{path.relative_to(REPO)}:{number}")
    assert by_hand == []
