"""``--concurrency auto`` against the sandbox's real rate limit, and a live run retuned, paused
and unpaused by ``driftdesk ctl`` from another process (the real CLI); its refusals (finished,
unknown, foreign, inside a harness); the channel hidden from an ``--isolate``d harness (real
bwrap)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from reruns_helpers import needs_bwrap, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.concurrency import parse_concurrency
from driftdesk.reruns.events import (
    AttemptFinished,
    AttemptStarted,
    ConcurrencyChanged,
    RunEvent,
    RunStarted,
)
from driftdesk.reruns.rate_limit import RateLimit
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.rundir.control_log import control_rows

KEY = "sk-test-live-control-0123456789abcdef"


class Timeline:
    """Every event with the monotonic time it came."""

    def __init__(self) -> None:
        self.events: list[tuple[float, RunEvent]] = []
        self.run_dir: Path | None = None

    def on_event(self, event: RunEvent) -> None:
        self.events.append((time.monotonic(), event))
        if isinstance(event, RunStarted):
            self.run_dir = event.run_dir

    def of(self, kind: type[Any]) -> list[tuple[float, Any]]:
        return [(t, e) for t, e in self.events if isinstance(e, kind)]


def _spec(server: SandboxServer, suite: Path, tmp_path: Path, **overrides: Any) -> RunSpec:
    return RunSpec(
        profile=Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL),
        suite=str(suite),
        out_dir=tmp_path / "runs",
        api_key=KEY,
        **overrides,
    )


def _ctl(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "driftdesk", "ctl", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


async def test_auto_finds_the_providers_limit_and_records_how_it_ran(tmp_path: Path) -> None:
    with SandboxServer(latency_ms=200, rate_limit=RateLimit(rps=20, burst=5)) as server:
        timeline = Timeline()
        suite = write_suite(tmp_path / "suite.jsonl", [f"t{i}" for i in range(30)])
        outcome = await execute_run(
            _spec(server, suite, tmp_path, repeat=4, concurrency=parse_concurrency("auto:1-2-32")),
            timeline,
        )
        assert outcome.status == "completed" and outcome.stats.done == 120
        assert server.stats.peak >= 4  # it grew past where it started...
        assert server.stats.peak <= 32  # ...within its bounds
        manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
        control = manifest["concurrency_control"]
        assert control["setting"] == control["started_as"] == "auto:1-2-32"
        assert control["high"] >= 3 and control["low"] >= 1
        assert control["calls"] == server.stats.requests
        assert control["rate_limited"] == server.stats.by_kind["rate_limited"]
        assert control["rate_limited"] <= 0.1 * server.stats.requests
        rows = control_rows(outcome.run_dir)
        reasons = Counter(r["reason"] for r in rows if r["kind"] == "limit")
        assert reasons["slow start"] >= 1 and sum(reasons.values()) >= 3, reasons
        changes = timeline.of(ConcurrencyChanged)
        assert changes and changes[-1][1].setting == "auto:1-2-32"
        assert outcome.stats.concurrency == changes[-1][1].limit
        from driftdesk.analysis.concurrency_report import read_concurrency, summary_lines

        summary = read_concurrency(outcome.run_dir, manifest)
        assert summary is not None
        assert summary["rate_limited"] == control["rate_limited"]
        line = summary_lines(summary)[0]
        assert line.startswith("concurrency: auto:1-2-32, ") and " concurrent, " in line


async def test_ctl_retunes_pauses_and_unpauses_a_live_run(tmp_path: Path) -> None:
    with SandboxServer(latency_ms=400) as server:
        timeline = Timeline()
        suite = write_suite(tmp_path / "suite.jsonl", [f"t{i}" for i in range(30)])
        run = asyncio.create_task(
            execute_run(_spec(server, suite, tmp_path, repeat=4, concurrency=8), timeline)
        )
        while len(timeline.of(AttemptFinished)) < 8:
            await asyncio.sleep(0.02)
        assert timeline.run_dir is not None
        run_dir = str(timeline.run_dir)
        assert server.stats.peak == 8

        # A retune from another process takes effect (calls in flight <= 2) within 1.5 s.
        asked = time.monotonic()
        retuned = await asyncio.to_thread(_ctl, run_dir, "--concurrency", "2")
        assert retuned.returncode == 0, retuned.stderr
        assert "concurrency 2" in retuned.stdout and "limit now 2" in retuned.stdout
        await asyncio.sleep(max(0.0, asked + 1.5 - time.monotonic()))
        server.stats.peak = server.stats.in_flight
        await asyncio.sleep(1.0)
        assert server.stats.peak <= 2

        # Pause: nothing new starts until unpause; what was in flight finishes.
        paused = await asyncio.to_thread(_ctl, run_dir, "--pause")
        assert paused.returncode == 0 and "paused" in paused.stdout, paused.stderr
        paused_at = time.monotonic()
        started_before = len(timeline.of(AttemptStarted))
        state = await asyncio.to_thread(_ctl, run_dir)
        assert "new attempts paused" in state.stdout, state
        await asyncio.sleep(1.5)
        assert len(timeline.of(AttemptStarted)) == started_before
        late = [e for t, e in timeline.of(AttemptFinished) if t > paused_at]
        assert late  # the attempts in flight finished
        assert server.stats.in_flight == 0
        unpaused = await asyncio.to_thread(_ctl, run_dir, "--unpause", "--concurrency", "auto")
        assert unpaused.returncode == 0, unpaused.stderr
        outcome = await run

    assert outcome.status == "completed"
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    slots = Counter((r["task_id"], r["attempt"]) for r in rows)
    assert len(slots) == 120 and set(slots.values()) == {1}  # none lost, none doubled
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    retunes = manifest["concurrency_control"]["retunes"]
    assert [r["change"] for r in retunes] == [
        "concurrency 2",
        "paused",
        "concurrency auto:1-4-64, unpaused",
    ]
    assert all(r["at"] and r["by"] == "ctl" for r in retunes)
    assert manifest["concurrency_control"]["started_as"] == "8"
    assert manifest["concurrency_control"]["setting"] == "auto:1-4-64"

    # The report says how it ran, and every retune with its time.
    report = subprocess.run(
        [sys.executable, "-m", "driftdesk", "report", str(outcome.run_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert report.returncode == 0, report.stderr
    text = report.stdout
    assert "concurrency: 8 (now auto:1-4-64), " in text
    assert " rate-limit episodes, 0 surfaced" in text
    for change in ("concurrency 2 (by ctl)", "paused (by ctl)", "unpaused (by ctl)"):
        assert change in text, text
    as_json = json.loads(
        subprocess.run(
            [sys.executable, "-m", "driftdesk", "report", str(outcome.run_dir), "--format", "json"],
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
    )
    assert [r["change"] for r in as_json["concurrency"]["retunes"]] == [
        r["change"] for r in retunes
    ]

    # A finished run is refused in one line.
    finished = _ctl(str(outcome.run_dir), "--pause")
    assert finished.returncode == 2
    assert finished.stderr.strip().endswith("is not running (it is completed)")
    assert len(finished.stderr.strip().splitlines()) == 1


def test_unknown_foreign_and_harness_requests_are_refused(tmp_path: Path) -> None:
    unknown = _ctl(str(tmp_path / "nope"), "--pause")
    assert unknown.returncode == 2 and unknown.stderr.startswith("driftdesk ctl: no run at")
    not_a_run = _ctl(str(tmp_path), "--pause")
    assert "is not a run dir" in not_a_run.stderr
    inside = _ctl(str(tmp_path), "--pause", env=dict(os.environ, DRIFTDESK_RUN_CHILD="r-1"))
    assert inside.returncode != 0 and "DRIFTDESK_RUN_CHILD is set" in inside.stderr
    if os.getuid() != 0:
        pytest.skip("making another user's run dir needs root")
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "manifest.json").write_text('{"run_id": "x", "status": "running"}')
    os.chown(foreign, 65534, 65534)
    refused = _ctl(str(foreign), "--concurrency", "4")
    assert refused.returncode == 2
    assert "another user's run: only the user who started it can control it" in refused.stderr


HARNESS = textwrap.dedent(
    """
    import glob, json, os, subprocess, sys
    runs, result = sys.argv[1], sys.argv[2]
    found = glob.glob(os.path.join(runs, "*", "control"))
    written = []
    for folder in found:
        try:
            with open(os.path.join(folder, "h.request.json"), "w") as fh:
                json.dump({"id": "from-harness", "concurrency": "1", "pause": None}, fh)
            written.append(folder)
        except OSError:
            pass
    env = dict(os.environ)
    env.pop("DRIFTDESK_RUN_CHILD", None)
    ctl = [subprocess.run([sys.executable, "-m", "driftdesk", "ctl", d, "--concurrency", "1"],
                          capture_output=True, text=True, env=env, timeout=30).returncode
           for d in glob.glob(os.path.join(runs, "*"))]
    with open(result, "w") as fh:
        json.dump({"success": True, "found": found, "written": written, "ctl": ctl}, fh)
    """
)


async def _harness_run(tmp_path: Path, server: SandboxServer, isolate: bool) -> Path:
    folder = tmp_path / "suite"
    folder.mkdir(exist_ok=True)
    script = folder / "harness.py"
    script.write_text(HARNESS)
    runs = tmp_path / "runs"
    outcome = await execute_run(
        _spec(
            server,
            write_suite(folder / "suite.jsonl", ["t"]),
            tmp_path,
            repeat=2,
            concurrency=1,
            agent="command",
            command=f"{sys.executable} {script} {runs} {{result_path}}",
            isolate=isolate,
            timeout_s=90,
        )
    )
    assert outcome.status == "completed"
    return outcome.run_dir


def _harness_reports(run_dir: Path) -> list[dict[str, Any]]:
    found = sorted((run_dir / "attempts").rglob("*.result.json"))
    return [json.loads(p.read_text()) for p in found]


async def test_an_isolated_harness_cannot_see_the_channel(tmp_path: Path) -> None:
    needs_bwrap()
    with SandboxServer() as server:
        run_dir = await _harness_run(tmp_path, server, isolate=True)
    reports = _harness_reports(run_dir)
    assert len(reports) == 2
    for report in reports:
        assert report["found"] == [] and report["written"] == []
        assert all(code != 0 for code in report["ctl"])
    assert [r for r in control_rows(run_dir) if r["kind"] == "control"] == []


async def test_without_isolate_a_harness_that_drops_the_marker_reaches_it_as_documented(
    tmp_path: Path,
) -> None:
    """The threat model's honest half: a plain harness is a process of the same user."""
    with SandboxServer() as server:
        run_dir = await _harness_run(tmp_path, server, isolate=False)
    reports = _harness_reports(run_dir)
    assert reports and reports[0]["found"]  # the folder is there to be found
    applied = [r for r in control_rows(run_dir) if r["kind"] == "control"]
    assert applied and applied[0]["setting"] == "1"


