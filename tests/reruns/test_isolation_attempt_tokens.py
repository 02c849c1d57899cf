"""Hardening round 4 (issue #46): an ``--isolate``d harness acting as another attempt, or
reading other tasks' files when the run dir lives outside ``$HOME`` and ``/tmp``.

Real runs: the real engine and metering proxy, real bubblewrap, real harness subprocesses, a
real loopback provider. The hostile harness is a small Python script that does what the issue's
abuse pass did.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from recording_helpers import read_records, recording_of
from reruns_helpers import ScriptedEndpoint, needs_bwrap, read_rows

from driftdesk.providers.profiles import Profile
from driftdesk.reruns import rundir
from driftdesk.reruns.run_spec import RunSpec
from driftdesk.reruns.run_start import execute_run

KEY = "sk-test-REALKEY-round4-0123456789"
ATTACK_TEXT = "ATTACKER-TEXT-8c1f"

# Victims make one call and stay open a while; the attacker waits for them, then calls under
# every token it can derive from its own URL (the old scheme: a run prefix plus a hex counter),
# and under near variants of its own token whatever the scheme.
NEIGHBOURS = textwrap.dedent(
    """
    import json, os, re, sys, time, urllib.error, urllib.request
    task = os.environ["DRIFTDESK_TASK_ID"]
    base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]

    def call(url, text):
        body = json.dumps({"model": "m", "stream": True, "messages": [
            {"role": "user", "content": "behave:answer-42 " + text}]}).encode()
        request = urllib.request.Request(url + "/chat/completions", data=body, headers={
            "Authorization": "Bearer " + key, "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                response.read()
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    if task.startswith("victim"):
        status = call(base, "the victim's own question")
        time.sleep(5)  # this try stays open while the attacker calls
        result = {"success": status == 200}
    else:
        time.sleep(1.5)
        root, token = base.rsplit("/a/", 1)
        guesses = set()
        derived = re.fullmatch(r"(.*-)([0-9a-f]+)", token)
        if derived:
            for step in range(-8, 9):
                number = int(derived.group(2), 16) + step
                if step and number >= 0:
                    guesses.add(derived.group(1) + format(number, "x"))
        guesses |= {token[:-1] + c for c in "0123456789abcdefABCDEF-_"} - {token}
        statuses = {g: call(f"{root}/a/{g}", sys.argv[1]) for g in sorted(guesses)}
        result = {"success": call(base, "the attacker's own question") == 200,
                  "statuses": statuses}
    with open(os.environ["DRIFTDESK_RESULT_PATH"], "w") as fh:
        json.dump(result, fh)
    """
)


def _suite(path: Path, task_ids: list[str]) -> Path:
    with open(path, "w", encoding="utf-8") as fh:
        for task_id in task_ids:
            task = {"task_id": task_id, "prompt": "What is six times seven?"}
            fh.write(json.dumps(task) + "\n")
    return path


def _shared_start(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def _profile(url: str) -> Profile:
    return Profile(name="up", protocol="openai", base_url=url, model="m")


async def test_an_isolated_harness_cannot_call_the_proxy_as_another_attempt(
    scripted: ScriptedEndpoint, tmp_path: Path
) -> None:
    needs_bwrap()
    suite_dir = tmp_path / "suite"
    suite_dir.mkdir()
    script = suite_dir / "neighbours.py"
    script.write_text(NEIGHBOURS)
    outcome = await execute_run(
        RunSpec(
            profile=_profile(scripted.url),
            suite=str(_suite(suite_dir / "suite.jsonl", ["victim-a", "attacker", "victim-b"])),
            repeat=1,
            concurrency=3,
            timeout_s=60,
            out_dir=tmp_path / "runs",
            agent="command",
            command=f"{sys.executable} {script} {ATTACK_TEXT}",
            api_key=KEY,
            isolate=True,
        )
    )
    rows = {r["task_id"]: r for r in read_rows(outcome.run_dir / "attempts.jsonl")}
    assert {t: r["outcome"] for t, r in rows.items()} == dict.fromkeys(rows, "pass")
    result_file = outcome.run_dir / rows["attacker"]["result_path"]
    statuses = json.loads(result_file.read_text())["statuses"]
    assert len(statuses) >= 20
    assert set(statuses.values()) == {404}, statuses  # every guess refused
    # Each attempt's row, calls and recording hold its own one call and nothing of the attack.
    assert {t: r["calls"] for t, r in rows.items()} == dict.fromkeys(rows, 1)
    calls = read_rows(outcome.run_dir / rundir.CALLS)
    assert sorted((c["task_id"], c["call_index"]) for c in calls) == [
        ("attacker", 0),
        ("victim-a", 0),
        ("victim-b", 0),
    ]
    for victim in ("victim-a", "victim-b"):
        records, torn = read_records(recording_of(outcome.run_dir, victim, 0))
        assert not torn and len(records) == 1
        assert ATTACK_TEXT not in json.dumps(records)
        assert "the victim's own question" in json.dumps(records)
    assert scripted.requests["answer-42"] == 3  # the upstream never heard the attack


async def test_tokens_share_nothing_and_a_closed_one_is_never_reissued(
    scripted: ScriptedEndpoint,
) -> None:
    from driftdesk.reruns.proxy import MeteringProxy

    proxy = MeteringProxy(
        run_id="r", upstream_base_url=scripted.url, protocol="openai", real_key=KEY
    )
    tokens = [proxy.open_attempt("t", n) for n in range(200)]
    assert len(set(tokens)) == 200
    for token in tokens:
        assert len(token) >= 24  # 144 random bits, URL-safe
        assert proxy.run_key not in token
    # No two tokens share a start longer than chance gives (a counter scheme shares most).
    longest = max(_shared_start(a, b) for a, b in itertools.pairwise(tokens))
    assert longest <= 4
    for token in tokens:
        proxy.close_attempt(token)
    again = {proxy.open_attempt("t", n) for n in range(200)}
    assert not again & set(tokens)


# A harness that looks for everything of the run and of other runs it can: it walks the run
# dir (its path is in DRIFTDESK_RUN_DIR), the folder of runs around it and the configured runs
# folder, reads every file but its own, and drops a file beside the run dir.
SNOOP = textwrap.dedent(
    """
    import json, os, sys
    own = {os.environ["DRIFTDESK_RESULT_PATH"], os.environ["DRIFTDESK_PROMPT_FILE"]}
    run_dir = os.environ["DRIFTDESK_RUN_DIR"]
    seen, read = [], {}
    for top in (run_dir, os.path.dirname(run_dir), *sys.argv[1:]):
        for folder, _, files in os.walk(top):
            for name in files:
                path = os.path.join(folder, name)
                seen.append(path)
                if path not in own:
                    try:
                        with open(path, errors="replace") as fh:
                            read[path] = fh.read(300)
                    except OSError:
                        pass
    try:
        with open(os.path.join(os.path.dirname(run_dir), "dropped-by-harness"), "w") as fh:
            fh.write("x")
    except OSError:
        pass
    with open(os.environ["DRIFTDESK_PROMPT_FILE"]) as fh:
        prompt = fh.read()
    with open(os.environ["DRIFTDESK_RESULT_PATH"], "w") as fh:
        json.dump({"success": True, "seen": seen, "read": read, "prompt": prompt}, fh)
    """
)


@pytest.fixture
def outside_home_and_tmp() -> Iterator[Path]:
    """A folder right under / (neither $HOME nor /tmp nor /var/tmp), as ``--out /srv/...`` or a
    CI checkout under /builds would be; removed afterwards."""
    base = Path(f"/dd-round4-{uuid.uuid4().hex[:10]}")
    try:
        base.mkdir(mode=0o700)
    except OSError as exc:
        pytest.skip(f"cannot make a folder under /: {exc}")
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


def _plant_run(folder: Path, secret: str) -> None:
    """An earlier run's files, holding ``secret``."""
    (folder / "attempts" / "t-0").mkdir(parents=True)
    (folder / "manifest.json").write_text(json.dumps({"run_id": secret}))
    (folder / "attempts.jsonl").write_text(json.dumps({"answer": secret}) + "\n")
    (folder / "calls.jsonl").write_text(json.dumps({"said": secret}) + "\n")
    (folder / "attempts" / "t-0" / "0.log").write_text(secret)


@pytest.mark.parametrize(
    "layout", ["runs-apart", "out-in-project", "out-in-project-many-runs", "suite-among-runs"]
)
async def test_an_isolated_harness_sees_nothing_of_runs_outside_home_and_tmp(
    scripted: ScriptedEndpoint,
    tmp_path: Path,
    outside_home_and_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
    layout: str,
) -> None:
    needs_bwrap()
    base = outside_home_and_tmp
    project = base / "project"
    if layout == "runs-apart":  # --out /srv/runs, the suite elsewhere
        suite_dir, tools, out_dir = tmp_path / "suite", tmp_path / "suite", base / "runs"
    elif layout.startswith("out-in-project"):  # --out . in a project: suite, harness in it
        suite_dir, tools, out_dir = project / "evals", project / "tools", project
    else:  # --out . where the suite and the harness are
        suite_dir = tools = out_dir = project
    for folder in (suite_dir, tools, out_dir):
        folder.mkdir(parents=True, exist_ok=True)
    _plant_run(out_dir / "earlier-run", "EARLIER-RUN-SECRET")
    if layout.endswith("many-runs"):  # more runs than other entries: hidden another way
        for n in range(4):
            _plant_run(out_dir / f"earlier-run-{n}", "EARLIER-RUN-SECRET")
        (out_dir / "tools-link").symlink_to("tools")
    configured = base / "configured-runs"
    _plant_run(configured / "old-run", "CONFIGURED-RUN-SECRET")
    (configured / "notes.txt").write_text("CONFIGURED-FOLDER-NOTE")
    monkeypatch.setenv("DRIFTDESK_RUNS_DIR", str(configured))
    script = tools / "snoop.py"
    script.write_text(SNOOP)
    with open(suite_dir / "suite.jsonl", "w") as fh:
        for task_id in ("alpha", "beta"):
            fh.write(json.dumps({"task_id": task_id, "prompt": f"PROMPT-OF-{task_id}"}) + "\n")
    outcome = await execute_run(
        RunSpec(
            profile=_profile(scripted.url),
            suite=str(suite_dir / "suite.jsonl"),
            repeat=2,
            concurrency=2,
            timeout_s=60,
            out_dir=out_dir,
            agent="command",
            command=f"{sys.executable} {script} {configured}",
            api_key=KEY,
            isolate=True,
        )
    )
    rows = read_rows(outcome.run_dir / "attempts.jsonl")
    logs = [p.read_text() for p in (outcome.run_dir / "attempts").rglob("*.log")]
    assert [r["outcome"] for r in rows] == ["pass"] * 4, logs
    runs = (outcome.run_dir, *out_dir.glob("earlier-run*"), configured)
    for row in rows:
        report = json.loads((outcome.run_dir / row["result_path"]).read_text())
        assert report["prompt"] == f"PROMPT-OF-{row['task_id']}"  # its own prompt: readable
        # Of the runs, it sees its own files only (the project's other files are its to read).
        own = outcome.run_dir / row["result_path"]
        seen = {Path(p) for p in report["seen"] if any(Path(p).is_relative_to(r) for r in runs)}
        assert {p for p in seen if not p.name.endswith(".prompt.txt")} == {own}, seen
        assert len(seen) == 2, seen
        read = {p: text for p, text in report["read"].items() if Path(p) in seen}
        assert read == {}, read
        leaked = json.dumps(report["read"])
        for secret in ("EARLIER-RUN-SECRET", "CONFIGURED-RUN-SECRET", "CONFIGURED-FOLDER-NOTE"):
            assert secret not in leaked
        other = "beta" if row["task_id"] == "alpha" else "alpha"
        leaked_outside_suite = json.dumps(
            {p: t for p, t in report["read"].items() if Path(p).parent != suite_dir}
        )
        assert f"PROMPT-OF-{other}" not in leaked_outside_suite
    assert not (outcome.run_dir.parent / "dropped-by-harness").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["report", "{run}"],
        ["resume", "{run}"],
        ["explain", "{run}", "t"],
        ["cache", "clear"],
        ["trend", "{runs}"],
        ["run", "--suite", "basic", "--profile", "p"],
        ["tui"],
    ],
    ids=lambda c: c[0],
)
def test_a_harness_cannot_read_or_control_runs_through_driftdesk(
    cli: Any, tmp_path: Path, command: list[str]
) -> None:
    run = tmp_path / "runs" / "earlier-run"
    run.mkdir(parents=True)
    _plant_run(run, "EARLIER-RUN-SECRET")
    before = sorted((p.relative_to(tmp_path), p.read_bytes()) for p in run.rglob("*.*"))
    argv = [a.format(run=run, runs=run.parent) for a in command]
    env = dict(os.environ, DRIFTDESK_RUN_CHILD="up-m-1")
    refused = cli(*argv, env=env)
    assert refused.returncode == 1
    assert "DRIFTDESK_RUN_CHILD is set" in refused.stderr and refused.stdout == ""
    assert "EARLIER-RUN-SECRET" not in refused.stderr
    assert sorted((p.relative_to(tmp_path), p.read_bytes()) for p in run.rglob("*.*")) == before
    if command[0] == "report":  # the same command outside a run reads the run
        env.pop("DRIFTDESK_RUN_CHILD")
        assert "DRIFTDESK_RUN_CHILD" not in cli(*argv, env=env).stderr
