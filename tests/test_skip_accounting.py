"""A plain ``pytest`` skips what needs a part ./run tests installs (the keyring, Ray, the real
clients, bubblewrap): its summary says how many, by part, and DRIFTDESK_REQUIRE_ALL=1 (which
./run tests and CI set) makes each such skip a failure. Run on a small suite of skips, through
the real pytest with tests/conftest.py as its plugin."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SKIPS = """
import pytest

def test_keyring():
    pytest.skip("no usable OS keyring (locked); run ./run tests")

def test_ray():
    pytest.skip("ray is not installed: run ./run tests (it installs driftdesk[ray])")

def test_client():
    pytest.skip("the real codex client is not installed in /nowhere: run ./run tests")

def test_bubblewrap():
    pytest.skip("bubblewrap (bwrap) is not installed: apt-get install bubblewrap")

@pytest.mark.skipif(True, reason="ray is not installed: run ./run tests")
def test_ray_marked():
    pass

def test_something_else():
    pytest.skip("only on a Tuesday")

def test_that_runs():
    pass
"""

MODULE_SKIP = """
import pytest
pytest.skip("ray is not installed: run ./run tests", allow_module_level=True)

def test_never_collected():
    pass
"""


def _pytest(folder: Path, require_all: bool) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("DRIFTDESK_REQUIRE")}
    if require_all:
        env["DRIFTDESK_REQUIRE_ALL"] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-p", "no:xdist", "-q", "-rs", str(folder)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_plain_run_counts_the_skips_for_a_missing_part_by_part(tmp_path: Path) -> None:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    done = _pytest(tmp_path, require_all=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "driftdesk: 5 skipped for a missing part (keyring 1, Ray 2, real client 1, "
        "bubblewrap 1)" in done.stdout
    ), done.stdout
    assert "1 passed, 6 skipped" in done.stdout


def test_require_all_turns_those_skips_into_failures_and_no_other(tmp_path: Path) -> None:
    (tmp_path / "test_skips.py").write_text(SKIPS)
    done = _pytest(tmp_path, require_all=True)
    assert done.returncode == 1, done.stdout + done.stderr
    # A skip by a marker happens at set-up: its failure is reported as an error there.
    assert "4 failed, 1 passed, 1 skipped, 1 error" in done.stdout, done.stdout
    assert "ERROR at setup of test_ray_marked" in done.stdout
    assert (
        "skipped for a missing real client, which DRIFTDESK_REQUIRE_ALL=1 forbids: the real "
        "codex client is not installed" in done.stdout
    ), done.stdout
    assert "only on a Tuesday" in done.stdout  # still a skip


def test_require_all_makes_a_module_skipped_for_a_missing_part_an_error(tmp_path: Path) -> None:
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    (tmp_path / "test_runs.py").write_text("def test_that_runs():\n    pass\n")
    plain = _pytest(tmp_path, require_all=False)
    assert plain.returncode == 0 and "1 passed, 1 skipped" in plain.stdout, plain.stdout
    assert "driftdesk: 1 skipped for a missing part (Ray 1)" in plain.stdout
    done = _pytest(tmp_path, require_all=True)
    assert done.returncode == 2, done.stdout + done.stderr  # a collection error
    # The collected path is shown relative to pytest's rootdir, which depends on where it runs.
    assert re.search(r"ERROR collecting \S*test_module_skip\.py", done.stdout), done.stdout
    assert "skipped for a missing Ray, which DRIFTDESK_REQUIRE_ALL=1 forbids" in done.stdout
