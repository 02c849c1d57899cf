"""Shared fixtures: temporary homes, the real keyring, and the real CLI as a subprocess."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

# Variables a user's shell may export that would leak into, or shadow, what tests check.
_SCRUBBED_PREFIXES = ("ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "XDG_", "DRIFTDESK_")
_KEEP = {"DRIFTDESK_REQUIRE_KEYRING", "DRIFTDESK_REQUIRE_ALL", "DRIFTDESK_TEST_CLIENTS"}


def _keyring_problem() -> str | None:
    try:
        import keyring
        from keyring.backends import SecretService

        backend = keyring.get_keyring()
        if not isinstance(backend, SecretService.Keyring):
            return f"keyring backend is {backend!r}, not the Secret Service"
        probe = f"probe-{uuid.uuid4().hex}"
        keyring.set_password("driftdesk-tests-probe", probe, "x")
        keyring.delete_password("driftdesk-tests-probe", probe)
    except Exception as exc:  # any backend failure means: no usable keyring here
        return f"{type(exc).__name__}: {exc}"
    return None


_KEYRING_PROBLEM: str | None = None

# Skips that only mean this machine lacks a part ./run tests installs, by the words of their
# reasons (conftest's keyring probe, test_keyring_guard, the Ray modules, real_client, the
# bubblewrap probes). Counted in the summary; with DRIFTDESK_REQUIRE_ALL=1 (./run tests and CI
# set it) each is a failure, so a green run has really run them.
MISSING_PARTS = {
    "keyring": ("no usable OS keyring", "gnome-keyring", "with-keyring.sh"),
    "Ray": ("ray is not installed",),
    "real client": ("client is not installed",),
    "bubblewrap": ("bubblewrap", "bwrap"),
    "Chromium": ("chromium is not installed",),
}
_REQUIRE_ALL = False  # read once: the ``home`` fixture takes DRIFTDESK_* out during a test


def missing_part(reason: str) -> str | None:
    """The part a skip's reason says is missing here, if it is one of ``MISSING_PARTS``."""
    return next(
        (part for part, words in MISSING_PARTS.items() if any(w in reason for w in words)),
        None,
    )


def _skip_reason(report: pytest.CollectReport | pytest.TestReport) -> str:
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else longrepr
    return str(reason).removeprefix("Skipped: ")  # (path, line, "Skipped: why")


def _required(report: pytest.CollectReport | pytest.TestReport) -> None:
    """Under DRIFTDESK_REQUIRE_ALL=1, a skip for a missing part becomes a failure."""
    if not (_REQUIRE_ALL and report.skipped):
        return
    reason = _skip_reason(report)
    part = missing_part(reason)
    if part is not None and not hasattr(report, "wasxfail"):
        report.outcome = "failed"
        report.longrepr = (
            f"skipped for a missing {part}, which DRIFTDESK_REQUIRE_ALL=1 forbids: {reason}"
        )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    _required(outcome.get_result())  # type: ignore[attr-defined]


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    outcome = yield
    _required(outcome.get_result())  # type: ignore[attr-defined]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """One line: how many tests were skipped for a missing part, by part."""
    counts: dict[str, int] = {}
    for report in terminalreporter.stats.get("skipped", []):
        part = missing_part(_skip_reason(report))
        if part is not None:
            counts[part] = counts.get(part, 0) + 1
    if counts:
        parts = ", ".join(f"{part} {counts[part]}" for part in MISSING_PARTS if part in counts)
        terminalreporter.write_line(
            f"driftdesk: {sum(counts.values())} skipped for a missing part ({parts}); "
            "./run tests has them all, and DRIFTDESK_REQUIRE_ALL=1 makes such a skip fail",
            yellow=True,
            bold=True,
        )


def pytest_configure(config: pytest.Config) -> None:
    global _KEYRING_PROBLEM, _KEYRING_GUARD, _REQUIRE_ALL
    _REQUIRE_ALL = os.environ.get("DRIFTDESK_REQUIRE_ALL") == "1"
    # Tests stop children (the sandbox, runs, `driftdesk exec`) with SIGINT, a user's Ctrl-C. A
    # suite started as a background job of a script (`cmd &`) has SIGINT ignored, and every
    # child would inherit that and never stop (5 such failures in one run, children left
    # behind): the tests get the disposition a terminal gives.
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    # The throwaway keyring's folder and password stay with the guard, out of every child's
    # environment.
    folder = os.environ.pop("DRIFTDESK_TEST_KEYRING_HOME", None)
    password = os.environ.pop("DRIFTDESK_TEST_KEYRING_PASSWORD", None)
    worker_input = getattr(config, "workerinput", None)  # an xdist worker: from the controller
    if worker_input is not None and "keyring_guard" in worker_input:
        folder, password = worker_input["keyring_guard"]
    if folder and password:
        import keyring_guard

        _KEYRING_GUARD = keyring_guard.ACTIVE = keyring_guard.KeyringGuard(folder, password)
        _KEYRING_GUARD.ensure()  # before the probe below, which would D-Bus-start an empty one
    _KEYRING_PROBLEM = _keyring_problem()
    if _KEYRING_PROBLEM and os.environ.get("DRIFTDESK_REQUIRE_KEYRING") == "1":
        raise pytest.UsageError(
            "the real OS keyring is required (./run tests starts one) but is not usable: "
            + _KEYRING_PROBLEM
        )


_KEYRING_GUARD = None
_LAST_TEST = "(none yet)"

