"""A plain install does the main job, at both ends of every declared range.

Seen once: ``pip install driftdesk`` with today's releases ran every attempt into
``ModuleNotFoundError: No module named 'httpx'`` and still printed "completed"; the test venv
hid it, since its extras (inspect-ai, Ray) bring httpx and numpy along. So the wheel is built
from this checkout and installed with **no extras** into fresh venvs by uv: once with every
direct requirement at the lowest version its range allows (``--resolution lowest-direct``),
once at the newest. Each venv then does the main job headless, as a new user would, in a
throwaway home with no keyring: the sandbox, a keyless profile, two runs, ``report``,
``compare``, ``check``, the HTML page of a run, ``import`` of a JSONL file (copied) and of a tau-bench file, the
workbench on those runs in a real terminal (tmux), and ``driftdesk demo`` to its Volatility
view. The figures (install time, venv size, time to the Volatility view) are printed
(``pytest -s``).
"""

from __future__ import annotations

import email
import json
import os
import re
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from test_packaging import session_wheel

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "analysis" / "fixtures"
# uv's cache outlives the throwaway homes: a second run downloads nothing.
UV_CACHE = Path(os.environ.get("UV_CACHE_DIR") or Path.home() / ".cache" / "uv")
RESOLUTIONS = ["lowest-direct", "highest"]


@dataclass
class PlainInstall:
    resolution: str
    venv: Path
    seconds: float
    versions: dict[str, str]

    def bin(self, name: str) -> str:
        return str(self.venv / "bin" / name)


def _uv() -> str:
    found = Path(sys.executable).with_name("uv")
    uv = str(found) if found.exists() else shutil.which("uv")
    assert uv, "uv is not installed (it is in the test extra: pip install -e '.[test]')"
    return uv


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """The wheel, and its base requirements (no extras) read from its own metadata."""
    path = session_wheel(tmp_path_factory)
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        metadata = email.message_from_bytes(archive.read(name))
    requirements = [r for r in metadata.get_all("Requires-Dist") or [] if "extra ==" not in r]
    assert any(r.startswith("duckdb") for r in requirements), requirements
    return path, requirements


