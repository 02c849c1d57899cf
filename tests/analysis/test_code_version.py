"""Every cache of derived data (the row cache, the kept report, the trend entry, the kept
pair verdicts) is keyed by one digest of the code that makes figures
(analysis/code_version.py): an edit to any analysis module or to the core helpers they use
makes each of them again. Checked on a real copy of the package, imported from it alone in
a child process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import driftdesk
from driftdesk.analysis import code_version as code_version_module

VERSIONS = """
import json
from driftdesk.analysis import (
    code_version, report_cache, row_cache, trend_cache, trend_data, trend_pairs,
)
print(json.dumps({
    "rows": row_cache.code_version(),
    "report": report_cache.code_version(),
    "trend": trend_cache.code_version(),
    "pairs": code_version.code_version(f"pairs:{trend_pairs.CACHE_PAIR_VERSION}"),
    "trend figures": trend_data._version(),
    "from": code_version.__file__,
}))
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
    # -S: no site hooks (the editable install's finder would import the working tree); the
    # site-packages folder is put back on the path after the copy for DuckDB.
    site = sysconfig.get_paths()
    paths = os.pathsep.join(dict.fromkeys([str(root), site["purelib"], site["platlib"]]))
    done = subprocess.run(
        [sys.executable, "-S", "-c", VERSIONS],
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
