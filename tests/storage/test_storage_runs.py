"""``run --out s3://…``: durable locally first (a staging folder, shown), published as it
goes as immutable parts a teammate reads live, whole at its end; killed mid-publish and
resumed; the lock object keeps another machine from resuming it; the store's credentials
never reach a harness nor anything written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from signal import SIGINT, SIGKILL

import pytest
from storage_helpers import REAL_KEY, SECRET, Bucket, cli_env, driftdesk, json_of

from driftdesk.providers.harness_env import harness_base_environment
from driftdesk.providers.keys import set_key
from driftdesk.providers.profiles import Profile, ProfileStore
from driftdesk.reruns.simulated_endpoint import SIM_MODEL, SandboxServer
from driftdesk.rundir import remote_view, store

TASKS = ("arith-01", "arith-02", "arith-03", "arith-04", "arith-05", "arith-06")
REPEAT = 3


@pytest.fixture
def sandbox() -> Iterator[SandboxServer]:
    server = SandboxServer(seed=3, latency_ms=400)
    server.start()
    yield server
    server.stop()


def _start_run(
    sandbox: SandboxServer,
    url: str,
    env: dict[str, str] | None = None,
    tasks: tuple[str, ...] = TASKS,
) -> subprocess.Popen[str]:
    ProfileStore().save(
        Profile(name="sim", protocol="openai", base_url=sandbox.base_url, model=SIM_MODEL)
    )
    set_key("sim", REAL_KEY)
    return subprocess.Popen(
        [sys.executable, "-m", "driftdesk", "run", "--profile", "sim", "--suite", "basic",
         "--tasks", ",".join(tasks), "--repeat", str(REPEAT), "--concurrency", "2",
         "--timeout", "20", "--inject", "429=15%:0.01s,500=10%", "--seed", "5", "--out", url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        start_new_session=True,  # its own process group, as a terminal's foreground job
    )  # fmt: skip


def _publisher_of(run: subprocess.Popen[str]) -> int:
    """The pid of the run's publishing child (``python -m driftdesk.reruns.publish``)."""

    def find() -> int | None:
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                cmdline = (entry / "cmdline").read_bytes()
            except (OSError, IndexError, ValueError):
                continue
            if ppid == run.pid and b"driftdesk.reruns.publish" in cmdline:
                return int(entry.name)
        return None

    return int(_wait_for(find, timeout=30))


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True
    return state == "Z"  # exited, not yet reaped by init


def _wait_for(condition, timeout: float = 60.0):  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError("timed out")


def _published_run(bucket: Bucket) -> store.StoredRun | None:
    """The run in the bucket once it has rows there: parts (going on), or a seal (whole)."""
    bucket.fs.invalidate_cache()
    runs = store.list_runs(bucket.fs, f"{bucket.name}/nightly")
    run = next(iter(runs.values()), None)
    if run is None or not (run.parts.get("attempts.jsonl") or run.sealed_reading_set()):
        return None
    return run


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _attempts(report: dict) -> int:
    return int(report["attempts_judged"] + report["link_errors"] + report["harness_errors"])


def _teammate(tmp_path: Path) -> dict[str, str]:
    """Another person's laptop: their own home, cache and data dirs, the same store."""
    other = tmp_path / "teammate"
    other.mkdir(exist_ok=True)
    return cli_env(
        HOME=str(other), XDG_CACHE_HOME=str(other / "cache"), XDG_DATA_HOME=str(other / "data"),
        XDG_CONFIG_HOME=str(other / "config"),
    )  # fmt: skip


