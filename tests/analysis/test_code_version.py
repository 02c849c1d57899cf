"""Every cache of derived data declared in ``analysis.cache_store`` (the row cache, the kept
report, the trend figures, the kept trend, the pair verdicts, the measured successes) is keyed
by one digest of the code that makes figures (analysis/code_version.py): an edit to any
analysis module or to the core helpers they use makes each of them again. Checked on a real
copy of the package, imported from it alone in a child process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest
from analysis_fixtures import attempt_row, write_run

import driftdesk
from driftdesk.analysis import code_version as code_version_module

VERSIONS = """
import json

import pytest
from driftdesk.analysis import cache_store, code_version
print(json.dumps({
    **{cache.name: cache.version() for cache in cache_store.declared()},
    "from": code_version.__file__,
}))
"""

# A run's success measured (``measure`` given) or as the store kept it, by the copy's code.
SUCCESS = """
import json, sys
from pathlib import Path
from driftdesk.analysis import code_version, run_success
run = Path(sys.argv[1])
if sys.argv[2:] == ["measure"]:
    run_success.measure_success(run)
print(json.dumps({"success": run_success.known_success(run), "from": code_version.__file__}))
"""


def copy_of_the_package(root: Path) -> Path:
    """driftdesk's core and its analysis package, laid out as installed, under ``root``."""
    package = root / "driftdesk"
    shutil.copytree(
        Path(driftdesk.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    shutil.copytree(
        Path(code_version_module.__file__).parent,
        package / "analysis",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return package


def versions(root: Path) -> dict[str, str]:
    return in_child(root, VERSIONS)


def in_child(root: Path, script: str, *args: str) -> dict[str, Any]:
    """What ``script`` prints (JSON) run by the copy of the package under ``root``."""
    # -S: no site hooks (the editable install's finder would import the working tree); the
    # site-packages folder is put back on the path after the copy for DuckDB.
    site = sysconfig.get_paths()
    paths = os.pathsep.join(dict.fromkeys([str(root), site["purelib"], site["platlib"]]))
    done = subprocess.run(
        [sys.executable, "-S", "-c", script, *args],
        env={"PYTHONPATH": paths, "HOME": str(root)},
        cwd=root,  # -c puts the working folder first on the path: not a checkout's driftdesk/
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found.pop("from").startswith(str(root))  # the copy's code, not the working tree's
    return found


def test_an_edit_to_any_module_that_makes_figures_makes_every_cache_again(tmp_path: Path) -> None:
    package = copy_of_the_package(tmp_path)
    before = versions(tmp_path)
    assert set(before) == {"rows", "report", "trend-data", "trend", "pairs", "success"}
    assert len(set(before.values())) == len(before)  # each cache its own version
    assert versions(tmp_path) == before  # the same code: the same versions

    seen = [before]
    for edited in (
        package / "fileio.py",  # the core's atomic files, which the caches write with
        package / "analysis" / "attempt_table.py",  # the row rules and the per-task SQL
        package / "analysis" / "paired.py",  # the paired test behind a pair's verdict
    ):
        with open(edited, "a") as fh:
            fh.write("\n# an edit\n")
        now = versions(tmp_path)
        for kind, version in now.items():
            assert all(version != old[kind] for old in seen), (edited.name, kind)
        seen.append(now)


def test_a_measured_success_kept_by_other_code_is_measured_again(tmp_path: Path) -> None:
    """The workbench's measured successes (``run_success``) are figures like the others: an
    edit to the code that counts them (the report's reader) must not list the old count."""
    package = copy_of_the_package(tmp_path)
    rows = [attempt_row("r1", "t1", 0, "pass"), attempt_row("r1", "t1", 1, "fail")]
    run = write_run(tmp_path / "runs", "r1", rows)
    assert in_child(tmp_path, SUCCESS, str(run), "measure")["success"] == 0.5
    assert in_child(tmp_path, SUCCESS, str(run))["success"] == 0.5  # kept: the next start
    with open(package / "analysis" / "report.py", "a") as fh:
        fh.write("\n# an edit to the report's reader\n")
    assert in_child(tmp_path, SUCCESS, str(run))["success"] is None  # not used: measured again


# Each cache filled from two small runs by the copy's code (``fill``), then asked, by name,
# whether it holds an entry for them now (an entry found is one it would use).
CACHES_USED = """
import io, json, sys
from pathlib import Path
from driftdesk.analysis import (
    code_version, report_cache, row_cache, run_success, trend, trend_cache, trend_data,
    trend_pairs,
)
from driftdesk.analysis.sources import RunSource, read_manifest, resolve_sources
from driftdesk.analysis.report import ReportOptions
runs = [Path(arg) for arg in sys.argv[2:]]
options = dict(suite=None, profile=None, last=None, allowed_pp=0.0, upto=None, agent=None)
if sys.argv[1] == "fill":
    report_cache.write_json([runs[0]], io.StringIO(), warn=lambda line: None)
    trend.build_trend(runs)
manifests = [read_manifest(run) for run in runs]
rows = runs[0] / "attempts.jsonl"
key = report_cache.identity(
    resolve_sources([runs[0]]), {"task_curves": False}, ReportOptions().loaded_prices()
)
resolved = [run.resolve() for run in runs]
keyed = trend._key_options(options)
figures = trend_data.read_aggregates(list(zip(runs, manifests)))
pair = [0.0, figures[0].run_id, figures[1].run_id,
        *(trend_pairs.tasks_digest(f.tasks) for f in figures)]
print(json.dumps({
    "rows": row_cache.find(RunSource(rows, runs[0], manifests[0]), rows, None) is not None,
    "report": report_cache.load(report_cache.entry_file(key), key) is not None,
    "trend-data": trend_data.cached(runs[0], trend_data.source_keys(runs[0], manifests[0]))
    is not None,
    "trend": trend_cache.load(
        trend_cache.entry_file(resolved, keyed),
        trend_cache.identity(runs, resolved, manifests, keyed),
    ) is not None,
    "pairs": trend_pairs.load_pair(trend_pairs.pair_file(pair), pair) is not None,
    "success": run_success.known_success(runs[0]) is not None,
    "from": code_version.__file__,
}))
"""


@pytest.mark.parametrize(
    ("cache", "module"),
    [
        ("rows", "attempt_table.py"),  # the row rules that type the rows kept
        ("report", "report.py"),  # the report the kept JSON is
        ("trend-data", "trend_data.py"),  # what a run's trend figures are read as
        ("trend", "trend.py"),  # the flags of a kept trend
        ("pairs", "paired.py"),  # the paired test behind a verdict
        ("success", "report.py"),  # the report's reader that counts a success
    ],
)
def test_a_cache_made_by_other_code_is_not_used(tmp_path: Path, cache: str, module: str) -> None:
    package = copy_of_the_package(tmp_path)
    runs = [
        write_run(
            tmp_path / "runs", run_id, [attempt_row(run_id, "t1", i, outcome) for i in range(4)]
        )
        for run_id, outcome in (("a", "pass"), ("b", "fail"))
    ]
    for run, day in zip(runs, (1, 2), strict=True):
        manifest = json.loads((run / "manifest.json").read_text())
        manifest["started_at"] = f"2026-01-0{day}T10:00:00Z"  # a before b
        (run / "manifest.json").write_text(json.dumps(manifest))
    filled = in_child(tmp_path, CACHES_USED, "fill", *map(str, runs))
    assert filled[cache] is True  # made, and found by the same code
    with open(package / "analysis" / module, "a") as fh:
        fh.write("\n# an edit\n")
    assert in_child(tmp_path, CACHES_USED, "probe", *map(str, runs))[cache] is False
