"""The command agent: a real script calling $OPENAI_BASE_URL through the metering proxy."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from reruns_helpers import ScriptedEndpoint, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.events import AttemptOutput, RunEvent
from driftdesk.reruns.retry import RetryPolicy
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.rundir import attempt_folder
from tests.processes import alive

REAL_KEY = "sk-test-REALKEY-command-0123456789"

HARNESS = textwrap.dedent(
    """
    import json, os, subprocess, sys, time, urllib.error, urllib.request
    task_id, attempt, result_path, env_dir = sys.argv[1:5]
    with open(os.path.join(env_dir, f"{task_id}-{attempt}-{time.time_ns()}.json"), "w") as fh:
        json.dump(dict(os.environ), fh)
    print(f"harness starting {task_id}/{attempt}", flush=True)
    if task_id == "crash":
        print("something broke", file=sys.stderr)
        sys.exit(2)
    if task_id == "stuck":
        child = subprocess.Popen(["sleep", "60"])
        with open(os.path.join(env_dir, "stuck.pid"), "w") as fh:
            fh.write(str(child.pid))
        time.sleep(60)
    body = json.dumps({"model": os.environ["DRIFTDESK_MODEL"], "stream": True,
                       "messages": [{"role": "user", "content": os.environ["DRIFTDESK_PROMPT"]}]})
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body.encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                 "Content-Type": "application/json"})
    try:
        raw = urllib.request.urlopen(request, timeout=10).read().decode()
    except urllib.error.HTTPError as exc:
        # Everything the provider's error said goes to the log and a file of the harness.
        said = exc.read().decode() + json.dumps(dict(exc.headers))
        with open(os.path.join(env_dir, f"said-{task_id}-{attempt}-{time.time_ns()}.txt"), "w") as fh:
            fh.write(said)
        print(f"provider said {exc.code}: {said}", file=sys.stderr)
        sys.exit(3)
    text = ""
    for line in raw.splitlines():
        if line.startswith("data: {"):
            for choice in json.loads(line[6:])["choices"]:
                text += choice["delta"].get("content") or ""
    print(f"answer {text}", flush=True)
    with open(result_path, "w") as fh:
        json.dump({"success": text.strip() == "42", "score": 1.0 if text.strip() == "42" else 0.0}, fh)
    """
)


class Recorder:
    def __init__(self) -> None:
        self.events: list[RunEvent] = []

    def on_event(self, event: RunEvent) -> None:
        self.events.append(event)


def harness_command(tmp_path: Path) -> tuple[str, Path]:
    """The HARNESS script as a command template, and the folder where it dumps its env."""
    script = tmp_path / "harness.py"
    script.write_text(HARNESS)
    env_dir = tmp_path / "envs"
    env_dir.mkdir()
    return f"{sys.executable} {script} {{task_id}} {{attempt}} {{result_path}} {env_dir}", env_dir


async def test_command_agent_end_to_end_without_the_key_in_its_environment(
    scripted: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The parent's environment holds the key in two places: neither may reach the harness.
    monkeypatch.setenv("OPENAI_API_KEY", REAL_KEY)
    monkeypatch.setenv("SOME_TOOL_SECRET", REAL_KEY)
    command, env_dir = harness_command(tmp_path)
    suite = write_suite(
        tmp_path / "suite.jsonl",
        ["answer-42", "wrong", "unauthorized", "rate-limited", "crash", "stuck"],
    )
    recorder = Recorder()
    outcome = await execute_run(
        RunSpec(
            profile=Profile(
                name="local",
                protocol="openai",
                base_url=scripted.url,
                model="test-model",
                headers={"X-Extra": "from-profile"},
            ),
            suite=str(suite),
            repeat=2,
            concurrency=4,
            timeout_s=2.0,
            out_dir=tmp_path / "runs",
            agent="command",
            command=command,
            api_key=REAL_KEY,
            retry_policy=RetryPolicy(max_retries=2, base_delay_s=0.01, max_delay_s=0.02),
            link_faults="retry",  # each 429 ends the try: the retries this test counts
        ),
        recorder,
    )
    rows = {(r["task_id"], r["attempt"]): r for r in read_rows(outcome.run_dir / "attempts.jsonl")}
    assert len(rows) == 12
    for attempt in range(2):
        assert rows["answer-42", attempt]["outcome"] == "pass"
        assert rows["answer-42", attempt]["score"] == 1.0
        assert rows["answer-42", attempt]["calls"] == 1
        assert rows["answer-42", attempt]["total_tokens"] == 14
        assert rows["wrong", attempt]["outcome"] == "fail"
        unauthorized = rows["unauthorized", attempt]
        assert (unauthorized["outcome"], unauthorized["error_code"]) == ("link_error", "401")
        assert unauthorized["retries"] == 0
        limited = rows["rate-limited", attempt]
        assert (limited["outcome"], limited["error_code"], limited["retries"]) == (
            "link_error",
            "429",
            2,
        )
        crash = rows["crash", attempt]
        assert (crash["outcome"], crash["error_code"], crash["calls"]) == (
            "harness_error",
            "harness_crash",
            0,
        )
        stuck = rows["stuck", attempt]
        assert (stuck["outcome"], stuck["error_code"]) == ("harness_error", "timeout")
    # The whole process group was killed at the timeout, grandchildren included.
    assert not alive(int((env_dir / "stuck.pid").read_text()))
    # The server saw each retry of the rate-limited harness.
    assert scripted.requests["rate-limited"] == 2 * 3

    # The endpoint received the profile's real key; no harness environment held it.
    assert scripted.authorizations and all(
        a == f"Bearer {REAL_KEY}" for a in scripted.authorizations
    )
    assert not any(scripted.api_key_headers)  # nor the run's throwaway key, in either form
    # The endpoint echoed the key in its 401s; the harness saw the echo, but masked.
    said = [p.read_text() for p in env_dir.glob("said-unauthorized-*.txt")]
    assert said and all("Incorrect API key provided" in text for text in said)
    for path in env_dir.iterdir():
        assert REAL_KEY not in path.read_text(errors="replace"), path
    dumps = list(env_dir.glob("*.json"))
    assert len(dumps) >= 12
    for dump in dumps:
        env = json.loads(dump.read_text())
        assert not any(REAL_KEY in value for value in env.values()), dump
        assert env["OPENAI_API_KEY"].startswith("dd-run-")
        assert env["OPENAI_BASE_URL"].startswith("http://127.0.0.1:")

    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert len(calls) == sum(scripted.requests.values())
    ok = [c for c in calls if c["status"] == 200]
    assert ok and all(c["total_tokens"] == 14 and c["streamed"] for c in ok)
    assert {c["error_kind"] for c in calls} >= {"401", "429"}
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            assert REAL_KEY not in path.read_text(errors="replace"), path

    # The logs we write are private to their owner (the result files are the harness's own).
    logs = list((outcome.run_dir / "attempts").rglob("*.log"))
    assert len(logs) == 12
    assert {oct(p.stat().st_mode & 0o777) for p in logs} == {"0o600"}

    # stdout/stderr reach the attempt's log and the live views.
    log = (attempt_folder(outcome.run_dir, "answer-42") / "0.log").read_text()
    assert "[stdout] answer 42" in log
    outputs = [e for e in recorder.events if isinstance(e, AttemptOutput)]
    assert any(e.task_id == "crash" and e.stream == "stderr" for e in outputs)


async def test_the_proxy_refuses_requests_without_the_run_token(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = tmp_path / "probe.py"
    script.write_text(
        textwrap.dedent(
            """
            import json, os, sys, urllib.error, urllib.request
            request = urllib.request.Request(
                os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=b"{}",
                headers={"Authorization": "Bearer sk-not-the-run-token"})
            try:
                urllib.request.urlopen(request, timeout=5)
            except urllib.error.HTTPError as exc:
                print(exc.code, exc.read().decode())
                sys.exit(1)
            """
        )
    )
    suite = write_suite(tmp_path / "suite.jsonl", ["answer-42"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(suite),
            repeat=1,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script}",
            api_key=REAL_KEY,
        )
    )
    log = (attempt_folder(outcome.run_dir, "answer-42") / "0.log").read_text()
    assert "401" in log and "run's token" in log
    assert sum(scripted.requests.values()) == 0  # nothing reached the provider


async def test_a_call_in_flight_at_the_timeout_is_a_link_timeout_and_is_retried(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    command, _ = harness_command(tmp_path)
    suite = write_suite(tmp_path / "suite.jsonl", ["hang"])
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(suite),
            repeat=1,
            timeout_s=2.0,  # room for the harness to start on a loaded machine
            out_dir=tmp_path / "runs",
            agent="command",
            command=command,
            api_key=REAL_KEY,
            retry_policy=RetryPolicy(max_retries=1, base_delay_s=0.01, max_delay_s=0.02),
        )
    )
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert (row["outcome"], row["error_code"], row["retries"]) == ("link_error", "timeout", 1)
    assert scripted.requests["hang"] == 2
    calls = read_rows(outcome.run_dir / "calls.jsonl")
    assert len(calls) == 2 and all(c["error_kind"] == "client_closed" for c in calls)


async def test_cancelling_a_command_run_kills_the_harness_and_records_nothing(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    command, env_dir = harness_command(tmp_path)
    suite = write_suite(tmp_path / "suite.jsonl", ["stuck"])
    task = asyncio.create_task(
        execute_run(
            RunSpec(
                profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
                suite=str(suite),
                repeat=1,
                timeout_s=60,
                out_dir=tmp_path / "runs",
                agent="command",
                command=command,
                api_key=REAL_KEY,
            )
        )
    )
    pid_file = env_dir / "stuck.pid"
    for _ in range(300):
        if pid_file.exists() and pid_file.read_text():
            break
        await asyncio.sleep(0.02)
    grandchild = int(pid_file.read_text())
    assert alive(grandchild)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert read_rows(run_dir / "attempts.jsonl") == []
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    for _ in range(100):
        if not alive(grandchild):
            break
        await asyncio.sleep(0.02)
    assert not alive(grandchild)


KEY_PROBE = textwrap.dedent(
    """
    import json, os, subprocess, sys
    out_dir, profile = sys.argv[1:3]
    probe = subprocess.run([sys.executable, "-m", "driftdesk", "key", profile],
                           capture_output=True, text=True, timeout=30)
    with open(os.path.join(out_dir, "probe.txt"), "w") as fh:
        fh.write(f"rc={probe.returncode}\\n{probe.stdout}\\n{probe.stderr}")
    with open(os.path.join(out_dir, "env.json"), "w") as fh:
        json.dump(dict(os.environ), fh)
    print(probe.stdout, probe.stderr)
    sys.exit(1)
    """
)


@pytest.mark.keyring
async def test_a_harness_cannot_fetch_the_real_key_with_driftdesk_key(
    home: object, scripted: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from driftdesk.providers.keys import get_key, set_key
    from driftdesk.providers.profiles import ProfileStore

    ProfileStore().save(Profile(name="up", protocol="openai", base_url=scripted.url, model="m"))
    set_key("up", REAL_KEY)
    assert get_key("up") == REAL_KEY  # the parent itself can read it
    assert os.environ.get("DBUS_SESSION_BUS_ADDRESS")  # the keyring is on the session bus
    # Credentials of other tools inherited from the parent never reach a harness either.
    monkeypatch.setenv("GITHUB_AUTH_TOKEN", "gh-token-not-for-harnesses")
    monkeypatch.setenv("MISTRAL_API_KEY", "mistral-key-not-for-harnesses")
    script = tmp_path / "probe.py"
    script.write_text(KEY_PROBE)
    out_dir = tmp_path / "probe"
    out_dir.mkdir()
    outcome = await execute_run(
        RunSpec(
            profile="up",
            suite=str(write_suite(tmp_path / "suite.jsonl", ["answer-42"])),
            repeat=1,
            timeout_s=30,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script} {out_dir} up",
        )
    )
    (row,) = read_rows(outcome.run_dir / "attempts.jsonl")
    assert row["outcome"] == "fail"  # the probe ran to its end
    probe = (out_dir / "probe.txt").read_text()
    assert not probe.startswith("rc=0")
    env = json.loads((out_dir / "env.json").read_text())
    assert env["DRIFTDESK_RUN_CHILD"] == outcome.run_id
    for name in (
        "DBUS_SESSION_BUS_ADDRESS",
        "DRIFTDESK_KEYRING_SERVICE",
        "GNOME_KEYRING_CONTROL",
        "GITHUB_AUTH_TOKEN",
        "MISTRAL_API_KEY",
    ):
        assert name not in env, name
    assert env["OPENAI_API_KEY"].startswith("dd-run-")
    # Whatever the reason it failed, the key is nowhere the harness could write it.
    for path in [*out_dir.rglob("*"), *outcome.run_dir.rglob("*")]:
        if path.is_file():
            assert REAL_KEY not in path.read_text(errors="replace"), path


LONG_LINES = textwrap.dedent(
    """
    import json, os, sys
    key = os.environ["OPENAI_API_KEY"]  # a secret of the run: it straddles the 8 KiB cut
    sys.stdout.write("x" * (8 * 1024 - 10) + key + "y" * (200_000 - len(key)) + "\\n")
    sys.stdout.write("after the long line\\n")
    sys.stderr.write("e" * 300_000)  # no newline at all before exit
    sys.stdout.flush(); sys.stderr.flush()
    with open(sys.argv[1], "w") as fh:
        json.dump({"success": True}, fh)
    """
)


async def test_a_200_kb_output_line_is_logged_truncated_and_the_run_completes(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    script = tmp_path / "long.py"
    script.write_text(LONG_LINES)
    recorder = Recorder()
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(write_suite(tmp_path / "suite.jsonl", ["answer-42"])),
            repeat=2,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script} {{result_path}}",
            api_key=REAL_KEY,
        ),
        recorder,
    )
    assert outcome.status == "completed"
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert sorted((r["attempt"], r["outcome"]) for r in rows) == [(0, "pass"), (1, "pass")]
    log_path = attempt_folder(outcome.run_dir, "answer-42") / "0.log"
    log = log_path.read_text()
    stdout_lines = [line for line in log.splitlines() if line.startswith("[stdout]")]
    assert len(stdout_lines) == 2
    assert stdout_lines[0].endswith(f"[line truncated: {8 * 1024 - 10 + 200_000} bytes]")
    assert stdout_lines[1] == "[stdout] after the long line"
    assert "[line truncated: 300000 bytes]" in log
    assert log_path.stat().st_size < 3 * 8 * 1024
    assert "dd-run-" not in log  # not even the start of the run key cut at 8 KiB
    outputs = [e.text for e in recorder.events if isinstance(e, AttemptOutput)]
    assert max(len(text) for text in outputs) < 8 * 1024 + 100
