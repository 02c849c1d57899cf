"""The agent is part of a run's identity: the manifest names the client and its version (read
from the real binary), and report, compare and trend show it. A suite run once with the REAL
Claude Code and once with the REAL Codex against the sandbox is two trend series (mixed with
``--agent all``: flagged agent_changed, which ``check --trend`` fails on), and compare warns.
A client upgrade stays in its series, flagged client_changed; runs from before the field read
as "client unknown" and are never flagged against."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from coding_helpers import CODING_TASKS, write_coding_suite

from driftdesk.analysis.agent_identity import agent_identity
from driftdesk.analysis.compare import compare_runs
from driftdesk.analysis.report import build_report
from driftdesk.analysis.trend import build_trend
from driftdesk.providers.profiles import Profile
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from tests.conftest import real_client

KEY = "sk-test-REALKEY-identity-0123456789abcdef"


@pytest.fixture
def clients_on_path(monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    found = {"claude-code": real_client("claude"), "codex": real_client("codex")}
    monkeypatch.setenv("PATH", f"{found['codex'].parent}{os.pathsep}{os.environ['PATH']}")
    return found


@pytest.fixture
def coding_sandbox(tmp_path: Path) -> Iterator[tuple[SandboxServer, Path]]:
    suite = write_coding_suite(tmp_path / "suite", [CODING_TASKS[0]])
    with SandboxServer(seed=7, suites=[suite], linger_s=0.3) as server:
        yield server, suite


def _version_of(binary: Path) -> str:
    text = subprocess.run([binary, "--version"], capture_output=True, text=True, check=True)
    # "2.1.332 (Claude Code)" / "codex-cli 0.171.0"
    return next(w for w in text.stdout.split() if w[:1].isdigit())


def _manifest(run_dir: Path) -> dict[str, Any]:
    return json.loads((run_dir / "manifest.json").read_text())


def _set_manifest(run_dir: Path, **changes: Any) -> None:
    manifest = _manifest(run_dir)
    for name, value in changes.items():
        if value is None:
            manifest.pop(name, None)
        else:
            manifest[name] = value
    (run_dir / "manifest.json").write_text(json.dumps(manifest))


async def _real_runs(
    server: SandboxServer, suite: Path, out: Path
) -> tuple[dict[str, Path], dict[str, str]]:
    """The two real runs, and what each printed first (``driftdesk run``'s progress)."""
    import io

    from driftdesk.reruns.progress import TextProgress

    made, printed = {}, {}
    for agent, protocol, url in (
        ("claude-code", "anthropic", server.root_url),
        ("codex", "openai", server.base_url),
    ):
        profile = Profile(name=f"sim-{agent}", protocol=protocol, base_url=url, model=SIM_MODEL)
        progress = TextProgress(io.StringIO(), is_tty=False)
        outcome = await execute_run(
            RunSpec(
                profile=profile,
                suite=str(suite),
                agent=agent,
                repeat=1,
                timeout_s=180,
                out_dir=out,
                api_key=KEY,
            ),
            progress,
        )
        assert outcome.status == "completed", outcome.reason
        made[agent] = outcome.run_dir
        assert isinstance(progress.stream, io.StringIO)
        printed[agent] = progress.stream.getvalue().splitlines()[0]
    return made, printed


async def test_real_claude_code_and_codex_runs_are_two_series_and_compare_warns(
    home: Any,
    clients_on_path: dict[str, Path],
    coding_sandbox: tuple[SandboxServer, Path],
    tmp_path: Path,
    cli: Any,
) -> None:
    server, suite = coding_sandbox
    out = tmp_path / "runs"
    runs, printed = await _real_runs(server, suite, out)
    claude, codex = runs["claude-code"], runs["codex"]

    # The manifest names the client and the version its binary prints.
    for agent, run_dir in runs.items():
        client = _manifest(run_dir)["client"]
        assert client == {"name": agent, "version": _version_of(clients_on_path[agent])}
    claude_label = agent_identity(_manifest(claude)).label
    assert claude_label == f"claude-code {_version_of(clients_on_path['claude-code'])}"
    # the run's first line names it too
    assert f"(agent {claude_label}, concurrency" in printed["claude-code"]
    assert f"(agent codex {_version_of(clients_on_path['codex'])}, " in printed["codex"]

    # trend: one series per agent kind, the newest run's by default.
    default = build_trend([claude, codex])
    assert [r.run_id for r in default.runs] == [codex.name] and default.agent == "codex"
    assert any("left out 1 runs of other agents (claude-code 1)" in n for n in default.notes)
    theirs = build_trend([claude, codex], agent="claude-code")
    assert [r.run_id for r in theirs.runs] == [claude.name]
    mixed = build_trend([claude, codex], agent="all")
    assert [r.run_id for r in mixed.runs] == [claude.name, codex.name]
    assert "agent_changed" in mixed.runs[1].flag_names()
    assert "client_changed" not in mixed.runs[1].flag_names()
    evidence = next(f.evidence for f in mixed.runs[1].flags if f.name == "agent_changed")
    assert claude_label in evidence and "codex 0." in evidence
    assert mixed.to_json()["runs"][1]["agent"]["client"] == "codex"

    table = cli("trend", "--runs", str(out), "--agent", "all")
    assert table.returncode == 0, table.stderr
    assert "all agents, mixed" in table.stdout and "agent_changed: agent codex" in table.stdout
    assert claude_label in table.stdout

    # check --trend fails on agent_changed, as on served_model_changed.
    gate = cli("check", str(codex), "--trend", "--format", "json")
    assert gate.returncode == 1, gate.stdout + gate.stderr
    by_name = {c["name"]: c for c in json.loads(gate.stdout)["conditions"]}
    assert not by_name["trend: no agent_changed flag"]["passed"]

    # compare warns; report names the agent (text and JSON).
    comparison = compare_runs(claude, codex)
    assert any(w.startswith("agents differ (A claude-code") for w in comparison.warnings)
    assert comparison.to_json()["b"]["agent"]["kind"] == "codex"
    gated = cli("check", str(codex), "--baseline", str(claude))
    assert "; agents differ (A claude-code" in gated.stdout, gated.stdout + gated.stderr
    shown = cli("compare", str(claude), str(codex))
    assert "warning: agents differ" in shown.stdout, shown.stdout + shown.stderr
    [report] = build_report([codex])
    assert report.to_json()["agent"]["client"] == "codex"
    text = cli("report", str(claude))
    assert f"agent {claude_label}" in text.stdout, text.stdout + text.stderr


def _builtin_run(out: Path, server: SandboxServer, seed: int) -> Path:
    import asyncio

    profile = Profile(name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL)
    spec = RunSpec(profile=profile, suite="basic", repeat=1, out_dir=out, api_key=KEY, seed=seed)
    return asyncio.run(execute_run(spec)).run_dir


def test_a_client_upgrade_stays_in_its_series_flagged_and_old_runs_read_as_unknown(
    home: Any, tmp_path: Path, cli: Any
) -> None:
    out = tmp_path / "runs"
    with SandboxServer(seed=3) as server:
        made = [_builtin_run(out, server, seed) for seed in range(3)]
    old, before, after = made
    # Composed from real runs: the oldest from before runs named their client; the newest
    # made by another version of the client.
    _set_manifest(old, client=None, started_at="2026-01-01T00:00:00.000Z")
    _set_manifest(before, client={"name": "driftdesk", "version": "0.0.9"},
                  started_at="2026-01-02T00:00:00.000Z")  # fmt: skip
    _set_manifest(after, started_at="2026-01-03T00:00:00.000Z")
    assert agent_identity(_manifest(old)).label == "builtin (client unknown)"
    trend = build_trend(made)
    assert [r.run_id for r in trend.runs] == [old.name, before.name, after.name]
    assert [r.flag_names() for r in trend.runs] == [[], [], ["client_changed"]]
    [flag] = trend.runs[2].flags
    assert flag.evidence == (
        f"client driftdesk {_manifest(after)['client']['version']}; {before.name} client "
        "driftdesk 0.0.9"
    )
    assert trend.to_json()["runs"][0]["agent"]["recorded"] is False
    comparison = compare_runs(before, after)
    assert any(w.startswith("client versions differ") for w in comparison.warnings)
    assert not any("differ (A" in w for w in compare_runs(old, after).warnings)
    # client_changed does not gate by default; the job may ask for it.
    assert cli("check", str(after), "--trend").returncode == 0
    asked = cli("check", str(after), "--trend", "--trend-flags", "client_changed")
    assert asked.returncode == 1, asked.stdout
    as_json = json.loads(cli("trend", "--runs", str(out), "--json").stdout)
    assert as_json["agent"] == "builtin"
    assert [r["flags"][0]["name"] for r in as_json["runs"] if r["flags"]] == ["client_changed"]
    assert as_json["runs"][2]["agent"]["version"] == _manifest(after)["client"]["version"]
    # a kind never seen is one clear line
    missing = cli("trend", "--runs", str(out), "--agent", "codex")
    assert missing.returncode == 2 and "no run of agent 'codex'" in missing.stderr
    shutil.rmtree(old)


def test_each_agent_kind_names_its_client(clients_on_path: dict[str, Path], tmp_path: Path) -> None:
    import importlib.metadata

    from driftdesk import __version__
    from driftdesk.reruns.agent_kinds import AGENT_KINDS
    from driftdesk.reruns.presets import CLAUDE_CODE, client_version

    def client_identity(agent: str) -> dict[str, str | None]:
        return AGENT_KINDS[agent].client_identity()

    for agent, binary in clients_on_path.items():
        assert client_identity(agent) == {"name": agent, "version": _version_of(binary)}
    assert client_identity("inspect") == {
        "name": "inspect_ai",
        "version": importlib.metadata.version("inspect-ai"),
    }
    assert client_identity("builtin") == {"name": "driftdesk", "version": __version__}
    assert client_identity("command") == {"name": None, "version": None}
    # A binary that says no version, or fails: unknown, never an error.
    for name, body in (("mute", "echo no version here"), ("broken", "exit 3")):
        script = tmp_path / name
        script.write_text(f"#!/bin/sh\n{body}\n")
        script.chmod(0o755)
        assert client_version(CLAUDE_CODE, str(script)) is None


def test_the_version_is_asked_without_the_users_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from driftdesk.reruns.presets import CODEX, client_version

    secret = "sk-user-own-key-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", secret)
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", secret)
    seen = tmp_path / "env.txt"
    script = tmp_path / "codex"
    script.write_text(f"#!/bin/sh\nenv > {seen}\necho codex-cli 9.8.7\n")
    script.chmod(0o755)
    assert client_version(CODEX, str(script)) == "9.8.7"
    assert secret not in seen.read_text()
    assert f"HOME={Path.home()}" not in seen.read_text().splitlines()
