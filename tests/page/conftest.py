"""Fixtures of the page tests: runs made by the real ``driftdesk run`` (the builtin agent
against the real simulated endpoint, through the metering proxy, with faults injected and
tries retried), a profile whose key lives in the real keyring, and Debian's Chromium driven by
Playwright (which downloads no browser: it is pointed at /usr/bin/chromium).

The runs are made once per session (a run of the basic suite × 5 takes seconds) in a home of
their own; a test that changes a run works on its own copy (``run_copy``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

from page_helpers import CHROMIUM, CHROMIUM_FLAGS, KEY, OTHER_KEY, PageEnv

INJECT = "429=10%:0.01s,500=5%"


def _env(root: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "OPENAI_", "XDG_", "DRIFTDESK_"))
    }
    env.update(
        HOME=str(root),
        XDG_CONFIG_HOME=str(root / ".config"),
        XDG_DATA_HOME=str(root / ".local" / "share"),
        XDG_STATE_HOME=str(root / ".local" / "state"),
        XDG_CACHE_HOME=str(root / ".cache"),
        DRIFTDESK_KEYRING_SERVICE=f"driftdesk-test-{uuid.uuid4().hex[:12]}",
    )
    return env


def _driftdesk(
    env: dict[str, str], *args: str, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "driftdesk", *args],
        capture_output=True, text=True, env=env, timeout=timeout, cwd=env["HOME"],
    )  # fmt: skip


def _made_run(env: dict[str, str], out: Path, profile: str, *extra: str) -> Path:
    result = _driftdesk(
        env, "run", "--profile", profile, "--suite", "basic", "--repeat", "5",
        "--concurrency", "8", "--timeout", "10", "--seed", "5", "--max-retries", "4",
        "--max-retry-delay", "0.05", "--out", str(out), *extra,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (run_dir,) = [p for p in out.iterdir() if p.is_dir()]
    return run_dir


@pytest.fixture(scope="session")
def page_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PageEnv]:
    """Two profiles (keys in the keyring) on two simulated endpoints of different seeds; a
    run of each with faults injected, a ``--no-bodies`` run and a run whose faults surface."""
    from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

    root = tmp_path_factory.mktemp("page-home")
    env = _env(root)
    with (
        SandboxServer(seed=3, latency_ms=0.0) as first,
        SandboxServer(seed=11, latency_ms=0.0) as second,
    ):
        setup = (
            "import sys\n"
            "from driftdesk.providers.profiles import Profile, ProfileStore\n"
            "from driftdesk.providers.keys import set_key\n"
            "for name, url, key in ((sys.argv[1], sys.argv[2], sys.argv[3]), (sys.argv[4], sys.argv[5], sys.argv[6])):\n"
            f"    ProfileStore().save(Profile(name=name, protocol='openai', base_url=url, model={SIM_MODEL!r}))\n"
            "    set_key(name, key)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", setup, "sim", first.base_url, KEY, "sim2", second.base_url, OTHER_KEY],
            capture_output=True, text=True, env=env, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        runs = root / "runs"
        a = _made_run(env, runs / "a", "sim", "--inject", INJECT)
        b = _made_run(env, runs / "b", "sim2", "--inject", INJECT)
        no_bodies = _made_run(env, runs / "nb", "sim", "--no-bodies")
        # faults the retries cannot all absorb: link errors surface, tries are run again
        faulty = _made_run(env, runs / "faulty", "sim", "--inject", "500=35%,truncate=5%",
                           "--max-retries", "1", "--link-faults", "retry")  # fmt: skip
    yield PageEnv(root=root, env=env, run_a=a, run_b=b, no_bodies=no_bodies, faulty=faulty)


@pytest.fixture
def run_copy(page_env: PageEnv, tmp_path: Path) -> Path:
    """A copy of run A that a test may change (plant a key, hostile text)."""
    target = tmp_path / "runs" / page_env.run_a.name
    shutil.copytree(page_env.run_a, target)
    return target


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Chromium for one test module: closed after it, so that Playwright's own event loop is
    gone before a later module's asyncio tests run in the same worker."""
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (./run tests installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        yield chromium
        chromium.close()
