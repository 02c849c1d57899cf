"""``driftdesk cache info|clear`` and ``driftdesk --no-cache``, through the real CLI on the
golden runs (bad lines, a torn last line, retried slots): the caches a report keeps are
listed and deleted, and a report without them reads the JSONL, keeps nothing, and gives the
very bytes a report through them gives."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from golden_runs import write_golden_runs

from driftdesk.analysis import cache_seal, report_cache, row_cache, run_success, trend_data
from driftdesk.paths import cache_dir


def report(cli: Any, *args: str) -> str:
    result = cli("report", *args, "--format", "json")
    assert result.returncode == 0, result.stderr
    return result.stdout


def kept_reports() -> list[Path]:
    return sorted((cache_dir() / "report").glob("*.json"))


def test_no_cache_reads_the_jsonl_and_keeps_nothing(home, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_dir, other = write_golden_runs(tmp_path)
    attempts = run_dir / "attempts.jsonl"
    text = attempts.read_text()
    attempts.write_text(text[: text.rfind("\n") + 1])  # finished: its aggregates are kept
    truth = cli("--no-cache", "report", str(run_dir), "--format", "json")
    assert truth.returncode == 0, truth.stderr
    assert "warning: " in truth.stderr  # the skipped lines, named as ever
    assert not (run_dir / row_cache.CACHE_FOLDER).exists() and not kept_reports()
    trend = cli("trend", str(run_dir), str(other), "--json", "--no-cache")
    assert trend.returncode == 0, trend.stderr
    assert not (run_dir / trend_data.CACHE_FILE).exists()
    assert not (cache_dir() / "trend").exists()
    assert not run_success.store_path().exists()  # the successes trend measured, not kept

    # A cache that says otherwise (every pass a fail, under this code's version) is believed
    # by a report that reads caches, and ignored by one that does not.
    assert report(cli, str(run_dir)) == truth.stdout  # made, and kept
    import duckdb

    folder = run_dir / row_cache.CACHE_FOLDER
    meta = json.loads((folder / row_cache.META_FILE).read_text())
    for aggs in meta["aggs"].values():
        path = folder / aggs["aggs"]
        duckdb.connect().execute(
            f"COPY (SELECT * REPLACE (fails AS passes, passes AS fails) FROM read_parquet('{path}'))"
            f" TO '{path}.new' (FORMAT parquet)"
        )
        os.replace(f"{path}.new", path)
        aggs["aggs_seal"] = cache_seal.file_seal(path)  # sealed again, as a forger could
    row_cache.save(folder, row_cache.Meta(**meta))
    for entry in kept_reports():
        entry.unlink()
    assert report(cli, str(run_dir)) != truth.stdout
    env = {**os.environ, "DRIFTDESK_NO_CACHE": "1"}
    assert cli("report", str(run_dir), "--format", "json", env=env).stdout == truth.stdout
    assert report(cli, str(run_dir), "--no-cache") == truth.stdout


def test_cache_info_and_clear_of_a_run_and_of_everything(home, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    run_dir, other = write_golden_runs(tmp_path)
    truth = report(cli, str(run_dir), "--no-cache")
    for run in (run_dir, other):
        report(cli, str(run))
    assert cli("trend", str(run_dir), str(other), "--json").returncode == 0

    info = cli("cache", "info", str(run_dir), "--json")
    assert info.returncode == 0, info.stderr
    listed = {(c["what"], Path(c["path"])) for c in json.loads(info.stdout)}
    assert ("typed rows of " + run_dir.name, run_dir / row_cache.CACHE_FOLDER) in listed
    assert ("trend figures of " + run_dir.name, run_dir / trend_data.CACHE_FILE) in listed
    assert (
        sum(what == report_cache.CACHE.what for what, _ in listed) == 1
    )  # its own, not the other's
    assert all(c["bytes"] > 0 and c["files"] > 0 for c in json.loads(info.stdout))
    text = cli("cache", "info", str(run_dir))
    assert "typed rows of" in text.stdout and text.stdout.splitlines()[-1].startswith("total")

    cleared = cli("cache", "clear", str(run_dir))
    assert cleared.returncode == 0 and cleared.stdout.startswith("removed "), cleared.stderr
    assert not (run_dir / row_cache.CACHE_FOLDER).exists()
    assert not (run_dir / trend_data.CACHE_FILE).exists()
    assert len(kept_reports()) == 1  # the other run's stays, and its rows too
    assert (other / row_cache.CACHE_FOLDER).exists()
    assert report(cli, str(run_dir)) == truth  # made again from the JSONL
    assert (run_dir / row_cache.CACHE_FOLDER).exists()

    # everything: the user's cache dir and the runs under --runs, each file counted once
    everything_info = json.loads(
        cli("cache", "info", "--runs", str(run_dir.parent), "--json").stdout
    )
    paths = [Path(c["path"]) for c in everything_info]
    assert cache_dir() / "report" in paths and run_dir / row_cache.CACHE_FOLDER in paths
    assert not any(p in q.parents for p in paths for q in paths)
    broken = run_dir.parent / "broken-run"  # a run whose manifest does not parse
    (broken / row_cache.CACHE_FOLDER).mkdir(parents=True)
    (broken / "manifest.json").write_text("{not json")
    (broken / row_cache.CACHE_FOLDER / "meta.json").write_text("{}")
    keep = tmp_path / "not-a-cache.txt"
    keep.write_text("mine\n")
    everything = cli("cache", "clear", "--runs", str(run_dir.parent))
    assert everything.returncode == 0, everything.stderr
    for run in (run_dir, other, broken):
        assert not (run / row_cache.CACHE_FOLDER).exists()
    assert (run_dir / "attempts.jsonl").exists() and (broken / "manifest.json").exists()
    assert not kept_reports() and not any(p.is_file() for p in (cache_dir() / "trend").rglob("*"))
    assert keep.read_text() == "mine\n"
    assert cli("cache", "info", "--runs", str(run_dir.parent)).stdout == "no caches\n"
    missing = cli("cache", "info", str(tmp_path / "nope"))
    assert missing.returncode == 2 and "not a run dir" in missing.stderr
