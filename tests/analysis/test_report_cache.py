"""The report JSON kept for unchanged runs (analysis/report_cache.py): through the real CLI, a
kept report prints the very bytes and warnings a report of the JSONL alone prints, and any
change to what it was made from (a line appended, an option, the price table, the code) makes
it again."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from analysis_fixtures import attempt_row
from golden_runs import write_golden_runs

from driftdesk.analysis import report_cache, row_cache
from driftdesk.analysis.prices import prices_path
from driftdesk.analysis.sources import resolve_sources
from driftdesk.paths import cache_dir


def entries() -> list[Path]:
    return sorted((cache_dir() / "report").glob("*.json"))


def drop_all_caches(run_dir: Path) -> None:
    shutil.rmtree(cache_dir(), ignore_errors=True)
    for folder in row_cache.folders(resolve_sources([run_dir])[0]):
        shutil.rmtree(folder, ignore_errors=True)


def report(cli: Any, *args: str) -> tuple[str, str]:
    result = cli("report", *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


def test_a_kept_report_prints_what_the_jsonl_alone_gives(home, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = write_golden_runs(tmp_path)  # bad lines, a torn last line, retried slots
    for options in ([], ["--top", "3", "--sort", "task"], ["--include-link-errors"]):
        drop_all_caches(run_dir)
        truth = report(cli, str(run_dir), *options)
        assert "warning: " in truth[1]  # the golden run's skipped lines
        assert json.loads(truth[0])["skipped_line_count"] >= 7
        drop_all_caches(run_dir)
        first = report(cli, str(run_dir), *options)  # made, and kept
        assert len(entries()) == 1
        made = entries()[0].stat()
        again = report(cli, str(run_dir), *options)  # printed as kept
        assert first == truth and again == truth, options
        read = entries()[0].stat()  # read, not made again (that replaces the file)
        assert (read.st_ino, read.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)


def test_a_line_appended_an_option_or_a_price_makes_the_report_again(
    home, cli, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = write_golden_runs(tmp_path)
    attempts = run_dir / "attempts.jsonl"
    text = attempts.read_text()
    attempts.write_text(text[: text.rfind("\n") + 1])  # a finished run: whole lines
    before, _ = report(cli, str(run_dir))
    with open(attempts, "a") as fh:
        fh.write(json.dumps(attempt_row("golden-a", "brand-new-task", 0, "pass")) + "\n")
    after, _ = report(cli, str(run_dir))
    assert "brand-new-task" not in before and "brand-new-task" in after
    assert json.loads(after)["tasks_judged"] == json.loads(before)["tasks_judged"] + 1

    top, _ = report(cli, str(run_dir), "--top", "1")
    assert len(json.loads(top)["tasks"]) == 1 and len(entries()) == 2  # one per selection

    model = json.loads(after)["models"][0]
    prices = prices_path()
    prices.parent.mkdir(parents=True, exist_ok=True)
    prices.write_text(f'[models."{model}"]\ninput_per_mtok = 1000.0\noutput_per_mtok = 2000.0\n')
    priced, _ = report(cli, str(run_dir))
    assert priced != after
    drop_all_caches(run_dir)
    assert report(cli, str(run_dir))[0] == priced  # the same as made with no cache at all


def test_a_kept_report_of_other_code_or_changed_runs_is_never_printed(
    home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = write_golden_runs(tmp_path)
    runs = resolve_sources([run_dir])
    key = report_cache.identity(runs, {"top": None}, {})
    path = report_cache.entry_file(key)
    writer = report_cache.Writer(path, key)
    writer.text('{"kept": true}\n')
    writer.keep(["a warning"], key)
    kept = report_cache.load(path, key)
    assert kept is not None
    warnings, handle = kept
    with handle:
        assert (warnings, handle.read()) == (["a warning"], b'{"kept": true}\n')
    # other code: another key
    with monkeypatch.context() as other:
        other.setattr(report_cache, "CACHE", replace(report_cache.CACHE, format=-1))
        assert report_cache.load(path, report_cache.identity(runs, {"top": None}, {})) is None
    # a run that changed while its report was made: not kept
    changed = report_cache.Writer(path, key)
    changed.text("{}\n")
    changed.keep([], [*key[:2], [["another identity"]]])
    assert report_cache.load(path, key) is not None  # the earlier entry stays
    assert not list(path.parent.glob(".part-*"))  # and no temp file is left


def test_the_newest_entries_are_kept(home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = write_golden_runs(tmp_path)
    runs = resolve_sources([run_dir])

    def keep(top: int) -> Path:
        key = report_cache.identity(runs, {"top": top}, {})
        writer = report_cache.Writer(report_cache.entry_file(key), key)
        writer.text("{}\n")
        writer.keep([], key)
        return report_cache.entry_file(key)

    for top in range((report_cache.CACHE.keep or 0) + 3):
        keep(top)
    assert len(entries()) == report_cache.CACHE.keep
    size = max(entry.stat().st_size for entry in entries()) + 1  # (its key holds "100")
    monkeypatch.setattr(
        report_cache, "CACHE", replace(report_cache.CACHE, keep_bytes=3 * size)
    )  # room for three, not four
    newest = keep(100)
    assert len(entries()) == 3 and newest in entries()


def test_a_report_too_big_to_keep_is_not_written_past_the_limit(
    home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    run_dir, _ = write_golden_runs(tmp_path)
    key = report_cache.identity(resolve_sources([run_dir]), {"top": None}, {})
    monkeypatch.setattr(report_cache, "CACHE", replace(report_cache.CACHE, keep_bytes=1000))
    writer = report_cache.Writer(report_cache.entry_file(key), key)
    folder = report_cache.entry_file(key).parent
    writer.text("x" * 600)
    (temp,) = folder.glob(".part-*")  # written as it streams
    writer.text("x" * 600)  # past the limit: it would never be kept
    assert not temp.exists()
    writer.text("x" * 10)
    writer.keep([], key)
    assert not list(folder.iterdir())  # nothing written, nothing kept


def test_a_kept_report_past_a_chunk_prints_characters_cut_at_the_chunk_end(
    home, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    import io

    from driftdesk.analysis.prices import load_prices

    run_dir, _ = write_golden_runs(tmp_path)
    key = report_cache.identity(resolve_sources([run_dir]), {"task_curves": False}, load_prices())
    body = '{"x":"' + "日本" * (1 << 19) + '"}\n'  # 3 MiB: chunk ends fall inside characters
    writer = report_cache.Writer(report_cache.entry_file(key), key)
    writer.text(body)
    writer.keep([], key)
    out = io.StringIO()
    report_cache.write_json([run_dir], out, warn=lambda line: None)
    assert out.getvalue() == body
