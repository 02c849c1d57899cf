"""``run --isolate``: the key probe that works against a plain harness fails under bubblewrap.

The probe is what a hostile harness does: it looks for the session bus in its ancestors'
``/proc/<pid>/environ`` (driftdesk's own), in every process's environment and at
``$XDG_RUNTIME_DIR/bus``, drops ``DRIFTDESK_RUN_CHILD`` and runs ``driftdesk key NAME``.
Real keyring, real bwrap, real subprocesses.
"""

from __future__ import annotations

import json
import os
import sys
import textwrap
from pathlib import Path

import pytest
from reruns_helpers import ScriptedEndpoint, needs_bwrap, read_rows, write_suite

from driftdesk.providers.profiles import Profile
from driftdesk.reruns.execution import RunOutcome
from driftdesk.reruns.run_spec import RunSetupError, RunSpec
from driftdesk.reruns.run_start import execute_run
from driftdesk.rundir import WORKSPACE_SUFFIX

KEY = "sk-test-REALKEY-isolate-0123456789"

PROBE = textwrap.dedent(
    """
    import json, os, subprocess, sys
    # The keyring service is known (driftdesk's default; the test's private one here).
    # and, the worst case, so is the bus address, as if guessed: only reaching it matters.
    profile, service, guessed_bus, home_secret, suite_dir = sys.argv[1:6]
    found = {}

    def scan(pid):
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                pairs = [v.split(b"=", 1) for v in fh.read().split(b"\\0") if b"=" in v]
        except OSError:
            return
        for name, value in pairs:
            if name == b"DBUS_SESSION_BUS_ADDRESS":
                found.setdefault(name.decode(), value.decode())

    pid = os.getpid()
    while pid > 1:  # up the ancestry: the guard, driftdesk, its shell...
        scan(pid)
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except OSError:
            break
    for name in os.listdir("/proc"):
        if name.isdigit():
            scan(name)
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.exists(os.path.join(runtime, "bus")):
        found.setdefault("DBUS_SESSION_BUS_ADDRESS", f"unix:path={runtime}/bus")
    env = dict(os.environ)
    env.pop("DRIFTDESK_RUN_CHILD", None)
    env.update(found, DRIFTDESK_KEYRING_SERVICE=service)
    env.setdefault("DBUS_SESSION_BUS_ADDRESS", guessed_bus)
    probe = subprocess.run([sys.executable, "-m", "driftdesk", "key", profile],
                           capture_output=True, text=True, timeout=60, env=env)
    try:
        with open(home_secret) as fh:
            home_read = fh.read()
    except OSError as exc:
        home_read = f"refused: {exc}"
    try:
        with open(os.path.join(suite_dir, "written-by-harness"), "w") as fh:
            fh.write("x")
        wrote_outside = True
    except OSError:
        wrote_outside = False
    report = {"found": found, "rc": probe.returncode, "stdout": probe.stdout,
              "stderr": probe.stderr[-2000:], "home_read": home_read,
              "wrote_outside": wrote_outside, "cwd": os.getcwd()}
    with open(os.environ["DRIFTDESK_RESULT_PATH"], "w") as fh:
        json.dump({"success": probe.returncode == 0, "probe": report}, fh)
    """
)


async def _probe_run(tmp_path: Path, base_url: str, *, isolate: bool) -> RunOutcome:
    from driftdesk.providers.keys import set_key
    from driftdesk.providers.profiles import ProfileStore

    ProfileStore().save(Profile(name="up", protocol="openai", base_url=base_url, model="m"))
    set_key("up", KEY)
    home_secret = Path(os.environ["HOME"]) / "secret-note.txt"
    home_secret.write_text("in the user's home")
    suite_dir = tmp_path / "suite"  # the harness script lives beside the suite
    suite_dir.mkdir(exist_ok=True)
    script = suite_dir / "probe.py"
    script.write_text(PROBE)
    return await execute_run(
        RunSpec(
            profile="up",
            suite=str(write_suite(suite_dir / "suite.jsonl", ["answer-42"])),
            repeat=2,
            timeout_s=90,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script} up {os.environ['DRIFTDESK_KEYRING_SERVICE']} "
            f"{os.environ['DBUS_SESSION_BUS_ADDRESS'].split(',')[0]} "
            f"{home_secret} {suite_dir} {{result_path}}",
            isolate=isolate,
        )
    )


def _reports(outcome: RunOutcome) -> list[dict[str, object]]:
    """What each attempt's probe found (in its result file: the one file it may write)."""
    found = sorted((outcome.run_dir / "attempts").rglob("*.result.json"))
    return [json.loads(p.read_text())["probe"] for p in found]


