"""The typed cache beside a run (analysis/row_cache.py, analysis/run_reader.py): derived and
disposable. A report read through it, warm, extended after an append, or rebuilt, gives the
very JSON a report of the JSONL alone gives, on the golden runs (retried slots, bad lines, a
torn last line, link and harness errors, tasks past attempt 128)."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from analysis_fixtures import attempt_row
from golden_runs import write_golden_runs

from driftdesk.analysis import attempt_table, cache_seal, row_cache
from driftdesk.analysis.report import write_report_json
from driftdesk.analysis.run_reader import read_runs
from driftdesk.analysis.sources import resolve_sources

OPTIONS: list[dict[str, Any]] = [
    {},
    {
        "task_curves": True,
        "group_by": "scenario",
        "include_link_errors": True,
        "min_runs": 2,
        "sort": "task",
    },
    {"pass_k_convention": "tau2", "sort": "success", "top": 5},
]


def report(run_dir: Path, **options: Any) -> dict[str, Any]:
    out = io.StringIO()
    write_report_json([run_dir], out, **options)
    return json.loads(out.getvalue())


def read_from(run_dir: Path, **options: Any) -> str:
    """Where a report's rows come from now (and the cache is written as a report writes it)."""
    from driftdesk.analysis.prices import load_prices

    with attempt_table.connection() as con:
        (extras,) = read_runs(
            con,
            resolve_sources([run_dir]),
            include_link_errors=options.get("include_link_errors", False),
            prices=load_prices(),
            need_rows=False,
        )
    return extras.read_from


def drop_caches(run_dir: Path) -> None:
    for folder in row_cache.folders(resolve_sources([run_dir])[0]):
        shutil.rmtree(folder, ignore_errors=True)


def truth(run_dir: Path, **options: Any) -> dict[str, Any]:
    """The report of the JSONL alone (every cache deleted first, and after)."""
    drop_caches(run_dir)
    expected = report(run_dir, **options)
    drop_caches(run_dir)
    return expected


def finished_run(root: Path) -> Path:
    """Golden run A without its torn last line: a finished run, every line whole."""
    run_dir, _ = write_golden_runs(root)
    attempts = run_dir / "attempts.jsonl"
    text = attempts.read_text()
    attempts.write_text(text[: text.rfind("\n") + 1])
    return run_dir


def append(run_dir: Path, lines: list[str]) -> None:
    with open(run_dir / "attempts.jsonl", "a") as fh:
        fh.write("".join(lines))


def row(task_id: str, attempt: int, outcome: str, **extra: Any) -> str:
    return json.dumps(attempt_row("golden-a", task_id, attempt, outcome, **extra)) + "\n"


@pytest.mark.parametrize("torn", [False, True], ids=["finished", "torn last line"])
def test_reports_through_the_cache_equal_reports_of_the_jsonl(
    home, tmp_path: Path, torn: bool
) -> None:  # type: ignore[no-untyped-def]
    run_dir = write_golden_runs(tmp_path)[0] if torn else finished_run(tmp_path)
    expected = [truth(run_dir, **options) for options in OPTIONS]
    assert expected[0]["skipped_line_count"] >= 7 and expected[0]["missing_slots"]
    assert any(line["torn"] for line in expected[0]["skipped_lines"]) == torn

    assert read_from(run_dir) == "jsonl"  # writes the cache
    assert (run_dir / row_cache.CACHE_FOLDER / row_cache.META_FILE).is_file()
    # a torn last line is read from the JSONL each time: the rows are kept, not the aggregates
    assert read_from(run_dir) == ("cached rows" if torn else "cached aggregates")
    for options, want in zip(OPTIONS, expected, strict=True):
        first = report(run_dir, **options)  # aggregates kept for these options from here on
        again = report(run_dir, **options)
        assert first == want and again == want, options
    if not torn:
        assert read_from(run_dir, include_link_errors=True) == "cached aggregates"


