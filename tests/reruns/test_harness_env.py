"""A harness's environment is built from an allow-list plus what the user names (issue #46,
item 11): cloud and tool credentials in driftdesk's own environment never reach the agent under
test unless passed with ``--pass-env``, a profile's ``pass_env`` or a task's ``pass_env``.

Real runs: the real engine and proxy, a real command harness that writes the environment it
was started with into its result file, the real Codex client (its shell tool dumps ``env``),
a real resume, the real CLI and ``driftdesk doctor``.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from coding_helpers import PROBE_TASK, write_coding_suite
from reruns_helpers import ScriptedEndpoint, cancel_after_rows, read_rows

from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run, resume_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.reruns.suites import SuiteError, load_suite
from driftdesk.rundir import WORKSPACE_SUFFIX, attempt_file
from tests.conftest import real_client

KEY = "sk-test-REALKEY-harness-env-0123456789"
# What the issue found passing to Claude Code and Codex, set in driftdesk's own environment.
CREDENTIALS = {
    "AWS_SECRET_ACCESS_KEY": "aws-secret-not-for-harnesses",
    "AWS_SESSION_TOKEN": "aws-session-not-for-harnesses",
    "GH_TOKEN": "gh-token-not-for-harnesses",
    "GITHUB_TOKEN": "github-token-not-for-harnesses",
    "HF_TOKEN": "hf-token-not-for-harnesses",
    "AZURE_STORAGE_KEY": "azure-key-not-for-harnesses",
    "NODE_AUTH_TOKEN": "npm-token-not-for-harnesses",
    "SSH_AUTH_SOCK": "/run/user/0/ssh-agent.sock",
}

# The harness: its whole environment, as it received it, into its result file (and, a second
# reading, its own /proc/self/environ).
DUMP_ENV = textwrap.dedent(
    """
    import json, os, sys, time
    with open("/proc/self/environ", "rb") as fh:
        from_proc = sorted(v.split(b"=", 1)[0].decode() for v in fh.read().split(b"\\0") if v)
    if os.environ["DRIFTDESK_TASK_ID"] == "slow":
        time.sleep(float(sys.argv[1]) if len(sys.argv) > 1 else 0)
    with open(os.environ["DRIFTDESK_RESULT_PATH"], "w") as fh:
        json.dump({"success": True, "env": dict(os.environ), "from_proc": from_proc}, fh)
    """
)


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("LC_TIME", "C.UTF-8")  # the locale's categories pass
    monkeypatch.setenv("https_proxy", "http://proxy.example:3128")
    return CREDENTIALS


def _suite(folder: Path, tasks: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dump_env.py").write_text(DUMP_ENV)
    path = folder / "suite.jsonl"
    path.write_text("".join(json.dumps({"prompt": "p", **t}) + "\n" for t in tasks))
    return path


def _spec(url: str, suite: Path, out: Path, **kwargs: Any) -> RunSpec:
    command = f"{sys.executable} {suite.parent / 'dump_env.py'} " + kwargs.pop("args", "")
    return RunSpec(
        profile=kwargs.pop(
            "profile", Profile(name="p", protocol="openai", base_url=url, model="m")
        ),
        suite=str(suite),
        repeat=1,
        concurrency=1,
        timeout_s=60,
        out_dir=out,
        agent="command",
        command=command,
        api_key=KEY,
        **kwargs,
    )


def _envs(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each task's harness environment (as its result file says), by task id."""
    found = {}
    for row in read_rows(run_dir / "attempts.jsonl"):
        assert row["outcome"] == "pass", row
        report = json.loads((run_dir / row["result_path"]).read_text())
        assert sorted(report["env"]) == report["from_proc"]  # the same seen both ways
        found[row["task_id"]] = report["env"]
    return found