@pytest.mark.keyring
def test_a_run_published_as_it_goes_is_read_live_and_whole(
    bucket: Bucket, sandbox: SandboxServer, tmp_path: Path
) -> None:
    url = bucket.url("nightly")
    process = _start_run(sandbox, url)
    live = _wait_for(lambda: _published_run(bucket))
    seen_parts = [bucket.fs.cat_file(p.path) for _, p in live.parts["attempts.jsonl"]]
    teammate = _teammate(tmp_path)
    during = json_of(
        driftdesk("report", store.join(url, live.run_id), "--format", "json", env=teammate)
    )
    live_view = remote_view.view(store.join(url, live.run_id))
    shown_live = remote_view.published_live(live_view)  # its lock object is there
    out, err = process.communicate(timeout=180)
    assert process.returncode == 0, err
    assert shown_live is True
    assert remote_view.published_live(remote_view.view(store.join(url, live.run_id))) is False
    refused = driftdesk("resume", str(live_view))
    assert refused.returncode == 2 and "read-only view" in refused.stderr
    total = len(TASKS) * REPEAT
    assert during["status"] == "running" and 0 < _attempts(during) < total
    assert "staging: " in err and f"published: {url}/{live.run_id}" in out
    staged = next(Path(os.environ["XDG_DATA_HOME"]).glob(f"driftdesk/staging/*/{live.run_id}"))
    assert not Path.cwd().joinpath("s3:").exists()

    final = _published_run(bucket)
    assert final is not None and final.lock is None  # let go at the end
    # sealed whole, its parts dropped; the rows a teammate saw live were never rewritten
    assert not final.parts and final.sealed_reading_set() is not None
    whole = (staged / "attempts.jsonl").read_bytes()
    assert whole.startswith(b"".join(seen_parts)) and len(whole) > len(b"".join(seen_parts))
    remote = json_of(driftdesk("report", store.join(url, live.run_id), "--format", "json",
                               env=teammate))  # fmt: skip
    local = json_of(driftdesk("report", str(staged), "--format", "json"))
    assert _attempts(remote) == _attempts(local) == total
    assert {k: v for k, v in remote.items() if k not in ("source", "run_dir")} == {
        k: v for k, v in local.items() if k not in ("source", "run_dir")
    }
    assert remote["status"] == "completed"
    explained = driftdesk("explain", store.join(url, live.run_id), "arith-01", "--json",
                          env=teammate)  # fmt: skip
    local_explained = json_of(driftdesk("explain", str(staged), "arith-01", "--json"))
    assert json_of(explained) == {**local_explained, "run_dir": json_of(explained)["run_dir"]}
    assert local_explained["attempts"] or local_explained
    # the whole run is there: logs and transcripts published at its end
    bundled = store.bundled_files(bucket.fs, final)
    assert any(name.startswith("attempts/") and name.endswith(".log") for name in bundled)
    assert len(final.bundles) < len(bundled) / 5  # a handful of objects, not one a file
    for path, _ in bucket.objects().items():
        assert SECRET.encode() not in bucket.fs.cat_file(path), path
        assert REAL_KEY.encode() not in bucket.fs.cat_file(path), path


@pytest.mark.keyring
def test_a_run_killed_mid_publish_resumes_and_no_other_machine_can(
    bucket: Bucket, sandbox: SandboxServer, tmp_path: Path
) -> None:
    url = bucket.url("nightly")
    process = _start_run(sandbox, url)
    live = _wait_for(lambda: _published_run(bucket))
    publisher = _publisher_of(process)
    os.kill(process.pid, SIGKILL)
    process.wait(10)
    _wait_for(lambda: _gone(publisher), timeout=10)  # its publisher stops with it, unsaid
    killed = _published_run(bucket)
    assert killed is not None and killed.lock is not None  # its lock stays: nobody let go
    run_url = store.join(url, live.run_id)

    refused = driftdesk("resume", run_url, env=_teammate(tmp_path))
    assert refused.returncode != 0
    assert "two machines never resume one run" in refused.stderr

    staged = next(Path(os.environ["XDG_DATA_HOME"]).glob(f"driftdesk/staging/*/{live.run_id}"))
    resumed = driftdesk("resume", str(staged), timeout=180)
    assert resumed.returncode == 0, resumed.stderr
    assert f"published: {run_url}" in resumed.stdout
    pulled = driftdesk("pull", run_url, "--out", str(tmp_path / "pulled"), env=_teammate(tmp_path))
    assert pulled.returncode == 0, pulled.stderr
    rows = _rows(tmp_path / "pulled" / live.run_id / "attempts.jsonl")
    pulled_files = sorted(
        p.relative_to(tmp_path / "pulled" / live.run_id)
        for p in (tmp_path / "pulled" / live.run_id).rglob("*")
        if p.is_file()
    )
    staged_files = sorted(
        p.relative_to(staged)
        for p in staged.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    )
    assert pulled_files == staged_files
    assert rows == _rows(staged / "attempts.jsonl")
    slots = {(r["task_id"], r["attempt"]) for r in rows}
    assert slots == {(t, a) for t in TASKS for a in range(REPEAT)}
    done = _published_run(bucket)
    assert done is not None and done.lock is None
    manifest = json.loads((tmp_path / "pulled" / live.run_id / "manifest.json").read_text())
    assert manifest["status"] == "completed" and len(manifest["resumes"]) == 1