def test_lines_appended_extend_the_cache_and_change_no_figure(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_dir = finished_run(tmp_path)
    for options in OPTIONS:
        report(run_dir, **options)
    assert read_from(run_dir) == "cached aggregates"
    parts = len(json.loads((run_dir / ".rows-cache" / "meta.json").read_text())["parts"])

    append(
        run_dir,
        [
            # a resume's retry of a slot already written, under another model
            row("suite/task-004", 0, "pass", model="gpt-4o-mini", latency_ms=12.5),
            row("suite/task-004", 6, "fail"),  # a new slot of a known task
            row("suite/task-new", 0, "link_error", error_code="new_kind"),  # a new task
            row("suite/task-new", 1, "pass"),
            '{"task_id": "suite/task-005", "attempt": 1, "outcome": "pass", "latency_ms": -1}\n',
            "\n",
            row("suite/long-task", 130, "fail"),  # a repeated slot past attempt 128
        ],
    )
    assert read_from(run_dir) == "cached aggregates extended"
    meta = json.loads((run_dir / ".rows-cache" / "meta.json").read_text())
    assert len(meta["parts"]) == parts + 1
    for options in OPTIONS:
        got = report(run_dir, **options)
        want = truth(run_dir, **options)
        assert got == want, options
        assert any("latency_ms" in s["reason"] for s in got["skipped_lines"])
        report(run_dir, **options)  # the cache again, for the next options

    # an unfinished last line is read from the JSONL; once whole, it is taken in
    append(run_dir, [row("suite/task-006", 7, "pass")[:-20]])
    assert read_from(run_dir) == "cached rows"
    got = report(run_dir)
    assert got == truth(run_dir) and got["skipped_lines"][-1]["torn"]
    report(run_dir)
    append(run_dir, ['"\n', row("suite/task-006", 8, "pass")])
    assert read_from(run_dir) == "cached rows extended"
    assert report(run_dir) == truth(run_dir)


def test_a_cache_of_other_code_is_rebuilt_never_read(home, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_dir = finished_run(tmp_path)
    want = truth(run_dir)
    report(run_dir)
    folder = run_dir / ".rows-cache"
    meta = json.loads((folder / "meta.json").read_text())
    # Different content under the same names: every pass a fail and every count doubled.
    import duckdb

    for name in (*meta["parts"], *(a["aggs"] for a in meta["aggs"].values())):
        path = folder / name
        changed = "passes, fails" if name.startswith("aggs-") else "outcome"
        swap = (
            "fails AS passes, passes AS fails"
            if changed != "outcome"
            else "CASE outcome WHEN 'pass' THEN 'fail' ELSE outcome END AS outcome"
        )
        duckdb.sql(
            f"COPY (SELECT * REPLACE ({swap}) FROM read_parquet('{path}')) "
            f"TO '{path}.new' (FORMAT parquet)"
        )
        os.replace(f"{path}.new", path)
    # sealed again, as a forger holding the user's rights could (``cache_seal``)
    meta["part_seals"] = [cache_seal.file_seal(folder / p) for p in meta["parts"]]
    for aggs in meta["aggs"].values():
        aggs["aggs_seal"] = cache_seal.file_seal(folder / aggs["aggs"])
    row_cache.save(folder, row_cache.Meta(**meta))
    meta = json.loads((folder / "meta.json").read_text())
    # With this code's version, the altered cache would be read as it is: the test can fail.
    assert report(run_dir)["success_rate"] != want["success_rate"]

    meta["version"] = "0-another-version"
    meta["digest"] = row_cache._meta_digest(meta)
    (folder / "meta.json").write_text(json.dumps(meta))
    assert read_from(run_dir) == "jsonl"
    assert report(run_dir) == want
    rebuilt = json.loads((folder / "meta.json").read_text())
    assert rebuilt["version"] == row_cache.CACHE.version() and rebuilt["parts"] != meta["parts"]


@pytest.mark.parametrize("change", ["edited in place", "replaced", "shrunk"])
def test_a_source_changed_otherwise_than_appended_drops_the_cache(
    home, tmp_path: Path, change: str
) -> None:  # type: ignore[no-untyped-def]
    run_dir = finished_run(tmp_path)
    report(run_dir)
    attempts = run_dir / "attempts.jsonl"
    text = attempts.read_text()
    middle = text.index('"outcome": "fail"', len(text) // 2)
    edited = text[:middle] + '"outcome": "pass"' + text[middle + 17 :]
    if change == "edited in place":  # same size, same inode
        with open(attempts, "r+") as fh:
            fh.write(edited)
    elif change == "replaced":  # a new file, grown, its last lines the same
        other = attempts.with_suffix(".new")
        other.write_text(edited + row("suite/task-001", 9, "pass"))
        os.replace(other, attempts)
    else:
        attempts.write_text(text[: len(text) // 2].rsplit("\n", 1)[0] + "\n")
    assert read_from(run_dir) == "jsonl"
    assert report(run_dir) == truth(run_dir)


def test_where_the_run_dir_cannot_hold_it_the_cache_goes_to_the_user_cache_dir(
    home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    run_dir = finished_run(tmp_path)
    want = truth(run_dir)
    (run_dir / row_cache.CACHE_FOLDER).write_text("not a folder\n")  # mkdir there fails
    assert report(run_dir) == want
    user_folder = row_cache.folders(resolve_sources([run_dir])[0])[1]
    assert (user_folder / row_cache.META_FILE).is_file()
    assert str(user_folder).startswith(str(Path(os.environ["XDG_CACHE_HOME"])))
    assert read_from(run_dir) == "cached aggregates"
    assert report(run_dir) == want


def test_a_cold_report_writes_its_rows_meanwhile_and_its_cache_is_whole_when_it_returns(
    home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """The rows part is written by a second connection while the report is made: when the
    report returns (or its caller stops after the first run), the meta names the part, every
    valid row is in it, and the report's intervals are kept beside the aggregates. The writer
    is held back half a second, so that a report not waiting for it would end first."""
    import time

    run_dir = finished_run(tmp_path)
    other = write_golden_runs(tmp_path / "others")[1]
    want = truth(run_dir)
    real_write_part = row_cache.write_part

    def late_write_part(*args: Any, **kwargs: Any) -> None:
        time.sleep(0.5)
        real_write_part(*args, **kwargs)

    monkeypatch.setattr(row_cache, "write_part", late_write_part)
    meta_path = run_dir / row_cache.CACHE_FOLDER / row_cache.META_FILE

    def cache_is_whole() -> None:
        meta = json.loads(meta_path.read_text())
        import duckdb

        (rows,) = (
            duckdb.connect()
            .execute(
                "SELECT count(*) FROM read_parquet("
                f"{[str(meta_path.parent / p) for p in meta['parts']]})"
            )
            .fetchone()
        )  # type: ignore[misc]
        valid = (
            sum(1 for line in (run_dir / "attempts.jsonl").read_text().splitlines() if line.strip())
            - want["skipped_line_count"]
        )
        assert meta["part_rows"] == [rows] and rows == valid
        (kept,) = meta["aggs"].values()
        rounded = {
            name: None if ci is None else [round(v, 6) for v in ci]
            for name, ci in kept["ci95"]["1"].items()
        }
        assert rounded == want["ci95"]

    assert report(run_dir) == want
    cache_is_whole()

    drop_caches(run_dir)
    runs = resolve_sources([run_dir, other])
    from driftdesk.analysis.report import ReportOptions, _assembled

    stream = _assembled(runs, ReportOptions())
    next(stream)
    stream.close()  # the caller stops after the first run: its cache is finished, not cut off
    cache_is_whole()
    assert not (other / row_cache.CACHE_FOLDER).exists()  # never read
    assert report(run_dir) == want