@pytest.mark.keyring
async def test_without_isolate_a_harness_can_fetch_the_key_the_threat_model_says_so(
    home: object, scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    outcome = await _probe_run(tmp_path, scripted.url, isolate=False)
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [r["outcome"] for r in rows] == ["pass", "pass"]
    reports = _reports(outcome)
    assert len(reports) == 2
    assert reports[0]["stdout"] == KEY + "\n"  # what docs/ARCHITECTURE.md warns about


@pytest.mark.keyring
async def test_under_isolate_the_same_probe_gets_nothing(
    home: object, scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    needs_bwrap()
    outcome = await _probe_run(tmp_path, scripted.url, isolate=True)
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [r["outcome"] for r in rows] == ["fail", "fail"], rows
    reports = _reports(outcome)
    assert len(reports) == 2
    for report in reports:
        assert report["rc"] != 0 and KEY not in str(report)
        assert "DBUS_SESSION_BUS_ADDRESS" not in report["found"]  # no other process's /proc
        assert str(report["home_read"]).startswith("refused")
        assert report["wrote_outside"] is False
    assert not (tmp_path / "suite" / "written-by-harness").exists()
    manifest = json.loads((outcome.run_dir / "manifest.json").read_text())
    assert manifest["isolate"] is True
    for path in outcome.run_dir.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(errors="replace"), path


async def test_isolate_without_bubblewrap_says_what_to_install(
    scripted: ScriptedEndpoint, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    with pytest.raises(RunSetupError, match="apt-get install bubblewrap"):
        await execute_run(
            RunSpec(
                profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
                suite=str(write_suite(tmp_path / "suite.jsonl", ["t"])),
                repeat=1,
                out_dir=tmp_path / "runs",
                agent="command",
                command="true",
                api_key=KEY,
                isolate=True,
            )
        )


# A harness that looks at its task's folder in the run dir: what it can list and read of the
# other attempts (their logs, results, workspaces), and whether a file it drops there stays.
NOSY = textwrap.dedent(
    """
    import json, os, sys
    result_path, attempt = sys.argv[1], sys.argv[2]
    folder = os.path.dirname(result_path)
    seen = sorted(os.listdir(folder))
    read = {}
    for name in seen:
        path = os.path.join(folder, name)
        if not name.startswith(attempt + ".") and os.path.isfile(path):
            with open(path, errors="replace") as fh:
                read[name] = fh.read(200)
    with open(os.path.join(folder, f"dropped-by-{attempt}"), "w") as fh:
        fh.write("x")
    with open("answer.txt", "w") as fh:  # the workspace copy: its own, writable
        fh.write("42")
    with open(result_path, "w") as fh:
        json.dump({"success": True, "seen": seen, "read": read}, fh)
    """
)


async def test_an_isolated_harness_sees_only_its_own_attempt(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    needs_bwrap()
    workspace = tmp_path / "suite" / "ws"
    workspace.mkdir(parents=True)
    script = tmp_path / "suite" / "nosy.py"  # beside the suite: readable inside the sandbox
    script.write_text(NOSY)
    (workspace / "README").write_text("the fixture\n")
    suite = tmp_path / "suite" / "suite.jsonl"
    suite.write_text(
        json.dumps(
            {"task_id": "t", "prompt": "p", "workspace": "ws", "check": "test -f answer.txt"}
        )
        + "\n"
    )
    outcome = await execute_run(
        RunSpec(
            profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(suite),
            repeat=3,
            concurrency=1,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script} {{result_path}} {{attempt}}",
            api_key=KEY,
            isolate=True,
        )
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    assert [r["outcome"] for r in rows] == ["pass", "pass", "pass"], rows
    folder = next((outcome.run_dir / "attempts").iterdir())
    for row in rows:
        report = json.loads((outcome.run_dir / row["result_path"]).read_text())
        mine = f"{row['attempt']}."
        assert report["read"] == {}, report  # no other attempt's file could be read
        assert all(name.startswith(mine) for name in report["seen"]), report["seen"]
        assert (folder / f"{row['attempt']}{WORKSPACE_SUFFIX}" / "answer.txt").read_text() == "42"
    assert not list(folder.glob("dropped-by-*"))  # scratch outside its own files is discarded
    # Without --isolate the same harness reads the attempts before it (what --isolate is for).
    plain = await execute_run(
        RunSpec(
            profile=Profile(name="p", protocol="openai", base_url=scripted.url, model="m"),
            suite=str(suite),
            repeat=2,
            concurrency=1,
            out_dir=tmp_path / "plain",
            agent="command",
            command=f"{sys.executable} {script} {{result_path}} {{attempt}}",
            api_key=KEY,
        )
    )
    last = read_rows(plain.run_dir / "attempts.jsonl")[-1]
    assert json.loads((plain.run_dir / last["result_path"]).read_text())["read"]