def _row_count(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.keyring
def test_nothing_lost_or_doubled_across_pause_unpause_kill_9_and_resume(
    home: object, tmp_path: Path
) -> None:
    import signal

    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore

    with SandboxServer(latency_ms=200, rate_limit=RateLimit(rps=40, burst=5)) as server:
        ProfileStore().save(
            Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
        )
        set_key("sim", KEY)
        out = tmp_path / "runs"
        suite = write_suite(tmp_path / "suite.jsonl", [f"t{i}" for i in range(40)])
        run = subprocess.Popen(
            [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite", str(suite),
             "--repeat", "5", "--concurrency", "auto:2-4-16", "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            attempts = out / "missing"
            while time.monotonic() < deadline and run.poll() is None:
                found = list(out.glob("*/attempts.jsonl"))
                if found and _row_count(found[0]) >= 20:
                    attempts = found[0]
                    break
                time.sleep(0.02)
            assert attempts.exists(), run.stderr.read() if run.stderr else ""
            run_dir = attempts.parent
            assert _ctl(str(run_dir), "--pause").returncode == 0
            time.sleep(2.0)  # the attempts in flight (0.1-0.3 s each) finish, even on a busy box
            held = _row_count(attempts)
            time.sleep(1.0)
            assert _row_count(attempts) == held  # paused: nothing new started
            assert _ctl(str(run_dir), "--unpause").returncode == 0
            while _row_count(attempts) < held + 30 and run.poll() is None:
                time.sleep(0.01)
            os.kill(run.pid, signal.SIGKILL)
            run.wait(10)
        finally:
            if run.poll() is None:
                run.kill()
        before = _row_count(attempts)
        assert before < 200
        resumed = subprocess.run(
            [sys.executable, "-m", "driftdesk", "resume", str(run_dir), "--concurrency", "6"],
            capture_output=True,
            text=True,
            timeout=240,
        )
        assert resumed.returncode == 0, resumed.stderr[-3000:]
    rows = read_rows(attempts)
    slots = Counter((r["task_id"], r["attempt"]) for r in rows)
    assert len(slots) == 200 and set(slots.values()) == {1}
    changes = [r["change"] for r in control_rows(run_dir) if r["kind"] == "control"]
    assert changes == ["paused", "unpaused"]  # kept across the kill
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["concurrency_control"]["setting"] == "6"
    assert manifest["status"] == "completed"


def _wait_rows(path: Path, count: int, process: subprocess.Popen[bytes], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _row_count(path) < count:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, f"{path}: fewer than {count} rows in {seconds} s"
        time.sleep(0.02)


def _kill_9(process: subprocess.Popen[bytes]) -> None:
    import signal

    os.kill(process.pid, signal.SIGKILL)
    process.wait(10)


def test_the_users_last_setting_holds_across_kill_9_and_resume(
    home: object, tmp_path: Path
) -> None:
    """A retune to a fixed number holds on resume as a retune to auto does (the user's last
    setting, unless ``resume --concurrency`` says otherwise); ``started_as`` keeps the first."""
    from driftdesk.providers.profiles import ProfileStore

    with SandboxServer(latency_ms=300) as server:
        ProfileStore().save(Profile("sim", "openai", server.base_url, SIM_MODEL, no_key=True))
        out = tmp_path / "runs"
        suite = write_suite(tmp_path / "suite.jsonl", [f"t{i}" for i in range(30)])
        command = [sys.executable, "-m", "driftdesk"]
        run = subprocess.Popen(
            [*command, "run", "--profile", "sim", "--suite", str(suite), "--repeat", "4",
             "--concurrency", "8", "--out", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        resumed: subprocess.Popen[bytes] | None = None
        try:
            deadline = time.monotonic() + 60
            while not list(out.glob("*/attempts.jsonl")):
                assert run.poll() is None and time.monotonic() < deadline
                time.sleep(0.02)
            attempts = next(out.glob("*/attempts.jsonl"))
            run_dir = attempts.parent
            _wait_rows(attempts, 10, run, 60)
            assert _ctl(str(run_dir), "--concurrency", "3").returncode == 0
            _wait_rows(attempts, _row_count(attempts) + 6, run, 60)
            assert _ctl(str(run_dir), "--pause").returncode == 0  # a pause ends with its process
            _kill_9(run)
            time.sleep(0.6)  # the killed run's calls are answered (0.3 s) and gone
            server.stats.peak = server.stats.in_flight
            # Resumed without --concurrency: at 3, the user's last setting, not at 8.
            resumed = subprocess.Popen(
                [*command, "resume", str(run_dir)],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )
            _wait_rows(attempts, _row_count(attempts) + 20, resumed, 60)
            assert server.stats.peak == 3
            manifest = json.loads((run_dir / "manifest.json").read_text())
            control = manifest["concurrency_control"]
            assert (control["setting"], control["started_as"]) == ("3", "8")
            state = _ctl(str(run_dir))  # how it runs now: this execution's, not the last's
            assert state.returncode == 0, state.stderr
            assert state.stdout.strip().endswith("running, concurrency 3, limit now 3")
            # A retune to auto holds the same way.
            assert _ctl(str(run_dir), "--concurrency", "auto").returncode == 0
            _wait_rows(attempts, _row_count(attempts) + 6, resumed, 60)
            _kill_9(resumed)
        finally:
            for process in (run, resumed):
                if process is not None and process.poll() is None:
                    process.kill()
                    process.wait()
        last = subprocess.run(
            [*command, "resume", str(run_dir)], capture_output=True, text=True, timeout=240
        )
        assert last.returncode == 0, last.stderr[-3000:]
    rows = read_rows(attempts)
    slots = Counter((r["task_id"], r["attempt"]) for r in rows)
    assert len(slots) == 120 and set(slots.values()) == {1}
    manifest = json.loads((run_dir / "manifest.json").read_text())
    control = manifest["concurrency_control"]
    assert (control["setting"], control["started_as"]) == ("auto:1-4-64", "8")
    assert manifest["status"] == "completed"