async def test_credentials_in_our_environment_never_reach_a_command_harness(
    scripted: ScriptedEndpoint, tmp_path: Path, credentials: dict[str, str]
) -> None:
    suite = _suite(tmp_path / "suite", [{"task_id": "t"}])
    outcome = await execute_run(_spec(scripted.url, suite, tmp_path / "runs"))
    env = _envs(outcome.run_dir)["t"]
    for name in credentials:
        assert name not in env, name
    assert not set(credentials.values()) & set(env.values())
    # What a shell and the client need is there; the run's own variables too.
    assert env["PATH"] == os.environ["PATH"] and env["HOME"] == os.environ["HOME"]
    assert env["LC_TIME"] == "C.UTF-8" and env["https_proxy"] == "http://proxy.example:3128"
    assert env["OPENAI_API_KEY"].startswith("dd-run-") and env["DRIFTDESK_RUN_CHILD"]
    assert env["DRIFTDESK_TASK_ID"] == "t"


async def test_a_tasks_setup_and_check_get_the_same_environment(
    scripted: ScriptedEndpoint, tmp_path: Path, credentials: dict[str, str]
) -> None:
    (tmp_path / "suite" / "ws").mkdir(parents=True)
    task = {
        "task_id": "t",
        "workspace": "ws",
        "setup": "env > setup-env.txt",
        "check": "env > check-env.txt",
        "pass_env": ["GH_TOKEN"],
    }
    suite = _suite(tmp_path / "suite", [task])
    outcome = await execute_run(_spec(scripted.url, suite, tmp_path / "runs"))
    copy = attempt_file(outcome.run_dir, "t", 0, WORKSPACE_SUFFIX)
    for dump in ("setup-env.txt", "check-env.txt"):
        text = (copy / dump).read_text()
        names = {line.split("=", 1)[0] for line in text.splitlines() if "=" in line}
        assert "PATH" in names and "DRIFTDESK_RUN_CHILD" in names
        assert f"GH_TOKEN={credentials['GH_TOKEN']}" in text  # the task names it
        for name in set(credentials) - {"GH_TOKEN"}:
            assert name not in names, (dump, name)


async def test_pass_env_names_what_passes_and_resume_keeps_the_names(
    scripted: ScriptedEndpoint, tmp_path: Path, credentials: dict[str, str]
) -> None:
    suite = _suite(tmp_path / "suite", [{"task_id": "first"}, {"task_id": "slow"}])
    spec = _spec(scripted.url, suite, tmp_path / "runs", pass_env=["HF_TOKEN", "AWS_S*"], args="30")
    spec.concurrency = 2
    attempts = await cancel_after_rows(spec, rows=1)  # the slow task is cut short
    run_dir = attempts.parent
    first = _envs(run_dir)["first"]
    assert first["HF_TOKEN"] == credentials["HF_TOKEN"]
    assert first["AWS_SECRET_ACCESS_KEY"] == credentials["AWS_SECRET_ACCESS_KEY"]
    assert first["AWS_SESSION_TOKEN"] == credentials["AWS_SESSION_TOKEN"]
    for name in ("GH_TOKEN", "GITHUB_TOKEN", "AZURE_STORAGE_KEY", "NODE_AUTH_TOKEN"):
        assert name not in first, name
    manifest_text = (run_dir / "manifest.json").read_text()
    assert json.loads(manifest_text)["pass_env"] == ["HF_TOKEN", "AWS_S*"]
    for value in credentials.values():  # the names, never a value
        assert value not in manifest_text
    # Resumed (the slow task runs again, at once this time): the same names pass.
    (suite.parent / "dump_env.py").write_text(DUMP_ENV.replace("float(sys.argv[1])", "0.0"))
    profile = Profile(name="p", protocol="openai", base_url=scripted.url, model="m")
    await resume_run(run_dir, api_key=KEY, profile=profile)
    slow = _envs(run_dir)["slow"]
    assert slow["HF_TOKEN"] == credentials["HF_TOKEN"] and "GH_TOKEN" not in slow
    for path in run_dir.rglob("*"):  # the values are in the harness's result files only
        if path.is_file() and not path.name.endswith(".result.json"):
            assert credentials["HF_TOKEN"] not in path.read_text(errors="replace"), path


