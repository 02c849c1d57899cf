"""What a new user trips over (round 3), each through the real ``driftdesk`` CLI."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    with SandboxServer(seed=1) as server:
        yield server


def _keyless_profile(name: str, base_url: str) -> None:
    ProfileStore().save(
        Profile(name=name, protocol="openai", base_url=base_url, model=SIM_MODEL, no_key=True)
    )


def test_own_suite_against_a_sandbox_that_does_not_know_it_says_so_in_one_line(
    home: object, tmp_path: Path, cli: object, sandbox: SandboxServer
) -> None:
    _keyless_profile("sim", sandbox.base_url)
    mine = tmp_path / "my.jsonl"
    mine.write_text(
        "".join(
            json.dumps(
                {"task_id": f"mine-{n}", "prompt": f"Say {n}.", "expected": {"equals": str(n)}}
            )
            + "\n"
            for n in range(3)
        )
    )
    result = cli("run", "--profile", "sim", "--suite", str(mine), "--repeat", "1")  # type: ignore[operator]
    said = [line for line in result.stderr.splitlines() if "does not know" in line]
    assert len(said) == 1, result.stdout + result.stderr
    assert "3 of 3" in said[0] and "sandbox --suite" in said[0] and str(mine) in said[0]


@pytest.mark.parametrize("command", [[], ["tui"], ["demo"]])
def test_the_workbench_refuses_an_output_that_is_not_a_terminal(
    home: object, cli: object, command: list[str]
) -> None:
    result = cli(*command)  # type: ignore[operator]
    assert result.returncode == 2
    assert result.stdout == "" and "\x1b" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "not a terminal" in lines[0], result.stderr
    assert not Path("runs").exists()


@pytest.mark.parametrize("port", ["99999", "-1"])
def test_sandbox_refuses_a_port_out_of_range_as_a_usage_error(
    home: object, cli: object, port: str
) -> None:
    result = cli("sandbox", "--port", port)  # type: ignore[operator]
    assert result.returncode == 2
    assert "port must be 0-65535" in result.stderr and "not expected" not in result.stderr


def test_comparing_a_run_with_itself_warns(home: object, tmp_path: Path, cli: object) -> None:
    results = tmp_path / "results.jsonl"
    results.write_text(json.dumps({"task_id": "t1", "success": True}) + "\n")
    assert cli("import", str(results), "--out", "runs").returncode == 0  # type: ignore[operator]
    (run,) = Path("runs").iterdir()
    result = cli("compare", str(run), str(run))  # type: ignore[operator]
    assert result.returncode == 0, result.stderr
    assert "warning: A and B are the same run" in result.stdout


def test_after_one_repeat_the_next_hints_do_not_offer_only_volatile(
    home: object, cli: object, sandbox: SandboxServer
) -> None:
    _keyless_profile("sim", sandbox.base_url)
    args = ["run", "--profile", "sim", "--suite", "basic", "--tasks", "arith-01"]
    once = cli(*args, "--repeat", "1")  # type: ignore[operator]
    twice = cli(*args, "--repeat", "2")  # type: ignore[operator]
    assert once.returncode == 0 and twice.returncode == 0, once.stderr + twice.stderr
    assert "driftdesk report" in once.stdout and "--only-volatile" not in once.stdout
    assert "--only-volatile" in twice.stdout
    assert "does not know" not in once.stderr + twice.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--profile", "nope", "--suite", "basic"],
        ["switch", "nope", "--target", "env"],
        ["profile", "show", "nope"],
        ["key", "nope"],
    ],
)
def test_an_unknown_profile_is_bad_input_everywhere(
    home: object, cli: object, command: list[str]
) -> None:
    result = cli(*command)  # type: ignore[operator]
    assert result.returncode == 2, (command, result.stderr)
    assert "no profile named 'nope'" in result.stderr


def test_help_documents_the_exit_codes(cli: object) -> None:
    result = cli("--help")  # type: ignore[operator]
    text = " ".join(result.stdout.split())
    assert "exit codes:" in text and "2 usage or bad input" in text


def test_switching_a_keyless_profile_to_env_does_not_offer_to_hand_over_a_key(
    home: object, cli: object
) -> None:
    _keyless_profile("sim", "http://127.0.0.1:9/v1")
    result = cli("switch", "sim", "--target", "env", "--yes")  # type: ignore[operator]
    assert result.returncode == 0, result.stderr
    assert Path(".env").is_file()
    assert "hand them the key" not in result.stdout + result.stderr


def test_the_text_report_calls_spread_max_minus_min_in_pp(
    home: object, tmp_path: Path, cli: object
) -> None:
    results = tmp_path / "results.jsonl"
    rows = [("wobbly", True), ("wobbly", False), ("steady", True), ("steady", True)]
    results.write_text("".join(json.dumps({"task_id": t, "success": s}) + "\n" for t, s in rows))
    assert cli("import", str(results), "--out", "runs").returncode == 0  # type: ignore[operator]
    (run,) = Path("runs").iterdir()
    result = cli("report", str(run))  # type: ignore[operator]
    assert result.returncode == 0, result.stderr
    header = next(line for line in result.stdout.splitlines() if line.strip().startswith("TASK"))
    assert "MAX-MIN PP" in header and "SPREAD" not in header
    wobbly = next(line for line in result.stdout.splitlines() if line.strip().startswith("wobbly"))
    steady = next(line for line in result.stdout.splitlines() if line.strip().startswith("steady"))
    assert " 100 " in wobbly and " 0 " in steady


def test_importing_codex_set_to_a_keyless_profile_keeps_it_keyless(
    home: object, cli: object
) -> None:
    _keyless_profile("sim", "http://127.0.0.1:9/v1")
    switched = cli("switch", "sim", "--target", "codex", "--yes")  # type: ignore[operator]
    assert switched.returncode == 0, switched.stderr
    imported = cli("import", "codex", "--name", "again")  # type: ignore[operator]
    assert imported.returncode == 0, imported.stderr
    assert "no key found" not in imported.stdout + imported.stderr
    assert ProfileStore().get("again").no_key


def test_status_flags_the_file_a_profile_edit_called_stale(home: object, cli: object) -> None:
    _keyless_profile("sim", "http://127.0.0.1:9/v1")
    assert cli("switch", "sim", "--target", "env", "--yes").returncode == 0  # type: ignore[operator]
    edited = cli("profile", "edit", "sim", "--model", "other-model")  # type: ignore[operator]
    assert edited.returncode == 0, edited.stderr
    assert "is stale" in edited.stdout + edited.stderr
    status = cli("status")  # type: ignore[operator]
    line = next(line for line in status.stdout.splitlines() if line.startswith("env"))
    assert "STALE" in line and "driftdesk switch sim --target env" in line