@pytest.mark.keyring
def test_a_run_stopped_by_ctrl_c_is_published_whole_by_a_publisher_without_provider_keys(
    bucket: Bucket, sandbox: SandboxServer
) -> None:
    planted = "sk-planted-PROVIDER-key-in-the-runs-env-0123456789"
    process = _start_run(sandbox, bucket.url("nightly"), env=cli_env(OPENAI_API_KEY=planted))
    live = _wait_for(lambda: _published_run(bucket))
    publisher = _publisher_of(process)
    given = dict(
        item.split(b"=", 1)
        for item in Path(f"/proc/{publisher}/environ").read_bytes().split(b"\0")
        if b"=" in item
    )
    assert given[b"AWS_SECRET_ACCESS_KEY"] == SECRET.encode()  # the store's chain: it needs it
    assert b"OPENAI_API_KEY" not in given and planted.encode() not in b"".join(given.values())
    assert REAL_KEY.encode() not in b"".join(given.values())
    os.killpg(process.pid, SIGINT)  # Ctrl-C in a terminal: the foreground group
    out, err = process.communicate(timeout=120)
    assert f"published: {bucket.url('nightly', live.run_id)}" in out, err
    assert _gone(publisher)
    stopped = _published_run(bucket)
    assert stopped is not None and stopped.lock is None  # let go: published whole
    assert stopped.sealed_reading_set() is not None
    manifest = json.loads(bucket.fs.cat_file(f"{stopped.path}/manifest.json"))
    assert manifest["status"] == "interrupted"


@pytest.mark.keyring
def test_two_runs_to_one_url_from_two_terminals_each_publish_their_own(
    bucket: Bucket, sandbox: SandboxServer
) -> None:
    url = bucket.url("nightly")
    long = _start_run(sandbox, url)
    live = _wait_for(lambda: _published_run(bucket))  # staged, and published as it goes
    staged = next(Path(os.environ["XDG_DATA_HOME"]).glob(f"driftdesk/staging/*/{live.run_id}"))
    paused = driftdesk("ctl", str(staged), "--pause")  # held live while the other one runs
    assert paused.returncode == 0, paused.stderr
    short = _start_run(sandbox, url, tasks=TASKS[:1])
    out, err = short.communicate(timeout=120)
    still_running = long.poll() is None
    assert driftdesk("ctl", str(staged), "--unpause").returncode == 0
    assert short.returncode == 0, err
    said = [line for line in out.splitlines() if line.startswith("published:")]
    assert len(said) == 1 and live.run_id not in said[0], out  # its own, not the other's
    bucket.fs.invalidate_cache()
    runs = store.list_runs(bucket.fs, f"{bucket.name}/nightly")
    assert set(runs) == {live.run_id, said[0].rsplit("/", 1)[1]}
    assert still_running and runs[live.run_id].lock is not None  # live: nobody let go of it
    out, err = long.communicate(timeout=180)
    assert long.returncode == 0, err
    assert [line for line in out.splitlines() if line.startswith("published:")] == [
        f"published: {url}/{live.run_id}"
    ]
    bucket.fs.invalidate_cache()
    for run in store.list_runs(bucket.fs, f"{bucket.name}/nightly").values():
        assert run.lock is None and run.sealed_reading_set() is not None, run.run_id


def test_the_stores_credentials_never_reach_a_harness() -> None:
    environ = {
        "PATH": "/usr/bin",
        "HOME": "/home/u",
        "AWS_ACCESS_KEY_ID": "AKIA0000",
        "AWS_SECRET_ACCESS_KEY": SECRET,
        "AWS_SESSION_TOKEN": "token",
        "AWS_PROFILE": "team",
        "AWS_ENDPOINT_URL": "http://127.0.0.1:1",
        "GOOGLE_APPLICATION_CREDENTIALS": "/k.json",
        "AZURE_STORAGE_KEY": "k",
    }
    given = harness_base_environment(environ=environ)
    assert set(given) == {"PATH", "HOME"}
