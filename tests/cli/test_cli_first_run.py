"""What a new user's first runs must not do quietly: drop suite lines, run against a dead
endpoint, end "completed" with nothing measured, print a traceback, trip over a closed pipe.
Each test drives the real ``driftdesk`` CLI in a subprocess."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, FaultRates, SandboxServer
from driftdesk.reruns.suites import load_suite
from tests.ports import refused_port

KEY = "sk-test-first-run-0123456789abcdef"


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(seed=1) as server:
        yield server


def _profile(name: str, base_url: str, key: bool = True) -> None:
    ProfileStore().save(Profile(name=name, protocol="openai", base_url=base_url, model=SIM_MODEL))
    if key:
        set_key(name, KEY)


def _suite_with_bad_lines(path: Path) -> Path:
    good = [json.loads(line) for line in load_suite("basic").path.read_text().splitlines()[:2]]
    path.write_text(
        json.dumps(good[0]) + "\n"
        '{"task_id": "broken", "prompt": \n'
        "[1, 2]\n"
        "# a comment\n" + json.dumps(good[1]) + "\n"
    )
    return path


def test_unreadable_suite_lines_are_listed_and_the_run_refused(
    home: object, tmp_path: Path, cli: object
) -> None:
    _profile("p", "http://127.0.0.1:9/v1", key=False)
    suite = _suite_with_bad_lines(tmp_path / "suite.jsonl")
    out = tmp_path / "runs"
    result = cli("run", "--profile", "p", "--suite", str(suite), "--out", str(out))  # type: ignore[operator]
    assert result.returncode == 2, result.stderr
    err = result.stderr
    assert "line 2:" in err and "line 3: expected an object, got list" in err
    assert "line 4: a comment" in err
    assert "--skip-bad-lines" in err and "other 2 tasks" in err
    assert "Traceback" not in err
    assert not out.exists()  # nothing was started


@pytest.mark.keyring
def test_skip_bad_lines_lists_them_before_the_run(
    home: object, tmp_path: Path, cli: object, sandbox: SandboxServer
) -> None:
    _profile("sim", sandbox.base_url)
    suite = _suite_with_bad_lines(tmp_path / "suite.jsonl")
    args = ["run", "--profile", "sim", "--suite", str(suite), "--repeat", "1"]
    result = cli(*args, "--skip-bad-lines", "--out", str(tmp_path / "runs"))  # type: ignore[operator]
    assert result.returncode == 0, result.stderr
    err = result.stderr
    notes = [line for line in err.splitlines() if "skipped suite line" in line]
    assert [n.split("line ")[1][:1] for n in notes] == ["2", "3", "4"]
    assert "2 tasks x 1 repeat," in err


@pytest.mark.keyring
def test_a_closed_port_stops_the_run_before_it_starts_with_the_doctors_advice(
    home: object, tmp_path: Path, cli: object
) -> None:
    out = tmp_path / "runs"
    with refused_port() as port:
        _profile("dead", f"http://127.0.0.1:{port}/v1")
        result = cli("run", "--profile", "dead", "--suite", "basic", "--out", str(out))  # type: ignore[operator]
    assert result.returncode == 2, result.stdout + result.stderr
    assert "could not reach" in result.stderr
    assert "fix: check the base URL's host and port" in result.stderr
    assert "driftdesk doctor dead" in result.stderr
    assert "Traceback" not in result.stderr
    assert not out.exists() or not any(out.iterdir())  # no run dir for a run that never ran


@pytest.mark.keyring
def test_a_url_with_a_query_string_is_stopped_with_the_cleaned_url(
    home: object, tmp_path: Path, cli: object, sandbox: SandboxServer
) -> None:
    _profile("utm", sandbox.base_url + "?utm_source=x")
    result = cli("run", "--profile", "utm", "--suite", "basic", "--out", str(tmp_path / "r"))  # type: ignore[operator]
    assert result.returncode == 2
    assert "query string" in result.stderr
    assert f"driftdesk profile edit utm --base-url {sandbox.base_url}" in result.stderr


@pytest.mark.keyring
def test_a_run_whose_every_attempt_is_a_link_error_exits_non_zero_and_says_so(
    home: object, tmp_path: Path, cli: object
) -> None:
    # The models list answers (the probe passes) but every chat request is refused.
    with SandboxServer(faults=FaultRates(auth_error=1.0)) as server:
        _profile("refused", server.base_url)
        result = cli(  # type: ignore[operator]
            "run", "--profile", "refused", "--suite", "basic", "--repeat", "1",
            "--tasks", "arith-01,arith-02", "--out", str(tmp_path / "runs"),
        )  # fmt: skip
    assert result.returncode == 3, result.stdout + result.stderr
    assert "every attempt (2) was a link error (401 2)" in result.stderr
    assert "driftdesk doctor refused" in result.stderr
    assert "next:" not in result.stdout


def test_a_run_whose_harness_breaks_every_attempt_exits_non_zero_and_says_why(
    home: object, tmp_path: Path, cli: object, sandbox: SandboxServer
) -> None:
    # Seen with a plain install: every attempt crashed on a missing module, yet the run printed
    # "completed" and exited 0. The harness here crashes the same way, in its own process.
    ProfileStore().save(
        Profile(
            name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL, no_key=True
        )
    )
    crash = "python3 -c 'import not_installed_anywhere' || exit 7"  # 0/1 would be pass/fail
    result = cli(  # type: ignore[operator]
        "run", "--profile", "sim", "--suite", "basic", "--repeat", "1", "--no-probe",
        "--tasks", "arith-01,arith-02,arith-03", "--agent", "command", "--command", crash,
        "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert result.returncode == 4, result.stdout + result.stderr
    err = result.stderr
    assert "no attempt of 3 was judged: the harness broke 3 of them" in err
    assert "most common (3 of 3): " in err
    (log_line,) = [line for line in err.splitlines() if line.startswith("  its log: ")]
    log = Path(log_line.removeprefix("  its log: "))
    assert log.is_file() and "not_installed_anywhere" in log.read_text()
    assert "next:" not in result.stdout
    (run_dir,) = (tmp_path / "runs").iterdir()
    report = cli("report", str(run_dir))  # type: ignore[operator]
    assert "harness errors 3 (harness_crash: 3)" in report.stdout
    assert "every attempt (3) was a harness error" in report.stdout
    data = json.loads(cli("report", str(run_dir), "--format", "json").stdout)  # type: ignore[operator]
    assert data["harness_errors_by_kind"] == {"harness_crash": 3}
    # Each task with only harness errors is listed, not dropped.
    assert sorted(t["task_id"] for t in data["tasks_below_min_runs"]) == [
        "arith-01", "arith-02", "arith-03",
    ]  # fmt: skip


@pytest.mark.keyring
def test_the_end_of_a_run_prints_the_next_commands_and_resume_of_a_done_run_says_so(
    home: object, tmp_path: Path, cli: object, sandbox: SandboxServer
) -> None:
    _profile("sim", sandbox.base_url)
    args = ["run", "--profile", "sim", "--suite", "basic", "--repeat", "2", "--tasks", "arith-01"]
    first = cli(*args)  # type: ignore[operator]
    second = cli(*args)  # type: ignore[operator]
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    runs = sorted(Path("runs").iterdir())
    assert len(runs) == 2
    out = second.stdout
    assert f"driftdesk report {runs[1]}" in out
    assert f"driftdesk run --profile sim --suite basic --only-volatile {runs[1]}" in out
    assert f"driftdesk compare {runs[0]} {runs[1]}" in out
    assert "driftdesk tui" in out

    resumed = cli("resume", str(runs[1]))  # type: ignore[operator]
    assert resumed.returncode == 0, resumed.stderr
    assert "nothing to resume" in resumed.stdout
    assert "0/0" not in resumed.stdout + resumed.stderr
    manifest = json.loads((runs[1] / "manifest.json").read_text())
    assert "resumes" not in manifest or manifest["resumes"] == []


def test_sandbox_on_a_busy_port_is_one_clear_line(home: object, cli: object) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = cli("sandbox", "--port", str(port))  # type: ignore[operator]
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"driftdesk: port {port} on 127.0.0.1 is already in use: stop what listens there, or "
        "pick another --port (0 picks a free one)"
    ]


def test_an_unexpected_error_is_a_sentence_and_debug_shows_the_traceback(
    home: object, tmp_path: Path, cli: object
) -> None:
    # A hand-made manifest without a profile: resuming fails in a way nobody planned for.
    run = tmp_path / "odd"
    run.mkdir()
    (run / "manifest.json").write_text(json.dumps({"run_id": "odd", "tasks": ["t"], "repeat": 1}))
    result = cli("resume", str(run))  # type: ignore[operator]
    assert result.returncode != 0
    assert "Traceback" not in result.stderr and result.stderr.startswith("driftdesk: ")
    debug = cli("resume", str(run), "--debug")  # type: ignore[operator]
    assert "Traceback" in debug.stderr


@pytest.mark.parametrize("reader", [["head", "-1"], ["grep", "-m1", "."]])
def test_piping_into_a_reader_that_stops_early_ends_quietly(
    home: object, tmp_path: Path, reader: list[str]
) -> None:
    # More than a pipe buffer of output: the reader leaves while driftdesk still writes.
    config = home.config_dir / "config.toml"  # type: ignore[attr-defined]
    config.parent.mkdir(parents=True)
    config.write_text(
        "".join(
            f'[profiles.p{n:04d}]\nprotocol = "openai"\nbase_url = "http://h/v1"\nmodel = "m"\n'
            for n in range(1500)
        )
    )
    env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS="unix:path=/nonexistent")  # no keyring
    command = f"{sys.executable} -m driftdesk profile list | {' '.join(reader)}"
    result = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, env=env
    )
    assert result.stderr == ""
    assert result.returncode == 0