# The Ray tests' clusters live in temp folders named so (tests/reruns/ray_helpers.py); a worker
# that dies under a test leaves its cluster's folder, logs included, behind.
RAY_ROOT_PREFIX = "ddray-"
# Ray's log lines at level C or F ("[time C pid tid] file:line: Check failed: …"), and how a
# raylet says the GCS took it for dead.
_RAY_FATAL = re.compile(
    r" [CF] \d+ \d+\] |SIGSEGV|SIGABRT|marked (as )?dead|Exiting because|[Rr]aylet .*(died|lost)"
)
_SESSION_STARTED = time.time()


def ray_clusters_left_behind(since: float, lines_each: int = 12) -> list[str]:
    """Ray's own fatal lines from the clusters of this session still on disk (each is removed
    when its test ends; one left means its worker died under it)."""
    found: list[str] = []
    for root in sorted(Path(tempfile.gettempdir()).glob(RAY_ROOT_PREFIX + "*")):
        try:
            if root.stat().st_mtime < since:
                continue
        except OSError:
            continue
        fatal: list[str] = []
        for log in sorted(root.glob("session_*/logs/*")):
            if log.suffix in (".out", ".err", ".log") and log.is_file():
                text = log.read_text(errors="replace")
                fatal += [
                    f"{log.name}: {line}" for line in text.splitlines() if _RAY_FATAL.search(line)
                ]
        found.append(f"Ray cluster left behind in {root}: {len(fatal)} fatal lines")
        found += ["  " + line[:300] for line in fatal[-lines_each:]]
    return found


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """xdist: a worker that died under a test ("node down: Not properly terminated") gives no
    traceback. If it was a Ray driver, its cluster is still on disk: say what Ray logged."""
    if error:
        for line in ray_clusters_left_behind(_SESSION_STARTED):
            sys.stderr.write(line + "\n")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """xdist: each worker gets the guard's folder and password from the controller (they are
    out of the environment the workers start with)."""
    if _KEYRING_GUARD is not None:
        node.workerinput["keyring_guard"] = (_KEYRING_GUARD.folder, _KEYRING_GUARD.password)


@pytest.fixture(autouse=True)
def _private_keyring_alive(request: pytest.FixtureRequest) -> Iterator[None]:
    """See ``tests/keyring_guard.py``: a dead test keyring is restarted and reported once."""
    global _LAST_TEST
    if _KEYRING_GUARD is not None and _KEYRING_GUARD.ensure():
        import warnings

        warnings.warn(
            "the private test keyring's daemon had died (after "
            f"{_LAST_TEST} on this worker, or a test on another); restarted over the same "
            "keyring folder\n" + _KEYRING_GUARD.diagnostics(),
            pytest.PytestWarning,
            stacklevel=1,
        )
    _LAST_TEST = request.node.nodeid
    yield


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not _KEYRING_PROBLEM:
        return
    skip = pytest.mark.skip(reason=f"no usable OS keyring ({_KEYRING_PROBLEM}); run ./run tests")
    for item in items:
        if "keyring" in item.keywords:
            item.add_marker(skip)


@dataclass
class Home:
    """A throwaway user home: HOME, XDG dirs, a project folder as cwd, a private keyring service."""

    root: Path
    project: Path
    keyring_service: str

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ)

    @property
    def claude_settings(self) -> Path:
        return self.root / ".claude" / "settings.json"

    @property
    def codex_config(self) -> Path:
        return self.root / ".codex" / "config.toml"

    @property
    def config_dir(self) -> Path:
        return self.root / ".config" / "driftdesk"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Home]:
    root = tmp_path / "home"
    project = tmp_path / "project"
    root.mkdir()
    project.mkdir()
    for name in list(os.environ):
        if name.startswith(_SCRUBBED_PREFIXES) and name not in _KEEP:
            monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(root))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(root / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(root / ".local" / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(root / ".local" / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(root / ".cache"))
    # Each test gets its own keyring service name inside the private test keyring, so tests
    # running in parallel never see each other's keys.
    service = f"driftdesk-test-{uuid.uuid4().hex[:12]}"
    monkeypatch.setenv("DRIFTDESK_KEYRING_SERVICE", service)
    monkeypatch.chdir(project)
    yield Home(root=root, project=project, keyring_service=service)


def run_cli(
    *args: str,
    input: str | None = None,
    env: dict[str, str] | None = None,
    cwd: Path | None = None,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """Run the real ``driftdesk`` CLI in a subprocess (inherits the test's environment)."""
    return subprocess.run(
        [sys.executable, "-m", "driftdesk", *args],
        input=input,
        capture_output=True,
        text=True,
        env=env if env is not None else dict(os.environ),
        cwd=cwd,
        timeout=timeout,
    )


@pytest.fixture
def cli():
    return run_cli


def real_client(name: str) -> Path:
    """The real npm client (``claude`` or ``codex``) that ``./run tests`` installs, pinned, under
    .tools/npm. Missing, a test fails in CI (which must have it) and skips elsewhere, saying how
    to get it."""
    root = Path(__file__).resolve().parent.parent
    folder = os.environ.get("DRIFTDESK_TEST_CLIENTS") or str(root / ".tools/npm/node_modules/.bin")
    path = Path(folder) / name
    if path.exists():
        return path
    message = (
        f"the real {name} client is not installed in {folder}: run ./run tests (it installs it)"
    )
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)
