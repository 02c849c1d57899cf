"""``driftdesk run --agent claude-code|codex`` with the REAL clients against the sandbox: three
coding tasks × 3 repeats, outcomes that follow the sandbox's script, every call metered, the
clients isolated from the user's own configuration and free of the real key; faults on
/v1/messages and /v1/responses classified right, with the clients' own retries off."""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from coding_helpers import CODING_TASKS, PROBE_TASK, TrapEndpoint, write_coding_suite
from reruns_helpers import read_rows

from driftdesk.analysis.sources import manifest_or_empty
from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, FaultRates, SandboxServer
from driftdesk.rundir import (
    CHECK_OUTPUT_SUFFIX,
    CLIENT_HOME_SUFFIX,
    WORKSPACE_DIFF_SUFFIX,
    WORKSPACE_SUFFIX,
    attempt_file,
)
from tests.conftest import real_client

REAL_KEY = "sk-test-REALKEY-presets-0123456789abcdef"
CLIENTS = {"claude-code": "claude", "codex": "codex"}
PROTOCOL = {"claude-code": "anthropic", "codex": "openai"}


@pytest.fixture
def clients_on_path(home: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # A home of the test's own: the clients' shells (Claude Code's Bash tool, Codex's
    # `bash -lc`) read the user's ~/.bashrc otherwise, and a shell hook there (pyenv's rehash
    # lock, left behind when an attempt is killed at its timeout) stalls every command.
    folder = real_client("claude").parent
    real_client("codex")
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")


@pytest.fixture
async def trap() -> AsyncIterator[TrapEndpoint]:
    endpoint = TrapEndpoint()
    await endpoint.start()
    yield endpoint
    await endpoint.stop()


@pytest.fixture
def coding_sandbox(tmp_path: Path) -> Iterator[tuple[SandboxServer, Path]]:
    suite = write_coding_suite(tmp_path / "suite")
    # Streams stay open a while after their end (as gateways' keep-alives hold them): a client
    # that hangs up once it has read the answer (Codex) does so before the stream ends.
    with SandboxServer(seed=7, suites=[suite], linger_s=0.3) as server:
        yield server, suite


def _profile_url(agent: str, server: SandboxServer) -> str:
    return server.root_url if agent == "claude-code" else server.base_url


def _user_configs(home_root: Path, trap_url: str) -> dict[Path, bytes]:
    """A user's own Claude Code and Codex configuration pointing elsewhere (with a key helper
    that leaves a mark if it ever runs); returns their bytes, to compare after the run."""
    mark = home_root / "api-key-helper-ran"
    claude = home_root / ".claude" / "settings.json"
    claude.parent.mkdir(parents=True)
    claude.write_text(
        json.dumps(
            {
                "apiKeyHelper": f"touch {mark}; echo sk-user-helper-key",
                "env": {"ANTHROPIC_BASE_URL": trap_url, "ANTHROPIC_MODEL": "user-model"},
                "permissions": {"deny": ["Bash"]},
            },
            indent=2,
        )
        + "\n"
    )
    codex = home_root / ".codex" / "config.toml"
    codex.parent.mkdir(parents=True)
    codex.write_text(
        '# my own codex config\nmodel = "user-model"\nmodel_provider = "mine"\n\n'
        f'[model_providers.mine]\nname = "mine"\nbase_url = "{trap_url}/v1"\n'
        'env_key = "MY_KEY"\nwire_api = "responses"\n'
    )
    return {claude: claude.read_bytes(), codex: codex.read_bytes()}


@pytest.mark.keyring
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
async def test_real_client_reruns_coding_tasks_through_the_proxy(
    agent: str,
    home,
    clients_on_path: None,
    trap: TrapEndpoint,
    coding_sandbox: tuple[SandboxServer, Path],
    tmp_path: Path,
    cli,
) -> None:
    server, suite = coding_sandbox
    user_files = _user_configs(home.root, trap.url)
    ProfileStore().save(
        Profile(
            name="sim",
            protocol=PROTOCOL[agent],
            base_url=_profile_url(agent, server),
            model=SIM_MODEL,
        )
    )
    set_key("sim", REAL_KEY)
    out = home.project / "runs"  # the default, relative --out, as a user types it
    done = cli(
        "run", "--profile", "sim", "--suite", str(suite), "--agent", agent, "--repeat", "3",
        "--concurrency", "3", "--timeout", "180",
        timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [run_dir] = list(out.iterdir())
    rows = read_rows(run_dir / "attempts.jsonl")
    assert sorted((r["task_id"], r["attempt"]) for r in rows) == [
        (t, a) for t in ("fix-add", "rename", "write-notes") for a in range(3)
    ]
    outcome = {(r["task_id"], r["attempt"]): r["outcome"] for r in rows}
    # The script: fix-add always right, write-notes always wrong, rename a coin flip whose
    # path shows in the attempt's own workspace.
    assert [outcome[("fix-add", a)] for a in range(3)] == ["pass"] * 3
    assert [outcome[("write-notes", a)] for a in range(3)] == ["fail"] * 3
    for attempt in range(3):
        ws = attempt_file(run_dir, "rename", attempt, WORKSPACE_SUFFIX)
        right = (ws / "new.txt").exists()
        assert right != (ws / "copy.txt").exists()
        assert outcome[("rename", attempt)] == ("pass" if right else "fail")
        assert (
            "+keep me"
            in attempt_file(run_dir, "rename", attempt, WORKSPACE_DIFF_SUFFIX).read_text()
        )
    fixed = attempt_file(run_dir, "fix-add", 0, WORKSPACE_DIFF_SUFFIX).read_text()
    assert "-    return a - b" in fixed and "+    return a + b" in fixed
    notes_check = attempt_file(run_dir, "write-notes", 0, CHECK_OUTPUT_SUFFIX).read_text()
    assert "exit code 1" in notes_check
    # Every call went through the metering proxy to the sandbox; the client's own counts sit
    # beside the proxy's.
    calls = read_rows(run_dir / "calls.jsonl")
    for row in rows:
        mine = [
            c for c in calls if (c["task_id"], c["attempt"]) == (row["task_id"], row["attempt"])
        ]
        assert row["calls"] == len(mine) >= 2
        assert all(c["status"] == 200 for c in mine)
        assert row["client_prompt_tokens"] and row["client_completion_tokens"]
        assert row["retries"] == 0
    # Every call metered whole, Responses streams (Codex) included, with the model that answered.
    assert all(c["prompt_tokens"] and c["completion_tokens"] for c in calls)
    # (Responses streams end with response.completed, no [DONE]: complete, not "truncated".)
    # A client hanging up once it has the whole answer is no failure of the call either.
    assert [c["error_kind"] for c in calls] == [None] * len(calls)
    assert all(c["served_model"] for c in calls)
    if agent == "claude-code":
        assert set(server.stats.api_keys) == {REAL_KEY}  # the proxy put the real key on
    else:
        assert set(server.stats.authorizations) == {f"Bearer {REAL_KEY}"}
    assert server.stats.requests == len(calls)
    # The user's own config neither redirected the run nor was touched; its key helper never ran.
    assert trap.requests == 0
    assert {path: path.read_bytes() for path in user_files} == user_files
    assert not (home.root / "api-key-helper-ran").exists()
    # The client's environment (dumped by its own shell tool) and its config dir hold no real
    # key and no way to the keyring; nothing in the run dir does.
    env_dump = attempt_file(run_dir, "fix-add", 0, WORKSPACE_SUFFIX) / "client-env.txt"
    env_text = env_dump.read_text()
    assert "DRIFTDESK_RUN_CHILD=" in env_text and "DBUS_SESSION_BUS_ADDRESS" not in env_text
    config_dir = attempt_file(run_dir, "fix-add", 0, CLIENT_HOME_SUFFIX)
    assert any(config_dir.iterdir())

    # A run cut short (two slots' rows never written) and resumed: the resume runs exactly
    # those slots with the run's own harness, taken from its manifest, at another concurrency.
    dropped = {("rename", 2), ("write-notes", 1)}
    kept = [r for r in rows if (r["task_id"], r["attempt"]) not in dropped]
    (run_dir / "attempts.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept))
    calls_before = len(calls)
    done = cli("resume", str(run_dir), "--concurrency", "1", timeout=900)
    assert done.returncode == 0, done.stderr
    rows = read_rows(run_dir / "attempts.jsonl")
    assert sorted((r["task_id"], r["attempt"]) for r in rows) == [
        (t, a) for t in ("fix-add", "rename", "write-notes") for a in range(3)
    ]
    resumed = rows[len(kept) :]
    assert {(r["task_id"], r["attempt"]) for r in resumed} == dropped
    # The real client answered again (its own token counts come only from its output), and
    # its calls went through the proxy with the real key put on there.
    assert all(r["client_prompt_tokens"] and r["calls"] >= 2 for r in resumed)
    assert len(read_rows(run_dir / "calls.jsonl")) == calls_before + sum(
        r["calls"] for r in resumed
    )
    assert [r["outcome"] for r in resumed if r["task_id"] == "write-notes"] == ["fail"]
    assert manifest_or_empty(run_dir)["resumes"][-1]["slots"] == 2
    assert trap.requests == 0
    for path in run_dir.rglob("*"):
        if path.is_file() and not path.is_symlink():
            assert REAL_KEY.encode() not in path.read_bytes(), path


@pytest.mark.parametrize("agent", ["claude-code", "codex"])
@pytest.mark.parametrize(
    ("faults", "code", "retries"),
    [
        (FaultRates(rate_limit=1.0), "429", 1),
        (FaultRates(server_error=1.0), "500", 1),
        (FaultRates(timeout=1.0), "timeout", 0),
    ],
    ids=["429", "500", "hang"],
)
async def test_faults_reach_the_real_clients_and_are_classified(
    agent: str,
    faults: FaultRates,
    code: str,
    retries: int,
    clients_on_path: None,
    tmp_path: Path,
) -> None:
    suite = write_coding_suite(tmp_path / "suite")
    with SandboxServer(faults=faults, retry_after_s=0.05, suites=[suite]) as server:
        outcome = await execute_run(
            RunSpec(
                profile=Profile(
                    name="sim",
                    protocol=PROTOCOL[agent],
                    base_url=_profile_url(agent, server),
                    model=SIM_MODEL,
                ),
                suite=str(suite),
                tasks=["fix-add"],
                repeat=1,
                # The hang must time out; elsewhere a loaded machine must not turn a client's
                # start-up into a timeout.
                timeout_s=25.0 if code == "timeout" else 120.0,
                out_dir=tmp_path / "runs",
                api_key=REAL_KEY,
                agent=agent,  # type: ignore[arg-type]
                retry_policy=RetryPolicy(max_retries=retries, base_delay_s=0.05, max_delay_s=0.1),
                link_faults="retry",  # each fault reaches the client: what is classified here
            )
        )
        requests = server.stats.requests
    [row] = read_rows(outcome.run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"], row["retries"]) == ("link_error", code, retries)
    # The client's own retries are off: one request per try, every one in calls.jsonl.
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert requests == len(calls) == 1 + retries


@pytest.mark.keyring
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
async def test_isolate_runs_the_real_client_under_bubblewrap(
    agent: str, home, clients_on_path: None, trap: TrapEndpoint, tmp_path: Path, cli
) -> None:
    """--isolate with a client preset: the client (and every command it runs) is in its own
    PID namespace with the user's home hidden, and the run still works through the proxy."""
    _user_configs(home.root, trap.url)
    suite = write_coding_suite(tmp_path / "suite", [PROBE_TASK])
    with SandboxServer(seed=7, suites=[suite]) as server:
        ProfileStore().save(Profile("sim", PROTOCOL[agent], _profile_url(agent, server), SIM_MODEL))
        set_key("sim", REAL_KEY)
        done = cli(
            "run", "--profile", "sim", "--suite", str(suite), "--agent", agent, "--repeat", "1",
            "--timeout", "180", "--isolate", timeout=600,
        )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    [run_dir] = list((home.project / "runs").iterdir())
    [row] = read_rows(run_dir / "attempts.jsonl")
    assert row["outcome"] == "pass", row
    ws = attempt_file(run_dir, "probe", 0, WORKSPACE_SUFFIX)
    assert "bwrap" in (ws / "pid1.txt").read_text()  # PID 1 of its namespace: bubblewrap
    assert (ws / "user-settings.txt").read_text().strip() == "hidden"
    assert "DBUS_SESSION_BUS_ADDRESS" not in (ws / "client-env.txt").read_text()
    assert trap.requests == 0


@pytest.mark.keyring
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
async def test_real_client_trajectories_are_recorded_and_explained(
    agent: str, home, clients_on_path: None, tmp_path: Path, cli
) -> None:
    """The sandbox passes ``rename`` half the time: its right script moves the file, its wrong
    one copies it. The real client's attempts are recorded at the proxy (no client flag, no
    wrapper) and ``explain`` finds them parting at that first command."""
    from driftdesk.analysis.explain import explain_task
    from driftdesk.analysis.trajectory import load_trajectory
    from driftdesk.rundir import RECORDING_SUFFIX

    rename = next(t for t in CODING_TASKS if t["task_id"] == "rename")
    suite = write_coding_suite(tmp_path / "suite", [rename])
    # One attempt at a time: the sandbox's seeded coin then falls the same way every run
    # (seed 3: pass, fail and both again within six attempts, for either client).
    with SandboxServer(seed=3, suites=[suite], linger_s=0.3) as server:
        ProfileStore().save(
            Profile(name="sim", protocol=PROTOCOL[agent], base_url=_profile_url(agent, server),
                    model=SIM_MODEL)
        )  # fmt: skip
        set_key("sim", REAL_KEY)
        done = cli(
            "run", "--profile", "sim", "--suite", str(suite), "--agent", agent, "--repeat", "6",
            "--concurrency", "1", "--timeout", "180",
            timeout=900,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [run_dir] = list((home.project / "runs").iterdir())
    outcomes = [
        r["outcome"]
        for r in sorted(read_rows(run_dir / "attempts.jsonl"), key=lambda r: r["attempt"])
    ]
    assert "pass" in outcomes and "fail" in outcomes, outcomes
    for attempt in range(6):
        recording = attempt_file(run_dir, "rename", attempt, RECORDING_SUFFIX)
        assert recording.is_file()
        assert REAL_KEY.encode() not in gzip.decompress(recording.read_bytes())
        traj = load_trajectory(run_dir, "rename", attempt)
        assert traj is not None and traj.source == "recording" and not traj.problems
        shell = [c for s in traj.model_turns for c in s.tool_calls]
        first = shell[0][1]
        if outcomes[attempt] == "pass":
            assert "mv old.txt new.txt" in first and len(shell) == 2
        else:
            assert "cp old.txt copy.txt" in first and len(shell) == 1

    explanation = explain_task(run_dir, "rename")
    passes, fails = explanation.groups["pass"], explanation.groups["fail"]
    assert sorted(passes + fails) == list(range(6))
    assert explanation.pairs and len(explanation.pairs) == len(passes) * len(fails)
    for _, _, divergence in explanation.pairs:
        assert divergence is not None and divergence.step == 0
        assert divergence.a is not None and "mv old.txt new.txt" in divergence.a.value
        assert divergence.b is not None and "cp old.txt copy.txt" in divergence.b.value
    assert any("first diverge at step 1" in s for s in explanation.sentences())
    shown = cli(
        "explain", str(run_dir), "rename", "--attempts", str(passes[0]), str(fails[0]), "--json"
    )
    assert shown.returncode == 0, shown.stderr
    first_divergence = json.loads(shown.stdout)["first_divergence"]
    assert first_divergence["step"] == 0
    assert "mv old.txt new.txt" in first_divergence["a"]["action"]["arguments"]
