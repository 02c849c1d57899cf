"""``driftdesk run --adaptive`` in a subprocess against the sandbox; bad flag combinations."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from reruns_helpers import read_rows

from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer

KEY = "sk-test-REALKEY-adaptive-cli-0123456789"


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    server = SandboxServer(seed=9)
    server.start()
    yield server
    server.stop()


@pytest.mark.keyring
def test_run_adaptive_records_its_design_and_resume_says_it_is_done(
    home: object, sandbox: SandboxServer, tmp_path: Path, cli: object
) -> None:
    ProfileStore().save(Profile("sim", "openai", sandbox.base_url, SIM_MODEL))
    set_key("sim", KEY)
    out = tmp_path / "runs"
    result = cli(  # type: ignore[operator]
        "run", "--profile", "sim", "--suite", "basic", "--tasks", "arith-01,arith-02,arith-03",
        "--adaptive", "--target", "volatile", "--max-repeats", "6", "--concurrency", "3",
        "--timeout", "10", "--out", str(out), timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "adaptive repeats (target volatile, 2..6 per task)" in result.stderr
    assert "adaptive: target volatile" in result.stderr
    (run_dir,) = out.iterdir()
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["adaptive"]["max_repeats"] == 6
    rows = read_rows(run_dir / "attempts.jsonl")
    assert manifest["adaptive"]["result"]["attempts"] == len(rows)
    assert 6 <= len(rows) <= 18
    again = cli("resume", str(run_dir), timeout=60)  # type: ignore[operator]
    assert again.returncode == 0, again.stderr
    assert "nothing to resume: the adaptive run is done" in again.stdout
    report = cli("report", str(run_dir), "--format", "json", timeout=60)  # type: ignore[operator]
    assert report.returncode == 0, report.stderr
    assert json.loads(report.stdout)["adaptive"]["target"] == "volatile"
    text = cli("report", str(run_dir), timeout=60)  # type: ignore[operator]
    assert "repeats adaptive: target volatile, 2..6 per task; " in text.stdout


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--target", "volatile"], "--target goes with --adaptive"),
        (["--adaptive", "--repeat", "5"], "--adaptive chooses the repeats"),
        (["--adaptive", "--target", "ci=abc"], "use ci=<N>pp (e.g. ci=5pp) or volatile"),
        (["--adaptive", "--min-repeats", "5", "--max-repeats", "3"], "must be at least"),
        (["--adaptive", "--target", "volatile", "--min-repeats", "1"], "--min-repeats 2"),
        (["--adaptive", "--budget-attempts", "0"], "--budget-attempts must be at least 1"),
    ],
)
def test_bad_adaptive_flags_are_one_line_exit_2(
    home: object, cli: object, flags: list[str], message: str
) -> None:
    result = cli("run", "--profile", "nope", "--suite", "basic", *flags)  # type: ignore[operator]
    assert result.returncode == 2
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_both_budgets_are_refused_by_the_parser(home: object, cli: object) -> None:
    result = cli(  # type: ignore[operator]
        "run", "--profile", "x", "--suite", "basic", "--adaptive",
        "--budget-attempts", "5", "--budget-usd", "1",
    )  # fmt: skip
    assert result.returncode == 2
    assert "not allowed with argument" in result.stderr