@pytest.fixture(scope="module", params=RESOLUTIONS)
def plain(
    request: pytest.FixtureRequest,
    wheel: tuple[Path, list[str]],
    tmp_path_factory: pytest.TempPathFactory,
) -> PlainInstall:
    resolution = request.param
    path, requirements = wheel
    venv = tmp_path_factory.mktemp(resolution) / "venv"
    env = {**_clean_env(), "UV_CACHE_DIR": str(UV_CACHE)}
    uv = _uv()
    started = time.monotonic()
    for argv in (
        [uv, "venv", "--quiet", "--python", sys.executable, str(venv)],
        # The requirements are given as direct ones, so lowest-direct lowers each of them (the
        # wheel's own requirements would count as indirect).
        [uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"),
         "--resolution", resolution, str(path), *requirements],
    ):  # fmt: skip
        result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, result.stdout + result.stderr
    seconds = time.monotonic() - started
    listed = subprocess.run(
        [uv, "pip", "list", "--format", "json", "--python", str(venv / "bin" / "python")],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    versions = {p["name"].lower(): p["version"] for p in json.loads(listed.stdout)}
    size = sum(f.stat().st_size for f in venv.rglob("*") if f.is_file() and not f.is_symlink())
    print(
        f"\n[plain install, {resolution}] {seconds:.1f} s, venv {size / 2**20:.0f} MiB: "
        + ", ".join(f"{n} {versions.get(n)}" for n in ("openai", "duckdb", "textual", "aiohttp"))
    )
    return PlainInstall(resolution, venv, seconds, versions)


def _clean_env() -> dict[str, str]:
    """The environment of a user who has nothing of ours: no keyring session, no test venv."""
    drop = ("DBUS_SESSION_BUS_ADDRESS", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")
    return {
        k: v
        for k, v in os.environ.items()
        if k not in drop and not k.startswith(("XDG_", "DRIFTDESK_", "PYTEST_"))
    }


@pytest.fixture
def user(plain: PlainInstall, tmp_path: Path) -> Iterator[User]:
    yield User(plain, tmp_path)


class User:
    """A new user at a shell: ``HOME`` and the current folder are a fresh folder, the plain
    venv's ``bin`` comes first on ``PATH``."""

    def __init__(self, plain: PlainInstall, home: Path) -> None:
        self.plain = plain
        self.home = home
        self.env = {
            **_clean_env(),
            "HOME": str(home),
            "PATH": f"{plain.venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        }

    def run(self, *argv: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.plain.bin("driftdesk"), *argv],
            cwd=self.home,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def ok(self, *argv: str) -> str:
        result = self.run(*argv)
        assert result.returncode == 0, (
            f"driftdesk {' '.join(argv)}:\n{result.stdout}{result.stderr}"
        )
        return result.stdout

    def sandbox(self) -> tuple[subprocess.Popen[str], str]:
        proc = subprocess.Popen(
            [self.plain.bin("driftdesk"), "sandbox", "--port", "0"],
            cwd=self.home,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        assert proc.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            found = re.match(r"^(http://127\.0\.0\.1:\d+/v1)\s*$", line)
            if found:
                return proc, found.group(1)
            assert line or proc.poll() is None, "the sandbox ended before it served"
        proc.kill()
        raise AssertionError("the sandbox did not print its URL within 60 s")


class Terminal:
    """A real terminal: a private tmux server running one command at a fixed size."""

    def __init__(self, user: User, command: list[str], size: tuple[int, int] = (120, 40)) -> None:
        self.socket = f"dd-plain-{os.getpid()}-{time.monotonic_ns()}"
        env_words = [f"{k}={v}" for k, v in user.env.items() if k in ("HOME", "PATH", "LANG")]
        self._tmux(
            "new-session", "-d", "-x", str(size[0]), "-y", str(size[1]), "-c", str(user.home),
            "env", "-i", *env_words, "TERM=xterm-256color", *command,
        )  # fmt: skip

    def _tmux(self, *args: str) -> str:
        result = subprocess.run(
            ["tmux", "-L", self.socket, "-f", "/dev/null", *args],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert result.returncode == 0, result.stderr
        return result.stdout

    def screen(self) -> str:
        return self._tmux("capture-pane", "-p")

    def wait_for(self, pattern: str, timeout: float) -> tuple[str, float]:
        started = time.monotonic()
        screen = ""
        while time.monotonic() - started < timeout:
            screen = self.screen()
            if re.search(pattern, screen):
                return screen, time.monotonic() - started
            time.sleep(0.25)
        raise AssertionError(f"{pattern!r} not on the screen within {timeout:g} s:\n{screen}")

    def keys(self, *keys: str) -> None:
        self._tmux("send-keys", *keys)

    def close(self) -> None:
        subprocess.run(["tmux", "-L", self.socket, "kill-server"], capture_output=True, timeout=30)


def test_a_plain_install_runs_reports_compares_imports_and_shows_the_workbench(
    user: User,
) -> None:
    sandbox, base_url = user.sandbox()
    try:
        user.ok("profile", "add", "sb", "--protocol", "openai", "--base-url", base_url,
                "--model", "simulated-model-1", "--no-key")  # fmt: skip
        for _ in range(2):
            user.ok("run", "--profile", "sb", "--suite", "basic", "--repeat", "2")
    finally:
        sandbox.terminate()
        sandbox.wait(30)
    first, second = sorted((user.home / "runs").iterdir())
    for run_dir in (first, second):
        rows = [json.loads(line) for line in (run_dir / "attempts.jsonl").read_text().splitlines()]
        assert len(rows) == 68
        outcomes = {r["outcome"] for r in rows}
        assert outcomes <= {"pass", "fail"}, [
            r["error_message"] for r in rows if r["error_message"]
        ][:3]
        assert "pass" in outcomes

    report = json.loads(user.ok("report", str(second), "--format", "json"))
    assert report["tasks_judged"] == 34 and report["attempts_judged"] == 68
    assert report["harness_errors"] == 0 and report["link_errors"] == 0
    assert 0 < report["success_rate"] < 1
    assert "consistency gap" in user.ok("report", str(first))
    compared = json.loads(user.ok("compare", str(first), str(second), "--format", "json"))
    assert compared["shared_tasks"] == 34
    # The page to send: whole without the plots' extra (matplotlib), which says how to add them.
    user.ok("report", str(second), "--format", "html", "--out", "run.html")
    page = (user.home / "run.html").read_text(encoding="utf-8")
    assert 'data-figure="success_rate"' in page and "driftdesk[page]" in page
    assert "PASS" in user.ok("check", str(second), "--min-success", "0.1")
    assert user.run("check", str(second), "--min-success", "0.99").returncode == 1

    copied = user.ok("import", str(FIXTURES / "generic_results.jsonl"), "--format", "jsonl",
                     "--copy", "--out", "imported")  # fmt: skip
    tau = user.ok("import", str(FIXTURES / "tau_bench_retail_results.json"),
                  "--format", "tau-bench", "--out", "imported")  # fmt: skip
    assert copied and tau
    imported = sorted((user.home / "imported").iterdir())
    assert len(imported) == 2
    for run_dir in imported:
        assert json.loads(user.ok("report", str(run_dir), "--format", "json"))["tasks_judged"] > 0

    # The workbench, in a real terminal, on the newest run: its numbers, not "success -".
    terminal = Terminal(user, ["driftdesk", "tui", "--runs", "runs"])
    try:
        success = f"{report['success_rate'] * 100:.1f} %"
        screen, _ = terminal.wait_for(r"tasks · attempts\s+34 · 68 judged", timeout=60)
        assert success in screen, screen
        assert "Traceback" not in screen and "unavailable" not in screen, screen
        terminal.keys("q")
    finally:
        terminal.close()


def test_the_demo_of_a_plain_install_lands_on_measured_numbers(user: User) -> None:
    terminal = Terminal(user, ["driftdesk", "demo"])
    try:
        # 34 tasks × 5 repeats, all judged, and a success figure (the sandbox passes most).
        screen, seconds = terminal.wait_for(r"tasks · attempts\s+34 · 170 judged", timeout=240)
        assert re.search(r"success\s+\d+\.\d %", screen), screen
        assert "harness errors" not in screen, screen
        print(
            f"\n[plain install, {user.plain.resolution}] demo to the Volatility view: {seconds:.1f} s"
        )
        terminal.keys("q")
    finally:
        terminal.close()