async def test_a_profile_and_a_task_name_what_their_harnesses_get(
    home: object, scripted: ScriptedEndpoint, tmp_path: Path, credentials: dict[str, str]
) -> None:
    ProfileStore().save(
        Profile(
            name="up",
            protocol="openai",
            base_url=scripted.url,
            model="m",
            no_key=True,
            pass_env=["GH_TOKEN"],
        )
    )
    assert ProfileStore().get("up").pass_env == ["GH_TOKEN"]  # written and read back
    tasks = [{"task_id": "plain"}, {"task_id": "hub", "pass_env": ["HF_TOKEN"]}]
    suite = _suite(tmp_path / "suite", tasks)
    outcome = await execute_run(_spec(scripted.url, suite, tmp_path / "runs", profile="up"))
    envs = _envs(outcome.run_dir)
    assert envs["plain"]["GH_TOKEN"] == envs["hub"]["GH_TOKEN"] == credentials["GH_TOKEN"]
    assert envs["hub"]["HF_TOKEN"] == credentials["HF_TOKEN"]
    assert "HF_TOKEN" not in envs["plain"]
    for env in envs.values():
        assert "AWS_SECRET_ACCESS_KEY" not in env and "GITHUB_TOKEN" not in env


def test_a_bad_pass_env_is_refused_clearly(cli: Any, tmp_path: Path) -> None:
    bad = _suite(tmp_path / "suite", [{"task_id": "t", "pass_env": "HF_TOKEN"}])
    with pytest.raises(SuiteError, match="pass_env must be a list"):
        load_suite(str(bad))
    refused = cli("run", "--suite", "basic", "--profile", "p", "--pass-env", "HF TOKEN")
    assert refused.returncode == 2
    assert "'HF TOKEN' is not a variable name" in refused.stderr


def test_doctor_lists_what_a_harness_would_receive_names_only(
    home: object, cli: Any, credentials: dict[str, str]
) -> None:
    ProfileStore().save(
        Profile(
            name="up",
            protocol="openai",
            base_url="http://127.0.0.1:9/v1",
            model="m",
            no_key=True,
            pass_env=["GH_TOKEN"],
        )
    )
    done = cli("doctor", "up", "--json", "--no-probe")
    [check] = [c for c in json.loads(done.stdout) if c["name"] == "up: harness env"]
    passed_part, withheld_part = check["message"].split("; withheld")
    passed = set(passed_part.split(": ", 1)[1].split(", "))
    withheld = set(withheld_part.split(": ", 1)[1].split(", "))
    assert {"PATH", "HOME", "LC_TIME", "https_proxy"} <= passed
    assert "GH_TOKEN" in passed  # the profile names it
    assert set(CREDENTIALS) - {"GH_TOKEN"} <= withheld
    for value in credentials.values():  # names only, never a value
        assert value not in done.stdout
    text = cli("doctor", "up", "--no-probe").stdout
    assert "up: harness env" in text and "AWS_SECRET_ACCESS_KEY" in text
    assert credentials["GH_TOKEN"] not in text


@pytest.fixture
def codex_on_path(home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{real_client('codex').parent}{os.pathsep}{os.environ['PATH']}")


@pytest.mark.parametrize("passed", [[], ["HF_TOKEN"]], ids=["none", "hf-token"])
async def test_the_real_codex_client_gets_no_credential_but_what_is_passed(
    codex_on_path: None, tmp_path: Path, credentials: dict[str, str], passed: list[str]
) -> None:
    suite = write_coding_suite(tmp_path / "suite", [PROBE_TASK])
    with SandboxServer(seed=7, suites=[suite], linger_s=0.3) as server:
        outcome = await execute_run(
            RunSpec(
                profile=Profile(
                    name="sim", protocol="openai", base_url=server.base_url, model=SIM_MODEL
                ),
                suite=str(suite),
                repeat=1,
                timeout_s=180.0,
                out_dir=tmp_path / "runs",
                api_key=KEY,
                agent="codex",
                pass_env=passed,
            )
        )
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] == "pass", row
    dump = attempt_file(outcome.run_dir, "probe", 0, WORKSPACE_SUFFIX) / "client-env.txt"
    env = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert "CODEX_HOME" in env and "DRIFTDESK_RUN_CHILD" in env  # the client's shell's env
    for name, value in credentials.items():
        if name in passed:
            assert env[name] == value
        else:
            assert name not in env and value not in dump.read_text(), name
